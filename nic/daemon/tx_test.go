package daemon

import (
	"testing"

	"github.com/softmrc/softmrc/internal/mrc"
	"github.com/softmrc/softmrc/nic/xsk"
)

// The queue holds frames only while the port's ring is full: everything
// the ring takes goes at once (no pacing here: the engine paces), the rest
// in order once the ring drains.
//
// Built in the port (frames encoded straight into its buffers while it has
// room) or in the queue's buffers only, the frames leave in the order they
// were built.
func TestPortTxRingFull(t *testing.T) {
	for _, direct := range []bool{false, true} {
		t.Run(map[bool]string{false: "queue", true: "in the port"}[direct], func(t *testing.T) {
			testPortTxRingFull(t, direct)
		})
	}
}

func testPortTxRingFull(t *testing.T, direct bool) {
	a, b := xsk.NewPipe("qa", "qb", 8) // a ring of 8 frames
	var tx portTx
	if direct {
		tx.init(a)
	} else {
		tx.init(nil)
	}
	var c counters
	for i := 0; i < 20; i++ {
		buf := tx.slot()
		if buf == nil {
			t.Fatal("queue full")
		}
		buf[0] = byte(i)
		if f := tx.push(1); len(f) != 1 || f[0] != byte(i) {
			t.Fatalf("push returned %v for frame %d", f, i)
		}
	}
	if direct && (tx.pending != 8 || tx.n != 12) {
		t.Fatalf("%d frames built in the port and %d queued, want 8 (its room) and 12", tx.pending, tx.n)
	}
	if n := tx.flush(a, &c); n != 8 {
		t.Fatalf("flush sent %d frames into a ring of 8, want 8", n)
	}
	if tx.n != 12 || tx.next(0) == mrc.Never {
		t.Fatalf("%d frames wait (want 12), retry at %v", tx.n, tx.next(0))
	}
	var got []byte
	bufs := [][]byte{make([]byte, 64)}
	for len(got) < 20 {
		for {
			bufs[0] = bufs[0][:cap(bufs[0])]
			n, _ := b.Recv(bufs)
			if n == 0 {
				break
			}
			got = append(got, bufs[0][0])
		}
		if tx.flush(a, &c) == 0 && len(got) < 20 && tx.n == 0 {
			break
		}
	}
	for i, v := range got {
		if int(v) != i {
			t.Fatalf("frame %d came out as %d: order lost", i, v)
		}
	}
	if len(got) != 20 || tx.n != 0 || tx.next(0) != mrc.Never || c.txFrames.Load() != 20 {
		t.Fatalf("got %d frames, %d still queued, %d counted; want 20, 0, 20", len(got), tx.n, c.txFrames.Load())
	}
}
