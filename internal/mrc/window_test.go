package mrc

import (
	"bytes"
	"testing"
)

// TestResponderWindowHonoured: the responder's window (128 packets) is
// smaller than the requester's (1024). The requester must bound its
// in-flight PSNs by it: from the exchanged QPInfo.Window when that is
// right, and from the SACKs' mpr when the exchange claimed more (a NIC
// that copied its own window in as the peer's). PSN_OOR NACKs must not
// turn into a storm (each answered by an immediate retransmission that
// draws the same NACK).
func TestResponderWindowHonoured(t *testing.T) {
	for _, tc := range []struct {
		name       string
		tr         Transport
		claimed    int // Window the requester is told (0: the real one)
		maxOOR     uint64
		maxRtxFrac float64 // retransmissions per data packet
	}{
		{"exchanged window", MRC, 0, 0, 0.05},
		{"window learnt from mpr", MRC, 1024, 512, 0.1},
		{"window unknown", MRC, -1, 0, 0.05},
		{"go-back-N, window learnt from mpr", GoBackN, 1024, 512, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// A first flight of 512 packets: far beyond the responder's
			// window before its first SACK can tell.
			h := newHarness(t, hopts{seed: 41, noQPs: true, cfg: func(c *Config) { c.CC.InitCwnd = 512 * 2048 }})
			h.Delay = 20 * Microsecond // BDP ≈ 1000 packets: the 128-packet window binds
			h.Loss = 0.01              // holes hold cack while later packets land
			a, err := h.eng[0].CreateQP(QPConfig{Window: 1024, Transport: tc.tr})
			if err != nil {
				t.Fatal(err)
			}
			b, err := h.eng[1].CreateQP(QPConfig{Window: 128, Transport: tc.tr})
			if err != nil {
				t.Fatal(err)
			}
			ia, _ := h.eng[0].Info(a)
			ib, _ := h.eng[1].Info(b)
			switch {
			case tc.claimed > 0:
				ib.Window = tc.claimed
			case tc.claimed < 0:
				ib.Window = 0
			}
			if err := h.eng[0].Connect(a, ib); err != nil {
				t.Fatal(err)
			}
			if err := h.eng[1].Connect(b, ia); err != nil {
				t.Fatal(err)
			}
			h.qp[0], h.qp[1] = a, b
			const size, chunk = 16 << 20, 1 << 20
			src, dst := h.startTransfer(size, chunk)
			done := 0
			ok := h.run(20*Millisecond, func() bool {
				for _, c := range h.drainCQ(0) {
					if c.Status != StatusOK {
						t.Fatalf("completion %+v", c)
					}
					done++
				}
				return done == size/chunk
			})
			s0, s1 := h.snap(0), h.snap(1)
			oor := s1.Counters.PSNOutOfWindow
			rtx := float64(s0.Counters.TxRtx) / float64(s0.Counters.TxData)
			t.Logf("PSN_OOR NACKs %d, data %d, rtx %d, %v µs", oor, s0.Counters.TxData, s0.Counters.TxRtx, h.now/1000)
			if !ok {
				t.Fatalf("transfer not done: %d/%d WRs (PSN_OOR NACKs %d, rtx %d)", done, size/chunk, oor, s0.Counters.TxRtx)
			}
			if !bytes.Equal(src, dst) {
				t.Fatal("data differ")
			}
			if oor > tc.maxOOR {
				t.Fatalf("%d PSN_OOR NACKs, want ≤ %d", oor, tc.maxOOR)
			}
			if rtx > tc.maxRtxFrac {
				t.Fatalf("%.3f retransmissions per data packet, want ≤ %.3f", rtx, tc.maxRtxFrac)
			}
		})
	}
}

// TestMTUMismatchRefused: Connect refuses a peer whose (exchanged) MTU
// differs from the local one, with an error naming both.
func TestMTUMismatchRefused(t *testing.T) {
	h := newHarness(t, hopts{seed: 42, noQPs: true, cfg: func(c *Config) { c.MTU = 4096 }})
	a, _ := h.eng[0].CreateQP(QPConfig{})
	b, _ := h.eng[1].CreateQP(QPConfig{})
	ib, _ := h.eng[1].Info(b)
	for _, mtu := range []int{1024, 2048} {
		ib.MTU = mtu
		err := h.eng[0].Connect(a, ib)
		if err == nil || !isErr(err, ErrConfig) {
			t.Fatalf("remote MTU %d: err = %v, want an MTU mismatch", mtu, err)
		}
	}
	ib.MTU = 4096
	if err := h.eng[0].Connect(a, ib); err != nil {
		t.Fatalf("same MTU: %v", err)
	}
}
