package flowhash_test

import (
	"net/netip"
	"testing"

	"github.com/softmrc/softmrc/internal/flowhash"
	"github.com/softmrc/softmrc/internal/mrc"
	"github.com/softmrc/softmrc/internal/wire"
)

// The golden value is part of the contract with bpf/srv6.h ecmp_hash: FNV-1a
// of this key is 0x010d1a9b (the value before the finaliser), and murmur3
// fmix32(0x010d1a9b) = 0xc048c4b1 (computed independently in Python). The
// switch's BPF_PROG_RUN tests check the program against Sum.
func TestSumGolden(t *testing.T) {
	src := netip.MustParseAddr("fd00:1:0:1::1").As16()
	dst := netip.MustParseAddr("5f00:1:401:4101:c001::").As16()
	if got, want := flowhash.Sum(src, dst, 0x12345, 0xbeef), uint32(0xc048c4b1); got != want {
		t.Errorf("Sum = %#08x, want %#08x", got, want)
	}
}

// The defect this package's finaliser fixes: the 16 RoCE QPs one host opens
// to one peer (consecutive QPNs, as the NIC allocates them) must spread over
// a two-member ECMP group, not all land on one member. With plain FNV-1a
// every one of the cases below put 16 of 16 on one member.
func TestConsecutiveRoCEQPsSpread(t *testing.T) {
	planes := []wire.Plane{0}
	for _, tc := range []struct {
		name       string
		src, dst   string
		lqpn, rqpn wire.QPN
	}{
		{"h0-h2 same QPNs", "fd00:1:0:1::1", "fd00:1:0:3::1", 0x100, 0x100},
		{"h1-h3 off by one", "fd00:1:0:2::1", "fd00:1:0:4::1", 0x10, 0x11},
		{"h0-h3 from 0x180", "fd00:1:0:1::1", "fd00:1:0:4::1", 0x180, 0x180},
		{"h2-h0 from 0x200", "fd00:1:0:3::1", "fd00:1:0:1::1", 0x200, 0x201},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src, dst := netip.MustParseAddr(tc.src).As16(), netip.MustParseAddr(tc.dst).As16()
			var per [2]int
			for i := wire.QPN(0); i < 16; i++ {
				// nT1 256: ECMP mode, where the switches choose the T1.
				ev := mrc.RoCEEV(tc.lqpn+i, tc.rqpn+i, planes, 256)
				per[flowhash.Sum(src, dst, ev.FlowLabel(), ev.SrcPort())%2]++
			}
			// Binomial(16, 1/2): 3..13 holds with probability > 0.99.
			if per[0] < 3 || per[1] < 3 {
				t.Errorf("16 consecutive QPs over 2 members: %v", per)
			}
		})
	}
}

// Every input bit must reach the low bits that `% n` keeps.
func TestEveryByteMovesTheMember(t *testing.T) {
	src := netip.MustParseAddr("fd00:1:0:1::1").As16()
	dst := netip.MustParseAddr("fd00:1:0:4::1").As16()
	base := flowhash.Sum(src, dst, 0x12345, 0xbeef)
	flips := 0
	for bit := 0; bit < 8; bit++ { // the low byte of the source port
		if (flowhash.Sum(src, dst, 0x12345, 0xbeef^uint16(1<<bit))^base)&1 != 0 {
			flips++
		}
	}
	for bit := 0; bit < 20; bit++ {
		if (flowhash.Sum(src, dst, 0x12345^uint32(1<<bit), 0xbeef)^base)&1 != 0 {
			flips++
		}
	}
	// Each flip of one input bit changes the low output bit with probability
	// 1/2 after the finaliser; with plain FNV-1a it changes it for exactly the
	// input bits that are bit 0 of a byte (4 of these 28) and for no other.
	if flips < 7 || flips > 21 {
		t.Errorf("the low bit of the hash changed for %d of 28 one-bit input changes", flips)
	}
}

func BenchmarkSum(b *testing.B) {
	src := netip.MustParseAddr("fd00:1:0:1::1").As16()
	dst := netip.MustParseAddr("5f00:1:401:4101:c001::").As16()
	for i := 0; i < b.N; i++ {
		flowhash.Sum(src, dst, uint32(i), uint16(i))
	}
}
