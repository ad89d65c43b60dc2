package mrc

import (
	"slices"
	"testing"

	"github.com/softmrc/softmrc/internal/wire"
)

// TestUnsignaled: an unsignaled WR completes nothing when it succeeds, and
// on an MRC QP its last packet asks for an immediate SACK only when nothing
// is queued behind it; a signaled WR's does, and so does every last packet
// of an in-order transport (GoBackN, RoCE). Every byte still lands, and an
// unsignaled WR that fails still completes.
func TestUnsignaled(t *testing.T) {
	for _, c := range []struct {
		tr Transport
		// every: every message's last packet carries AckReq
		every bool
	}{
		{MRC, false},
		{GoBackN, true},
		{RoCE, true},
	} {
		t.Run(c.tr.String(), func(t *testing.T) {
			h := newHarness(t, hopts{seed: 3, qc: QPConfig{Transport: c.tr}})
			const n, size = 40, 3000 // 2 packets per message at MTU 2048
			src := h.region(0, 0x11, 0x10000, n*size, AccessLocalRead)
			for i := range src {
				src[i] = byte(i * 7)
			}
			dst := make([]byte, n*size)
			h.mem[1].Register(0x22, 0x900000, dst, AccessRemoteWrite)
			// Last packets with AckReq, by message (PSN order of the
			// first transmission: message i's last packet is PSN 2i+1).
			ackReq := map[int]bool{}
			var first wire.PSN
			seen := false
			h.Filter = func(from int, _ wire.Plane, f []byte) bool {
				var p wire.Packet
				if from != 0 || (wire.Decoder{}).Decode(f, &p) != nil || !p.Opcode.IsData() || p.Rtx {
					return false
				}
				if !seen {
					first, seen = p.PSN, true
				}
				if d := int(p.PSN.Diff(first)); d%2 == 1 {
					ackReq[d/2] = p.AckReq
				}
				return false
			}
			// Every 10th signaled, the last (39) not; all posted at once,
			// so only the last has nothing queued behind it.
			signaled := func(i int) bool { return i%10 == 9 && i != n-1 }
			for i := 0; i < n; i++ {
				wr := WR{ID: uint64(i), LKey: 0x11, Addr: 0x10000 + uint64(i*size), Len: size, RemoteVA: 0x900000 + uint64(i*size), RKey: 0x22,
					Unsignaled: !signaled(i)}
				if err := h.eng[0].PostWrite(h.qp[0], wr); err != nil {
					t.Fatal(err)
				}
			}
			var got []uint64
			if !h.run(100*Millisecond, func() bool {
				for _, cq := range h.drainCQ(0) {
					if cq.Status != StatusOK {
						t.Fatalf("completion %+v", cq)
					}
					got = append(got, cq.WRID)
				}
				s := h.snap(0)
				return s.SndUna == s.SndNxt && s.Counters.MsgsSent == n
			}) {
				t.Fatalf("not done: completions %v, snap %+v", got, h.snap(0).Counters)
			}
			if want := []uint64{9, 19, 29}; !slices.Equal(got, want) {
				t.Errorf("completions %v, want the signaled ones %v", got, want)
			}
			for i := range dst {
				if dst[i] != src[i] {
					t.Fatalf("byte %d: %#x, want %#x", i, dst[i], src[i])
				}
			}
			for i := 0; i < n; i++ {
				want := c.every || signaled(i) || i == n-1
				if r, ok := ackReq[i]; !ok || r != want {
					t.Errorf("message %d (signaled %v): last packet AckReq %v (sent %v), want %v", i, signaled(i), r, ok, want)
				}
			}
		})
	}
}
