package mrc

import (
	"bytes"
	"testing"
)

func TestPSNWrap(t *testing.T) {
	h := newHarness(t, hopts{seed: 2, qc: QPConfig{StartPSN: 0xFFFF00}})
	h.Loss, h.Jitter = 0.01, time2(2)
	h.transfer(2<<20, 64<<10, Second)
	if s := h.snap(0); s.SndNxt > 0x1000 || s.SndNxt == 0 {
		t.Fatalf("PSN did not wrap: next %v", s.SndNxt)
	}
}

func time2(us int) Time { return Time(us) * Microsecond }

func TestTransferByteExact(t *testing.T) {
	for _, mode := range []RoutingMode{SRv6, ECMP} {
		for _, tr := range []Transport{MRC, GoBackN} {
			t.Run(mode.String()+"/"+tr.String(), func(t *testing.T) {
				h := newHarness(t, hopts{seed: 1, mode: mode, qc: QPConfig{Transport: tr}})
				const size = 4 << 20
				src := h.region(0, 0x11, 0x10000, size, AccessLocalRead)
				dst := make([]byte, size)
				h.mem[1].Register(0x22, 0x900000, dst, AccessRemoteWrite)
				const chunk = 256 << 10
				for off := 0; off < size; off += chunk {
					if err := h.eng[0].PostWrite(h.qp[0], WR{ID: uint64(off), LKey: 0x11, Addr: 0x10000 + uint64(off), Len: chunk, RemoteVA: 0x900000 + uint64(off), RKey: 0x22}); err != nil {
						t.Fatal(err)
					}
				}
				done := 0
				ok := h.run(100*Millisecond, func() bool {
					for _, c := range h.drainCQ(0) {
						if c.Status != StatusOK {
							t.Fatalf("completion %+v", c)
						}
						done++
					}
					return done == size/chunk
				})
				if !ok {
					s := h.snap(0)
					t.Fatalf("not done by %d: %d/%d; snap %+v", h.now, done, size/chunk, s.Counters)
				}
				if !bytes.Equal(src, dst) {
					t.Fatal("data differ")
				}
				s := h.snap(0)
				t.Logf("t=%v µs, data pkts %d, rtx %d, srtt %d ns, cwnd %d", h.now/1000, s.Counters.TxData, s.Counters.TxRtx, s.SRTT, s.Cwnd)
			})
		}
	}
}
