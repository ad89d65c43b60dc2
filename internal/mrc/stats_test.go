package mrc

import "testing"

// TestAckedBytes: AckedBytes counts each packet's payload once, so after a
// transfer completes it equals the bytes written, with and without loss,
// trims and retransmissions (the sampled series of a QP ends where the
// application's completions do); RtxBytes is the retransmitted share of
// TxBytes.
func TestAckedBytes(t *testing.T) {
	const size = 2 << 20
	for _, c := range []struct {
		name       string
		loss, trim float64
		tr         Transport
	}{
		{"clean", 0, 0, MRC},
		{"2% loss", 0.02, 0, MRC},
		{"5% trims", 0, 0.05, MRC},
		{"go-back-N 2% loss", 0.02, 0, GoBackN},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t, hopts{seed: 11, qc: QPConfig{Transport: c.tr}})
			h.Loss, h.Trim = c.loss, c.trim
			h.transfer(size, 64<<10, 10*Second)
			k := h.snap(0).Counters
			if k.AckedBytes != size {
				t.Errorf("AckedBytes %d, want %d (the bytes completed)", k.AckedBytes, size)
			}
			if k.TxBytes != size+k.RtxBytes {
				t.Errorf("TxBytes %d != written %d + RtxBytes %d", k.TxBytes, size, k.RtxBytes)
			}
			if (c.loss > 0 || c.trim > 0) != (k.RtxBytes > 0) {
				t.Errorf("RtxBytes %d with loss %v trim %v (TxRtx %d)", k.RtxBytes, c.loss, c.trim, k.TxRtx)
			}
		})
	}
}
