package xsk

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"net"
	"net/netip"
	"testing"

	"github.com/cilium/ebpf"
)

// verdict is what the steering program should do with a frame.
type verdict int

const (
	vPass verdict = iota
	vUSID
	vUDP
)

func (v verdict) String() string { return [...]string{"pass", "usid", "udp"}[v] }

// classify is the reference the BPF program is checked against.
func classify(f []byte, prefixes []netip.Prefix, addrs []netip.Addr) verdict {
	if len(f) < 54 || binary.BigEndian.Uint16(f[12:14]) != 0x86dd || f[14]>>4 != 6 {
		return vPass
	}
	dst := netip.AddrFrom16([16]byte(f[38:54]))
	switch f[20] {
	case 41:
		for _, p := range prefixes {
			if p.Contains(dst) {
				return vUSID
			}
		}
	case 17:
		if len(f) < 62 {
			return vPass
		}
		if dp := binary.BigEndian.Uint16(f[56:58]); dp != 4791 && dp != 4971 {
			return vPass
		}
		for _, a := range addrs {
			if a == dst {
				return vUDP
			}
		}
	}
	return vPass
}

// steerHarness is a loaded (not attached) steering program with a real
// socket registered on queue 0, so BPF_PROG_TEST_RUN returns XDP_REDIRECT for
// frames it steers.
type steerHarness struct {
	steer    *Steer
	prefixes []netip.Prefix
	addrs    []netip.Addr
}

func newSteerHarness(tb testing.TB) *steerHarness {
	requireXDP(tb)
	n := newVethNet(tb, 1500)
	p := openIn(tb, n.nsB, Config{Ifname: n.ifB, NoSteer: true})
	s, err := LoadSteer()
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { s.Close() })
	h := &steerHarness{steer: s,
		prefixes: []netip.Prefix{netip.MustParsePrefix("5f00:1:c003::/48"), netip.MustParsePrefix("5f00:2:c103::/48")},
		addrs:    []netip.Addr{netip.MustParseAddr("fd00:1:3::5"), netip.MustParseAddr("fd00:1:4::5")},
	}
	for _, pfx := range h.prefixes {
		if err := s.AddPrefix(pfx); err != nil {
			tb.Fatal(err)
		}
	}
	for _, a := range h.addrs {
		if err := s.AddAddr(a); err != nil {
			tb.Fatal(err)
		}
	}
	if err := s.Register(0, p.FD()); err != nil {
		tb.Fatal(err)
	}
	return h
}

// run runs the program on frame and returns what it did, from its return
// code and which counter moved.
func (h *steerHarness) run(tb testing.TB, frame []byte) verdict {
	tb.Helper()
	before, err := h.steer.Counters()
	if err != nil {
		tb.Fatal(err)
	}
	ret, err := h.steer.Program().Run(&ebpf.RunOptions{Data: frame})
	if err != nil {
		tb.Fatalf("test run of %d-byte frame: %v", len(frame), err)
	}
	after, err := h.steer.Counters()
	if err != nil {
		tb.Fatal(err)
	}
	const xdpPass, xdpRedirect = 2, 4
	switch {
	case ret == xdpRedirect && after.USID == before.USID+1 && after.UDP == before.UDP:
		return vUSID
	case ret == xdpRedirect && after.UDP == before.UDP+1 && after.USID == before.USID:
		return vUDP
	case ret == xdpPass && after.Pass == before.Pass+1 && after.USID == before.USID && after.UDP == before.UDP:
		return vPass
	}
	tb.Fatalf("inconsistent result: return %d, counters %+v -> %+v", ret, before, after)
	return vPass
}

var (
	macA = net.HardwareAddr{2, 0, 0, 0, 0, 1}
	macB = net.HardwareAddr{2, 0, 0, 0, 0, 2}
)

// goldenUDP is udpFrame(macB, macA, fd00:1:3::1, fd00:1:3::5, 0xc000, 4791,
// "mrc") written out by hand from the header layouts, to anchor the builder.
const goldenUDP = "020000000002" + "020000000001" + "86dd" +
	"60000000" + "000b" + "11" + "40" +
	"fd000001000300000000000000000001" + "fd000001000300000000000000000005" +
	"c000" + "12b7" + "000b" + "0000" + "6d7263"

func TestFrameBuilderGolden(t *testing.T) {
	got := udpFrame(macB, macA, netip.MustParseAddr("fd00:1:3::1"), netip.MustParseAddr("fd00:1:3::5"), 0xc000, 4791, []byte("mrc"))
	want, _ := hex.DecodeString(goldenUDP)
	if !bytes.Equal(got, want) {
		t.Fatalf("udpFrame:\n got %x\nwant %x", got, want)
	}
}

func steerCases() []struct {
	name  string
	frame []byte
	want  verdict
} {
	src := netip.MustParseAddr("fd00:1:3::1")
	mine := netip.MustParseAddr("fd00:1:3::5")
	udp := func(dst netip.Addr, dport uint16) []byte {
		return udpFrame(macB, macA, src, dst, 0xc000, dport, []byte("payload"))
	}
	tunnel := func(odst string) []byte {
		return ip6in6Frame(udp(mine, 4791), outerSrc, netip.MustParseAddr(odst))
	}
	golden, _ := hex.DecodeString(goldenUDP)
	arp := append([]byte(nil), golden...)
	binary.BigEndian.PutUint16(arp[12:], 0x0806)
	ipv4ver := append([]byte(nil), golden...)
	ipv4ver[14] = 0x40
	icmp := append([]byte(nil), golden...)
	icmp[20] = 58
	return []struct {
		name  string
		frame []byte
		want  verdict
	}{
		{"golden udp 4791 to a local address", golden, vUDP},
		{"udp 4971 alias", udp(mine, 4971), vUDP},
		{"udp 4791 to the second address", udp(netip.MustParseAddr("fd00:1:4::5"), 4791), vUDP},
		{"udp 4791 to another address", udp(netip.MustParseAddr("fd00:1:3::6"), 4791), vPass},
		{"udp 53 to a local address", udp(mine, 53), vPass},
		{"ip6in6 to the uSID", tunnel("5f00:1:c003::"), vUSID},
		{"ip6in6 to the uSID, more uSIDs behind", tunnel("5f00:1:c003:4001:c104::"), vUSID},
		{"ip6in6 to the second prefix", tunnel("5f00:2:c103::"), vUSID},
		{"ip6in6 to a neighbour's uSID", tunnel("5f00:1:c004::"), vPass},
		{"ip6in6 to the uSID in another block", tunnel("5f00:3:c003::"), vPass},
		{"udp to the uSID address, not tunnelled", udp(netip.MustParseAddr("5f00:1:c003::"), 4791), vPass},
		{"icmpv6 to a local address", icmp, vPass},
		{"arp", arp, vPass},
		{"version 4 in an IPv6 ethertype", ipv4ver, vPass},
		{"truncated udp header", golden[:58], vPass},
		{"truncated ipv6 header", golden[:40], vPass},
		{"ethernet header only", golden[:14], vPass},
	}
}

func TestSteerProgram(t *testing.T) {
	h := newSteerHarness(t)
	for _, tc := range steerCases() {
		t.Run(tc.name, func(t *testing.T) {
			if ref := classify(tc.frame, h.prefixes, h.addrs); ref != tc.want {
				t.Fatalf("reference classify = %v, table says %v", ref, tc.want)
			}
			if got := h.run(t, tc.frame); got != tc.want {
				t.Errorf("program: %v, want %v", got, tc.want)
			}
		})
	}
}

// FuzzSteer checks the BPF program against the Go reference on any frame.
func FuzzSteer(f *testing.F) {
	for _, tc := range steerCases() {
		f.Add(tc.frame)
	}
	h := newSteerHarness(f)
	f.Fuzz(func(t *testing.T, frame []byte) {
		if len(frame) < 14 || len(frame) > 3000 { // BPF_PROG_TEST_RUN limits
			t.Skip()
		}
		if got, want := h.run(t, frame), classify(frame, h.prefixes, h.addrs); got != want {
			t.Errorf("program %v, reference %v for % x", got, want, frame)
		}
	})
}
