package fabricsim

import (
	"testing"

	"github.com/softmrc/softmrc/internal/wire"
)

func BenchmarkForwardSRv6(b *testing.B) {
	m := testModel()
	f := frameTo(b, a128("5f00:1:4000:100:4200:c000::"), 64, wire.DSCPTrimmable, wire.ECNECT0, wire.OpWriteOnly, 2048)
	hdr := append([]byte(nil), f[:wire.EthLen+wire.IPv6Len]...)
	b.ReportAllocs()
	b.SetBytes(int64(len(f)))
	for b.Loop() {
		copy(f, hdr)
		if _, d := m.Forward(f); d != None {
			b.Fatal(d)
		}
	}
}

func BenchmarkECMPHash(b *testing.B) {
	f := frameTo(b, a128("5f00:1:4000:100:4200:c000::"), 64, wire.DSCPTrimmable, wire.ECNECT0, wire.OpWriteOnly, 64)
	b.ReportAllocs()
	for b.Loop() {
		ECMPHash(f)
	}
}

// BenchmarkSimPacket is the simulator's cost per packet carried across a
// cross-T1 path (4 links, 3 switches) by test hosts.
func BenchmarkSimPacket(b *testing.B) {
	t := &testing.T{}
	c := DefaultConfig()
	s, _ := New(c)
	cfg := s.Config()
	snd, rcv := newTestHost(t, cfg, 0), newTestHost(t, cfg, 2)
	snd.n, snd.size, snd.interval = b.N, 2048, 200
	snd.plan = func(i int) flowSpec {
		return flowSpec{dst: 2, plane: wire.Plane(i % 4), t1: i % 4, dscp: wire.DSCPTrimmable}
	}
	s.SetHost(0, snd)
	s.SetHost(2, rcv)
	b.ReportAllocs()
	b.ResetTimer()
	s.RunUntil(int64(b.N)*200 + 1e6)
	if rcv.got != b.N {
		b.Fatalf("got %d of %d", rcv.got, b.N)
	}
}
