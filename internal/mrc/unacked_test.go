package mrc

import (
	"testing"
	"time"

	"github.com/softmrc/softmrc/internal/wire"
)

// TestUnackedOnAcrossPSNWrap: counting a QP's unacknowledged packets on an
// EV (done when the EV turns ASSUMED_BAD) walks sndUna..sndNxt in PSN
// arithmetic. With a plain psn++ a window that crossed the 24-bit PSN wrap
// never met sndNxt and ran ~2^32 steps: mrc-nicd's loop hung in runTimers ->
// pathFailedAt -> setState -> unackedOn (seen in make bench-nic, 2026-12-03;
// start PSNs are random, so any QP can wrap early).
func TestUnackedOnAcrossPSNWrap(t *testing.T) {
	for _, tc := range []struct {
		name     string
		una, nxt wire.PSN
	}{
		{"no wrap", 100, 106},
		{"wraps", wire.PSNMask - 2, 3},
		{"ends at the wrap", wire.PSNMask - 5, 0},
		{"starts at 0", 0, 6},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, hopts{seed: 1})
			q := h.eng[0].qps[h.qp[0]]
			q.sndUna, q.sndNxt = tc.una, tc.nxt
			n := 0
			for psn := tc.una; psn != tc.nxt; psn = psn.Add(1) {
				pk := q.slot(psn)
				pk.ev, pk.flags = 1, pktSent
				if n%3 == 2 {
					pk.flags |= pktAcked
				}
				n++
			}
			want := n - n/3
			got := make(chan int, 1)
			go func() { got <- q.unackedOn(1) }()
			select {
			case g := <-got:
				if g != want {
					t.Fatalf("unackedOn = %d, want %d (sndUna %#x, sndNxt %#x)", g, want, uint32(tc.una), uint32(tc.nxt))
				}
			case <-time.After(3 * time.Second):
				t.Fatalf("unackedOn(sndUna %#x, sndNxt %#x) still running after 3 s: it does not stop at sndNxt across the PSN wrap", uint32(tc.una), uint32(tc.nxt))
			}
		})
	}
}
