package fabricsim

import (
	"bytes"
	"encoding/hex"
	"net/netip"
	"testing"

	"github.com/softmrc/softmrc/internal/wire"
)

func a128(s string) wire.Addr128 { return wire.Addr128FromNetip(netip.MustParseAddr(s)) }

// frameTo builds an SRv6 data frame with outer DA da and hop limit hl.
func frameTo(t testing.TB, da wire.Addr128, hl uint8, dscp uint8, ecn uint8, op wire.Opcode, payload int) []byte {
	t.Helper()
	p := wire.Packet{Encap: true, OuterSrc: a128("fd00:1::1"), OuterDst: da, Src: a128("fd00:1::1"), Dst: a128("fd00:1::3"),
		DSCP: dscp, ECN: ecn, HopLimit: hl, EV: wire.MakeEV(0, 1, 5), Opcode: op, PSN: 9, RKey: 1,
		Payload: make([]byte, payload)}
	if op == wire.OpSACK || op == wire.OpNACK {
		p.Payload = nil
	}
	b := make([]byte, 4096)
	n, err := p.Encode(b)
	if err != nil {
		t.Fatal(err)
	}
	return b[:n]
}

func testModel() *SwitchModel {
	// A switch with two own uNs (0x4000 and 0x4100: the kernel oracle's
	// "same node twice" case), routes for T1 0x0100 and downlink 0xc000.
	m := &SwitchModel{Mode: ModeSRv6, Block: DefaultBlock, USIDs: []uint16{0x4000, 0x4100}}
	m.AddRoute(Route{Prefix: wire.F3216.Prefix(DefaultBlock, 0x0100), Port: 4, Group: -1})
	m.AddRoute(Route{Prefix: wire.F3216.Prefix(DefaultBlock, 0xc000), Port: 0, Group: -1})
	m.AddRoute(Route{Prefix: netip.MustParsePrefix("5f00:1:100:4300::/64"), Port: 7, Group: -1})
	return m
}

// RFC 9800 uN with NEXT-CSID, case by case; the outer DA and hop limit after
// the switch are golden.
func TestForwardSRv6(t *testing.T) {
	for _, tc := range []struct {
		name   string
		da     string
		hl     uint8
		port   int
		drop   Reason
		wantDA string
		wantHL uint8
	}{
		{"own uN then T1", "5f00:1:4000:100:4200:c000::", 64, 4, 0, "5f00:1:100:4200:c000::", 63},
		{"own uN then downlink", "5f00:1:4000:c000::", 64, 0, 0, "5f00:1:c000::", 63},
		{"two own uNs shift twice, HL twice", "5f00:1:4000:4100:c000::", 64, 0, 0, "5f00:1:c000::", 62},
		{"longest prefix wins (/64 over /48)", "5f00:1:4000:100:4300::", 64, 7, 0, "5f00:1:100:4300::", 63},
		{"arg zero: end of container at a switch", "5f00:1:4000::", 64, -1, DropForMe, "5f00:1:4000::", 64},
		{"arg zero after a shift", "5f00:1:4000:4100::", 64, -1, DropForMe, "5f00:1:4100::", 63},
		{"hop limit 1: drop before the shift", "5f00:1:4000:100::", 1, -1, DropHopLimit, "5f00:1:4000:100::", 1},
		{"hop limit runs out on the second own uN", "5f00:1:4000:4100:c000::", 2, -1, DropHopLimit, "5f00:1:4100:c000::", 1},
		{"transit (not own): plain route, HL-1", "5f00:1:c000::", 9, 0, 0, "5f00:1:c000::", 8},
		{"transit with hop limit 1", "5f00:1:c000::", 1, -1, DropHopLimit, "5f00:1:c000::", 1},
		{"no route after the shift", "5f00:1:4000:4200::", 64, -1, DropNoRoute, "5f00:1:4200::", 63},
		{"other block does not match", "5f00:2:4000:100::", 64, -1, DropNoRoute, "5f00:2:4000:100::", 63},
		{"multicast is not forwarded", "ff02::1", 64, -1, DropForMe, "ff02::1", 64},
		{"link-local is not forwarded", "fe80::1", 64, -1, DropForMe, "fe80::1", 64},
		{"argument non-zero only in the last slot", "5f00:1:4000:0:0:0:0:1", 64, -1, DropNoRoute, "5f00:1:0:0:0:0:1:0", 63},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := frameTo(t, a128(tc.da), tc.hl, wire.DSCPTrimmable, wire.ECNECT0, wire.OpWriteOnly, 64)
			orig := append([]byte(nil), f...)
			port, drop := testModel().Forward(f)
			if port != tc.port || drop != tc.drop {
				t.Errorf("got port %d drop %v, want port %d drop %v", port, drop, tc.port, tc.drop)
			}
			ip := wire.IPv6(f[wire.EthLen:])
			if got := ip.Dst(); got != a128(tc.wantDA) {
				t.Errorf("DA %v, want %s", got, tc.wantDA)
			}
			if ip.HopLimit() != tc.wantHL {
				t.Errorf("hop limit %d, want %d", ip.HopLimit(), tc.wantHL)
			}
			// Nothing but the outer DA and hop limit may change.
			for i := range f {
				if f[i] != orig[i] && !(i >= wire.EthLen+24 && i < wire.EthLen+40) && i != wire.EthLen+7 {
					t.Fatalf("byte %d changed (%#x -> %#x)", i, orig[i], f[i])
				}
			}
		})
	}
}

// Golden bytes of the outer header after a T0 forwards a cross-T1 frame.
func TestForwardGoldenOuterHeader(t *testing.T) {
	c := DefaultConfig()
	_ = c.fill()
	da := c.PathDA(1, 0, 3, 2)
	f := frameTo(t, da, 64, wire.DSCPTrimmable, wire.ECNECT0, wire.OpWriteOnly, 16)
	s, _ := New(c)
	port, drop := s.T0(1, 0).Model().Forward(f)
	if drop != 0 || port != c.HostsPerT0+3 {
		t.Fatalf("port %d drop %v", port, drop)
	}
	// version/TC/flow (DSCP 10, ECT0, flow 0x00010), payload length, nh 41,
	// HL 63, src fd00:1::1, DA 5f00:1:0401:4101:c101::
	const want = "62a00010" + "0064" + "29" + "3f" +
		"fd000001000000000000000000000001" + "5f000001" + "0401" + "4101" + "c001" + "000000000000"
	got := hex.EncodeToString(f[wire.EthLen : wire.EthLen+wire.IPv6Len])
	if got != want {
		t.Errorf("outer header\n got %s\nwant %s", got, want)
	}
}

func TestAdmit(t *testing.T) {
	data := func(dscp, ecn uint8) []byte {
		return frameTo(t, a128("5f00:1:c000::"), 64, dscp, ecn, wire.OpWriteOnly, 1000)
	}
	n := len(data(wire.DSCPTrimmable, wire.ECNECT0))
	ctl := frameTo(t, a128("5f00:1:c000::"), 64, wire.DSCPControl, wire.ECNNotECT, wire.OpSACK, 0)
	fab := QueueState{ECNBytes: 10000, TrimBytes: 20000, BufferBytes: 40000}
	host := fab
	host.HostFacing = true
	for _, tc := range []struct {
		name    string
		q       QueueState
		backlog int
		frame   []byte
		want    Verdict
		dscp    uint8 // outer DSCP after
		ecn     uint8 // outer ECN after
	}{
		{"below ECN threshold", fab, 0, data(wire.DSCPTrimmable, wire.ECNECT0), Verdict{Len: n}, wire.DSCPTrimmable, wire.ECNECT0},
		{"above ECN threshold marks ECT0", fab, 10000, data(wire.DSCPTrimmable, wire.ECNECT0), Verdict{Len: n, Marked: true}, wire.DSCPTrimmable, wire.ECNCE},
		{"above ECN threshold marks ECT1", fab, 10000, data(wire.DSCPTrimmable, wire.ECNECT1), Verdict{Len: n, Marked: true}, wire.DSCPTrimmable, wire.ECNCE},
		{"not-ECT is never marked", fab, 10000, data(wire.DSCPTrimmable, wire.ECNNotECT), Verdict{Len: n}, wire.DSCPTrimmable, wire.ECNNotECT},
		{"host-facing port never marks", host, 10000, data(wire.DSCPTrimmable, wire.ECNECT0), Verdict{Len: n}, wire.DSCPTrimmable, wire.ECNECT0},
		{"above trim threshold: TRIMMED", fab, 19500, data(wire.DSCPTrimmable, wire.ECNECT0), Verdict{Len: 134, Priority: true, Trimmed: true}, wire.DSCPTrimmed, wire.ECNECT0},
		{"retransmission trimmed too", fab, 19500, data(wire.DSCPTrimmableRetx, wire.ECNECT0), Verdict{Len: 134, Priority: true, Trimmed: true}, wire.DSCPTrimmed, wire.ECNECT0},
		{"host-facing: TRIMMED_LASTHOP", host, 19500, data(wire.DSCPTrimmable, wire.ECNECT0), Verdict{Len: 134, Priority: true, Trimmed: true}, wire.DSCPTrimmedLastHop, wire.ECNECT0},
		{"NO_TRIM above trim threshold dropped", fab, 19500, data(wire.DSCPNoTrim, wire.ECNECT0), Verdict{Drop: DropTrimFull}, wire.DSCPNoTrim, wire.ECNECT0},
		{"control bypasses thresholds", fab, 39000, ctl, Verdict{Len: len(ctl), Priority: true}, wire.DSCPControl, wire.ECNNotECT},
		{"control dropped past the buffer", fab, 39990, ctl, Verdict{Drop: DropBuffer}, wire.DSCPControl, wire.ECNNotECT},
		{"already trimmed goes ahead, not re-trimmed", fab, 39000, trimmed(t, data(wire.DSCPTrimmable, wire.ECNECT0)), Verdict{Len: 134, Priority: true}, wire.DSCPTrimmed, wire.ECNECT0},
		{"no trimming configured: buffer drop", QueueState{BufferBytes: 40000}, 39500, data(wire.DSCPTrimmable, wire.ECNECT0), Verdict{Drop: DropBuffer}, wire.DSCPTrimmable, wire.ECNECT0},
		{"unlimited buffer", QueueState{}, 1 << 30, data(wire.DSCPTrimmable, wire.ECNECT0), Verdict{Len: n}, wire.DSCPTrimmable, wire.ECNECT0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := tc.q
			q.Backlog = tc.backlog
			f := append([]byte(nil), tc.frame...)
			v := Admit(q, f)
			if v != tc.want {
				t.Errorf("verdict %+v, want %+v", v, tc.want)
			}
			ip := wire.IPv6(f[wire.EthLen:])
			if ip.DSCP() != tc.dscp || ip.ECN() != tc.ecn {
				t.Errorf("outer DSCP/ECN %d/%d, want %d/%d", ip.DSCP(), ip.ECN(), tc.dscp, tc.ecn)
			}
			if v.Trimmed {
				var p wire.Packet
				if err := (wire.Decoder{}).Decode(f[:v.Len], &p); err != nil || !p.Trimmed {
					t.Errorf("trimmed frame does not decode as trimmed: %v", err)
				}
			}
		})
	}
}

func trimmed(t *testing.T, f []byte) []byte {
	n, ok := wire.Trim(f, false)
	if !ok {
		t.Fatal("trim failed")
	}
	return f[:n]
}

// The flow hash is part of the contract with the XDP switch: this golden
// value is internal/flowhash.Sum(fd00:1:0:1::1, 5f00:1:401:4101:c001::,
// flow label 0x12345, sport 0xbeef), the definition bpf/srv6.h ecmp_hash follows.
func TestECMPHashGolden(t *testing.T) {
	p := wire.Packet{Encap: true, OuterSrc: a128("fd00:1:0:1::1"), OuterDst: a128("5f00:1:401:4101:c001::"),
		Src: a128("fd00:1:0:1::1"), Dst: a128("fd00:1:0:2::1"), EV: wire.EV(0x1234beef), Opcode: wire.OpSACK}
	b := make([]byte, 512)
	n, err := p.Encode(b)
	if err != nil {
		t.Fatal(err)
	}
	// A 20-bit flow label (the EV uses 16 of them); the hash takes all 20.
	wire.IPv6(b[wire.EthLen:]).SetVersionTCFlow(0, 0, 0x12345)
	if got := ECMPHash(b[:n]); got != 0xc048c4b1 {
		t.Errorf("ECMPHash = %#08x, want 0xc048c4b1", got)
	}
}

func TestECMPHashStable(t *testing.T) {
	// Golden: the hash is part of the contract with the XDP switch.
	f := frameTo(t, a128("5f00:1:c000::"), 64, wire.DSCPTrimmable, wire.ECNECT0, wire.OpWriteOnly, 8)
	h1 := ECMPHash(f)
	g := append([]byte(nil), f...)
	g[len(g)-20] ^= 0xff // payload does not matter
	if ECMPHash(g) != h1 {
		t.Error("payload changed the hash")
	}
	u := wire.UDP(g[wire.EthLen+2*wire.IPv6Len:])
	u.SetSrcPort(u.SrcPort() + 1)
	if ECMPHash(g) == h1 {
		t.Error("source port did not change the hash")
	}
	if !bytes.Equal(f[:wire.EthLen], g[:wire.EthLen]) {
		t.Fatal("unexpected")
	}
}

// FuzzForward: any bytes through the switch: no panic, and a forwarded frame
// keeps its length.
func FuzzForward(f *testing.F) {
	f.Add(frameTo(f, a128("5f00:1:4000:100:4200:c000::"), 64, wire.DSCPTrimmable, wire.ECNECT0, wire.OpWriteOnly, 32))
	f.Add(frameTo(f, a128("5f00:1:4000:4100::"), 2, wire.DSCPControl, 0, wire.OpSACK, 0))
	f.Add([]byte{0, 1, 2})
	f.Add(make([]byte, 54))
	f.Fuzz(func(t *testing.T, b []byte) {
		m := testModel()
		n := len(b)
		port, drop := m.Forward(b)
		if drop == 0 && (port < 0 || len(b) != n) {
			t.Fatalf("port %d", port)
		}
		mEC := &SwitchModel{Mode: ModeECMP, Block: DefaultBlock, Groups: [][]int{{1, 2, 3}}}
		mEC.AddRoute(Route{Prefix: netip.MustParsePrefix("::/0"), Port: -1, Group: 0})
		mEC.Forward(b)
		Admit(QueueState{TrimBytes: 1, BufferBytes: 100, ECNBytes: 1}, b)
	})
}
