package perf

import (
	"testing"

	"github.com/softmrc/softmrc/nic/verbs"
)

// A window check finds every write that did not land: a slot still holding
// the previous window's iteration (the write was lost), a slot with one
// packet's worth of old bytes (a partial write), a write placed in the
// wrong slot, and the round's initial zeroes. Under the old per-slot
// patterns the first two would have passed, since the slot's previous
// write carried the same bytes.
func TestCheckSlotsCatchesLostWrites(t *testing.T) {
	const k = 4
	for _, size := range []int{2, 7, 8, 4096, 65536} {
		fill := func(q *qpCtx, win uint64) {
			for j := 0; j < k; j++ {
				iterPattern(q.dst.Buf[j*size:(j+1)*size], size, win*k+uint64(j), q.idx)
			}
		}
		tests := []struct {
			name  string
			fault func(q *qpCtx)
			bad   bool
		}{
			{"all landed", func(q *qpCtx) {}, false},
			{"lost write", func(q *qpCtx) {
				iterPattern(q.dst.Buf[2*size:3*size], size, 0*k+2, q.idx) // window 0's bytes remain
			}, true},
			{"partial write", func(q *qpCtx) {
				old := make([]byte, size)
				iterPattern(old, size, 1, q.idx)
				n := min(size, 2048)
				copy(q.dst.Buf[size+size-n:2*size], old[size-n:]) // the last packet never landed
			}, true},
			{"misplaced", func(q *qpCtx) {
				copy(q.dst.Buf[0:size], q.dst.Buf[3*size:4*size])
			}, true},
			{"never written", func(q *qpCtx) {
				clear(q.dst.Buf[3*size : 4*size])
			}, true},
		}
		for _, tc := range tests {
			q := &qpCtx{idx: 1, dst: &verbs.MR{Buf: make([]byte, k*size)}}
			fill(q, 1)
			tc.fault(q)
			r := result{FirstBad: -1}
			checkSlots(&r, q, size, 1*k, k, make([]byte, size))
			if got := r.Mismatches > 0; got != tc.bad {
				t.Errorf("size %d, %s: %d mismatches, want bad=%v", size, tc.name, r.Mismatches, tc.bad)
			}
			if r.Checked != uint64(k*size) {
				t.Errorf("size %d, %s: checked %d bytes, want %d", size, tc.name, r.Checked, k*size)
			}
		}
	}
}

// The check immediates never collide with the latency test's stop
// immediate, and round-trip their window and count.
func TestCheckImmediates(t *testing.T) {
	for _, win := range []uint64{0, 1, immWinMask, immWinMask + 1, 1 << 40} {
		for _, count := range []int{0, 1, 128, maxVerifyWindow} {
			req := checkReq(win, count)
			if !isVerifyImm(req) || req&immAck != 0 || int(req&immCntMask) != count || uint64(req>>immWinShift&immWinMask) != win&immWinMask {
				t.Errorf("checkReq(%d, %d) = %#x", win, count, req)
			}
		}
		ack := checkAck(win)
		if !isVerifyImm(ack) || ack&immAck == 0 || ack == stopImm {
			t.Errorf("checkAck(%d) = %#x", win, ack)
		}
	}
	if isVerifyImm(stopImm) || isVerifyImm(12345) {
		t.Error("stop or ping immediates taken for verify immediates")
	}
}
