package mrc

import (
	"fmt"
	"testing"
)

// TestCoalesceHoles: on a path that reorders (jitter far above a packet's
// serialization time, as spraying over planes does), answering every new
// hole and every late arrival (more than 63 behind the highest) at once
// makes the receiver send a SACK for a large share of the data packets;
// with Config.CoalesceHoles the holes count toward the coalesced SACK
// (mrc-nicd's 16 packets / 20 µs) and runs of late arrivals share one SACK
// that covers them: a half to a fifth of the SACKs, the transfer still
// completes intact, and nothing is retransmitted on the lossless path.
func TestCoalesceHoles(t *testing.T) {
	const size = 4 << 20
	for _, c := range []struct {
		jitter   Time // 3 µs: ~18 packets of reordering; 5 µs: also many more than 63 behind
		coalesce bool
		lo, hi   float64 // SACKs per data packet received
	}{
		{3 * Microsecond, false, 0.14, 1}, // measured 0.171 (seed 5)
		{3 * Microsecond, true, 0, 0.10},  // measured 0.080: 1/16 + one AckReq per 64 KiB message (1/32) + a few AckDelay ones
		{5 * Microsecond, false, 0.30, 1}, // measured 0.395: ~280 holes and ~520 late arrivals answered at once
		{5 * Microsecond, true, 0, 0.10},  // measured 0.081 (0.323 with only the holes coalesced)
	} {
		name := fmt.Sprintf("%v µs jitter, %s", c.jitter/Microsecond, map[bool]string{false: "at once", true: "coalesced"}[c.coalesce])
		t.Run(name, func(t *testing.T) {
			// mrc-nicd's settings: SACKs per 16 packets / 20 µs, and a
			// 200 µs RTO floor (the engine's 20 µs default is below the
			// coalescing delay plus this path's jitter).
			h := newHarness(t, hopts{seed: 5, qc: QPConfig{MinRTO: 200 * Microsecond}, cfg: func(cfg *Config) {
				cfg.AckEvery, cfg.AckDelay, cfg.CoalesceHoles = 16, 20*Microsecond, c.coalesce
			}})
			h.Jitter = c.jitter
			h.transfer(size, 64<<10, 10*Second)
			rx, tx := h.snap(1).Counters, h.snap(0).Counters
			if rx.RxOOO == 0 {
				t.Fatalf("no packet arrived out of order: the path does not reorder (counters %+v)", rx)
			}
			r := float64(rx.TxSACK) / float64(rx.RxData)
			t.Logf("%s: %d SACKs for %d data packets (%.3f), %d out of order; sender TxRtx %d, timeouts %d",
				name, rx.TxSACK, rx.RxData, r, rx.RxOOO, tx.TxRtx, tx.Timeouts)
			if r < c.lo || r > c.hi {
				t.Errorf("SACKs per data packet %.3f, want %.2f..%.2f", r, c.lo, c.hi)
			}
			if tx.TxRtx != 0 {
				t.Errorf("%d retransmissions on a lossless path (%d timeouts, %d losses)", tx.TxRtx, tx.Timeouts, tx.Losses)
			}
		})
	}
}
