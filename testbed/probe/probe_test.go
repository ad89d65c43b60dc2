package probe

import (
	"encoding/hex"
	"net/netip"
	"testing"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"

	"github.com/softmrc/softmrc/internal/wire"
)

func srv6Frame() Frame {
	dst, _ := wire.ParseMAC("06:20:bd:00:00:00")
	src, _ := wire.ParseMAC("02:20:bd:00:01:00")
	return Frame{DstMAC: dst, SrcMAC: src,
		OuterSrc: netip.MustParseAddr("fd00:20bd:0:1::1"), OuterDst: netip.MustParseAddr("5f00:1:4000:100:4100:c000::"),
		InnerSrc: netip.MustParseAddr("fd00:20bd:0:1::1"), InnerDst: netip.MustParseAddr("fd00:20bd:0:3::1"),
		HopLimit: 64, EV: 0x0010_abcd, ID: 0x1122334455667788}
}

// golden is srv6Frame().Build(), checked field by field with gopacket below
// (regenerate by printing hex.EncodeToString(srv6Frame().Build())).
const golden = "0620bd000000" + "0220bd000100" + "86dd" +
	"60000010" + "0040" + "2940" + "fd0020bd000000010000000000000001" + "5f000001400001004100c00000000000" +
	"60000010" + "0018" + "1140" + "fd0020bd000000010000000000000001" + "fd0020bd000000030000000000000001" +
	"abcd12b700180000" + "6d72637000000000" + "1122334455667788"

func TestBuildGolden(t *testing.T) {
	f := srv6Frame()
	got := hex.EncodeToString(f.Build())
	if got != golden {
		t.Fatalf("frame\n got %s\nwant %s", got, golden)
	}
	pkt := gopacket.NewPacket(f.Build(), layers.LayerTypeEthernet, gopacket.Default)
	var ips []*layers.IPv6
	for _, l := range pkt.Layers() {
		if ip, ok := l.(*layers.IPv6); ok {
			ips = append(ips, ip)
		}
	}
	udp, _ := pkt.Layer(layers.LayerTypeUDP).(*layers.UDP)
	if len(ips) != 2 || udp == nil {
		t.Fatalf("gopacket sees %v", pkt)
	}
	if ips[0].DstIP.String() != "5f00:1:4000:100:4100:c000::" || ips[0].NextHeader != layers.IPProtocolIPv6 ||
		ips[1].DstIP.String() != "fd00:20bd:0:3::1" || ips[0].FlowLabel != 0x10 || ips[1].FlowLabel != 0x10 ||
		udp.SrcPort != 0xabcd || udp.DstPort != 4791 || ips[0].HopLimit != 64 {
		t.Errorf("decoded: outer %+v inner %+v udp %+v", ips[0], ips[1], udp)
	}
	s, ok := Parse(f.Build())
	if !ok || s.ID != f.ID || s.OuterDst != f.OuterDst || s.InnerDst != f.InnerDst || s.HopLimit != 64 ||
		s.SrcMAC != f.SrcMAC || s.DstMAC != f.DstMAC {
		t.Errorf("Parse = %+v, %v", s, ok)
	}
}

func TestParsePlain(t *testing.T) {
	f := srv6Frame()
	f.OuterDst = netip.Addr{}
	s, ok := Parse(f.Build())
	if !ok || s.OuterDst.IsValid() || s.InnerDst != f.InnerDst || s.ID != f.ID {
		t.Errorf("plain probe: %+v %v", s, ok)
	}
	b := f.Build()
	for _, n := range []int{0, 13, 54, len(b) - 1} {
		if _, ok := Parse(b[:n]); ok {
			t.Errorf("truncated to %d bytes accepted", n)
		}
	}
	b[len(b)-16] ^= 0xff // magic
	if _, ok := Parse(b); ok {
		t.Error("wrong magic accepted")
	}
}

func FuzzParse(f *testing.F) {
	fr := srv6Frame()
	f.Add(fr.Build())
	fr.OuterDst = netip.Addr{}
	f.Add(fr.Build())
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		s, ok := Parse(b)
		if !ok {
			return
		}
		// Whatever parses must rebuild to a frame that parses the same.
		g := Frame{DstMAC: s.DstMAC, SrcMAC: s.SrcMAC, InnerDst: s.InnerDst, OuterDst: s.OuterDst,
			InnerSrc: netip.IPv6Unspecified(), OuterSrc: netip.IPv6Unspecified(), HopLimit: s.HopLimit, ID: s.ID}
		if g.HopLimit == 0 {
			return // Build maps hop limit 0 to the default
		}
		s2, ok := Parse(g.Build())
		if !ok || s2.ID != s.ID || s2.InnerDst != s.InnerDst || s2.OuterDst != s.OuterDst || s2.HopLimit != s.HopLimit {
			t.Fatalf("%+v rebuilt as %+v", s, s2)
		}
	})
}
