package mrc

import (
	"bytes"
	"testing"
)

// TestStalledPeerNoRetransmitStorm: one side's engine is off the CPU for a
// while in the middle of a transfer (a soft NIC's daemon descheduled on a
// loaded host) on a lossless link; frames wait in its receive ring. The
// sender hears nothing for longer than its RTO, but a silence that covers
// the whole QP is no evidence against any one path: one packet goes out
// again as a probe of the peer (backing off), the rest of the window waits
// for the peer's answer, and no more than that probe's EVs are condemned.
// Before, every packet in flight timed out, was retransmitted and marked
// its EV ASSUMED_BAD (mrc-nicd on a loaded veth: 25-50 retransmissions and
// every EV ASSUMED_BAD per stall).
func TestStalledPeerNoRetransmitStorm(t *testing.T) {
	for _, tc := range []struct {
		name  string
		side  int // whose engine stalls
		stall Time
		rto   Time // MinRTO: mrc-nicd's default, and the engine's
	}{
		{"receiver 2ms", 1, 2 * Millisecond, 200 * Microsecond},
		{"receiver 500us", 1, 500 * Microsecond, 200 * Microsecond},
		{"receiver 20ms", 1, 20 * Millisecond, 200 * Microsecond},
		{"receiver 2ms, 20us RTO", 1, 2 * Millisecond, 20 * Microsecond},
		{"sender 2ms", 0, 2 * Millisecond, 200 * Microsecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, hopts{seed: 91, qc: QPConfig{MinRTO: tc.rto}})
			h.Delay = 15 * Microsecond // a veth's RTT is some tens of µs
			h.Rate = 10                // 10 Gb/s: a window's worth in flight
			const size = 8 << 20
			src, dst := h.startTransfer(size, 1<<20)
			h.run(300*Microsecond, nil)
			before := h.snap(0)
			if before.Counters.TxData < 100 || before.Counters.AckedBytes == 0 {
				t.Fatalf("transfer not under way at the stall: %d data packets, %d B acknowledged", before.Counters.TxData, before.Counters.AckedBytes)
			}
			h.stalled[tc.side] = h.now + tc.stall
			if !h.run(h.now+tc.stall+100*Millisecond, func() bool { return h.snap(0).Counters.AckedBytes == size }) {
				s := h.snap(0)
				t.Fatalf("transfer did not complete: %d of %d B acknowledged; QP %v (%v), timeouts %d, probes %d, EV transitions %v",
					s.Counters.AckedBytes, size, s.State, s.Status, s.Counters.Timeouts, s.Counters.TxProbe, s.Counters.EVTransitions)
			}
			after := h.snap(0)
			if after.State != QPReady {
				t.Fatalf("QP %v (%v)", after.State, after.Status)
			}
			if !bytes.Equal(src, dst) {
				t.Fatal("bytes differ")
			}
			rtx := after.Counters.TxRtx - before.Counters.TxRtx
			tmo := after.Counters.Timeouts - before.Counters.Timeouts
			bad := after.Counters.EVTransitions[EVGood][EVAssumedBad] - before.Counters.EVTransitions[EVGood][EVAssumedBad]
			t.Logf("%v µs stall of side %d: %d retransmissions, %d timeouts (%d deferred), %d EVs GOOD->ASSUMED_BAD; srtt %d µs",
				tc.stall/Microsecond, tc.side, rtx, tmo, after.Counters.TimeoutsDeferred-before.Counters.TimeoutsDeferred, bad, after.SRTT/Microsecond)
			// One probe per backoff step: log2(stall/RTO)+1 at most.
			limit := uint64(1)
			for r := tc.rto; r < tc.stall; r *= 2 {
				limit++
			}
			if rtx > limit || tmo > limit || bad > limit {
				t.Errorf("%d retransmissions, %d timeouts, %d EVs condemned by one %v stall on a lossless link (want at most %d each)", rtx, tmo, bad, tc.stall, limit)
			}
		})
	}
}
