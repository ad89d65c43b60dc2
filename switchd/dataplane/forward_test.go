package dataplane

import (
	"bytes"
	"encoding/hex"
	"net/netip"
	"strconv"
	"testing"
)

// counter selects one counter field, so a table can name what a case must
// increment.
type counter struct {
	name string
	get  func(PortCounters) uint64
}

var (
	cForwarded = counter{"forwarded", func(c PortCounters) uint64 { return c.Forwarded }}
	cPass      = counter{"pass", func(c PortCounters) uint64 { return c.Pass }}
	cNoRoute   = counter{"drop_no_route", func(c PortCounters) uint64 { return c.DropNoRoute }}
	cHopLimit  = counter{"drop_hop_limit", func(c PortCounters) uint64 { return c.DropHopLimit }}
	cFault     = counter{"drop_fault", func(c PortCounters) uint64 { return c.DropFault }}
	cBuffer    = counter{"drop_buffer", func(c PortCounters) uint64 { return c.DropBuffer }}
	cMalformed = counter{"drop_malformed", func(c PortCounters) uint64 { return c.DropMalformed }}
	cEOC       = counter{"drop_end_of_container", func(c PortCounters) uint64 { return c.DropEndOfContainer }}
	cMarked    = counter{"ecn_marked", func(c PortCounters) uint64 { return c.ECNMarked }}
	cTrimmed   = counter{"trimmed", func(c PortCounters) uint64 { return c.Trimmed }}
)

// outcome of one frame: exactly one of these counters moves by one per frame.
func outcomes(c PortCounters) uint64 { return c.Forwarded + c.Pass + c.Dropped() }

// usidFrame is the SRv6-mode test frame: outer DA = the container.
func usidFrame(da string, hl uint8) testFrame {
	return testFrame{
		dstMAC: macSwitch, srcMAC: macSender, tc: 10 << 2, flow: 0x12345, hl: hl,
		src: netip.MustParseAddr("fd00:1::1"), dst: netip.MustParseAddr(da),
		encap: true, innerSrc: netip.MustParseAddr("fd00:1::1"), innerDst: netip.MustParseAddr("fd00:4::1"),
		sport: 0xbeef, dport: 4791, rawPayload: bytes.Repeat([]byte{0x5a}, 100),
	}
}

// sent is f as the switch should emit it on port p: new DA and hop limit,
// MACs of port p, everything else unchanged.
func sent(f testFrame, p PortID, da string, hl uint8) testFrame {
	f.dstMAC, f.srcMAC = neighMAC(p), ownMAC(p)
	f.dst = netip.MustParseAddr(da)
	f.hl = hl
	return f
}

type fwdCase struct {
	name    string
	setup   func(*harness)
	in      testFrame
	raw     []byte // used instead of in when set
	wantRet uint32
	want    *testFrame // golden output when forwarded
	port    PortID     // port whose counter must move
	cnt     counter
}

func runCases(t *testing.T, cases []fwdCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			if tc.setup != nil {
				tc.setup(h)
			}
			in := tc.raw
			if in == nil {
				in = tc.in.bytes()
			}
			ret, out := h.run(in)
			if ret != tc.wantRet {
				t.Fatalf("verdict %d, want %d", ret, tc.wantRet)
			}
			if tc.want != nil {
				if g := tc.want.bytes(); !bytes.Equal(out, g) {
					t.Fatalf("output frame differs from golden\n got  %s\n want %s", hex.EncodeToString(out), hex.EncodeToString(g))
				}
			}
			checkOneOutcome(t, h, tc.port, tc.cnt)
		})
	}
}

// checkOneOutcome asserts that exactly one frame was received on the ingress
// port and that exactly one outcome, cnt on port p, was counted.
func checkOneOutcome(t *testing.T, h *harness, p PortID, cnt counter) {
	t.Helper()
	in := h.counters(ingressPort)
	if in.RxPackets != 1 {
		t.Errorf("ingress rx_packets %d, want 1", in.RxPackets)
	}
	var total uint64
	for q := PortID(0); q <= UnmappedPort; q++ {
		total += outcomes(h.counters(q))
	}
	if total != 1 {
		t.Errorf("%d outcomes counted over all ports, want exactly 1", total)
	}
	if got := cnt.get(h.counters(p)); got != 1 {
		t.Errorf("port %d %s = %d, want 1 (counters %+v)", p, cnt.name, got, h.counters(p))
	}
}

func TestUSIDForwarding(t *testing.T) {
	fw := func(name, da string, hl uint8, p PortID, outDA string, outHL uint8) fwdCase {
		in := usidFrame(da, hl)
		w := sent(in, p, outDA, outHL)
		return fwdCase{name: name, in: in, wantRet: xdpRedirect, want: &w, port: p, cnt: cForwarded}
	}
	drop := func(name, da string, hl uint8, c counter) fwdCase {
		return fwdCase{name: name, in: usidFrame(da, hl), wantRet: xdpDrop, port: ingressPort, cnt: c}
	}
	runCases(t, []fwdCase{
		fw("uN, 1 uSID left", "5f00:1:100:200::", 64, 1, "5f00:1:200::", 63),
		fw("uN, 2 uSIDs left", "5f00:1:100:300:200::", 64, 2, "5f00:1:300:200::", 63),
		fw("uN, 3 uSIDs left", "5f00:1:100:200:300:c001::", 64, 1, "5f00:1:200:300:c001::", 63),
		fw("uN, 4 uSIDs left", "5f00:1:100:300:200:300:c001:0", 64, 2, "5f00:1:300:200:300:c001::", 63),
		fw("uN, 5 uSIDs left (full container)", "5f00:1:100:200:300:400:500:600", 10, 1, "5f00:1:200:300:400:500:600:0", 9),
		fw("own uSID twice", "5f00:1:100:100:300::", 64, 2, "5f00:1:300::", 62),
		fw("own uSID three times, then full", "5f00:1:100:100:100:c001:abcd:ef01", 64, 4, "5f00:1:c001:abcd:ef01::", 61),
		fw("transit, not own", "5f00:1:200:300::", 64, 1, "5f00:1:200:300::", 63),
		fw("hop limit 2", "5f00:1:100:200::", 2, 1, "5f00:1:200::", 1),
		fw("argument non-zero only in last word", "5f00:1:100:200:0:0:0:1", 64, 1, "5f00:1:200::1:0", 63),
		drop("end of container", "5f00:1:100::", 64, cEOC),
		drop("own twice then end of container", "5f00:1:100:100::", 64, cEOC),
		drop("hop limit 1 at uN", "5f00:1:100:200::", 1, cHopLimit),
		drop("hop limit 0 at uN", "5f00:1:100:200::", 0, cHopLimit),
		drop("hop limit 1 transit", "5f00:1:200::", 1, cHopLimit),
		drop("hop limit runs out on second own uSID", "5f00:1:100:100:200::", 2, cHopLimit),
		drop("FIB miss", "5f00:1:900::", 64, cNoRoute),
		drop("FIB miss after shift", "5f00:1:100:900::", 64, cNoRoute),
		drop("FIB miss outside the block", "2001:db8::1", 64, cNoRoute),
	})
}

func TestPassToKernel(t *testing.T) {
	arp := usidFrame("5f00:1:100:200::", 64)
	arp.ethType = 0x0806
	arp.rawPayload = make([]byte, 28)
	ipv4 := arp
	ipv4.ethType = 0x0800
	ipv4.rawPayload = append([]byte{0x45, 0, 0, 20}, make([]byte, 16)...)
	ndp := usidFrame("ff02::1:ff00:1", 255)
	ndp.encap, ndp.nextHeader, ndp.rawPayload = false, 58, []byte{135, 0, 0, 0, 0, 0, 0, 0}
	ll := usidFrame("fe80::1", 255)
	ll.encap, ll.nextHeader, ll.rawPayload = false, 58, []byte{128, 0, 0, 0}
	local := usidFrame("fd00:ffff::5", 64)
	hangNDP := ndp
	pass := func(name string, f testFrame, setup func(*harness)) fwdCase {
		return fwdCase{name: name, in: f, setup: setup, wantRet: xdpPass, want: &f, port: ingressPort, cnt: cPass}
	}
	runCases(t, []fwdCase{
		pass("ARP", arp, nil),
		pass("IPv4", ipv4, nil),
		pass("NDP to solicited-node multicast", ndp, nil),
		pass("ICMPv6 to link-local", ll, nil),
		pass("local address", local, func(h *harness) { must(h.t, h.d.AddLocalAddr(netip.MustParseAddr("fd00:ffff::5"))) }),
		pass("NDP while hung", hangNDP, func(h *harness) { must(h.t, h.d.SetHang(true)) }),
		pass("local address while hung", local, func(h *harness) {
			must(h.t, h.d.AddLocalAddr(netip.MustParseAddr("fd00:ffff::5")))
			must(h.t, h.d.SetHang(true))
		}),
		pass("local address on a blackholed ingress port", local, func(h *harness) {
			must(h.t, h.d.AddLocalAddr(netip.MustParseAddr("fd00:ffff::5")))
			must(h.t, h.d.SetFault(ingressPort, Fault{Blackhole: true}))
		}),
		pass("own uN with argument zero that is a local address", usidFrame("5f00:1:100::", 64), func(h *harness) {
			must(h.t, h.d.AddLocalAddr(netip.MustParseAddr("5f00:1:100::")))
		}),
		pass("local address with hop limit 1", usidFrame("fd00:ffff::5", 1), func(h *harness) {
			must(h.t, h.d.AddLocalAddr(netip.MustParseAddr("fd00:ffff::5")))
		}),
	})
	// A local address inside an own uN prefix with a non-zero argument is a
	// uSID container passing through, not a frame for the switch: shifted
	// and forwarded (docs/switch.md, step 4).
	fwd := sent(usidFrame("5f00:1:100:200::", 64), 1, "5f00:1:200::", 63)
	runCases(t, []fwdCase{{
		name:  "own uN with a non-zero argument listed as local",
		setup: func(h *harness) { must(h.t, h.d.AddLocalAddr(netip.MustParseAddr("5f00:1:100:200::"))) },
		in:    usidFrame("5f00:1:100:200::", 64), wantRet: xdpRedirect, want: &fwd, port: 1, cnt: cForwarded,
	}})
}

func TestBlockLengths(t *testing.T) {
	for _, tc := range []struct {
		bits          int
		block, route  string
		in, out, out2 string
	}{
		{16, "5f00::/16", "5f00:200::/32", "5f00:100:200:300:400:500:600:700", "5f00:200:300:400:500:600:700:0", ""},
		{32, "5f00:1::/32", "5f00:1:200::/48", "5f00:1:100:200:300::", "5f00:1:200:300::", ""},
		{48, "5f00:1:2::/48", "5f00:1:2:200::/64", "5f00:1:2:100:200:300:400:500", "5f00:1:2:200:300:400:500:0", ""},
	} {
		t.Run(tc.block, func(t *testing.T) {
			h := newHarness(t)
			block := netip.MustParsePrefix(tc.block)
			must(t, h.d.SetSwitchConfig(SwitchConfig{BlockBits: tc.bits, Block: block, OwnUSIDs: []uint16{ownUSID}}))
			must(t, h.d.AddRoute(netip.MustParsePrefix(tc.route), NextHop{Port: 3}))
			in := usidFrame(tc.in, 64)
			ret, out := h.run(in.bytes())
			want := sent(in, 3, tc.out, 63).bytes()
			if ret != xdpRedirect || !bytes.Equal(out, want) {
				t.Fatalf("verdict %d, DA %v; want %d, DA %s", ret, frameDA(out), xdpRedirect, tc.out)
			}
			// The block itself is never taken for a uSID: end of container
			// is detected with the block's own bits set.
			eoc := usidFrame(USIDPrefix(block, ownUSID).Addr().String(), 64)
			if ret, _ := h.run(eoc.bytes()); ret != xdpDrop || h.counters(ingressPort).DropEndOfContainer != 1 {
				t.Fatalf("end of container: verdict %d, counters %+v", ret, h.counters(ingressPort))
			}
		})
	}
}

func TestSwitchConfigReplacesOwnSIDs(t *testing.T) {
	h := newHarness(t)
	must(t, h.d.SetSwitchConfig(SwitchConfig{Block: testBlock, OwnUSIDs: []uint16{0x0300}}))
	// 0x0100 is no longer ours: 5f00:1:100:200:: has no route.
	if ret, _ := h.run(usidFrame("5f00:1:100:200::", 64).bytes()); ret != xdpDrop {
		t.Fatalf("old own uSID still processed: verdict %d", ret)
	}
	in := usidFrame("5f00:1:300:200::", 64)
	ret, out := h.run(in.bytes())
	if ret != xdpRedirect || !bytes.Equal(out, sent(in, 1, "5f00:1:200::", 63).bytes()) {
		t.Fatalf("new own uSID: verdict %d DA %v", ret, frameDA(out))
	}
	if err := h.d.SetSwitchConfig(SwitchConfig{Block: testBlock, OwnUSIDs: []uint16{0}}); err == nil {
		t.Fatal("uSID 0 accepted as own uN")
	}
	if err := h.d.SetSwitchConfig(SwitchConfig{BlockBits: 24, Block: testBlock}); err == nil {
		t.Fatal("block length 24 accepted")
	}
}

func TestECMPMemberChoice(t *testing.T) {
	h := newHarness(t)
	must(t, h.d.SetMode(ModeECMP))
	members := []PortID{0, 1, 2, 3}
	seen := map[PortID]int{}
	for i := 0; i < 64; i++ {
		f := testFrame{
			dstMAC: macSwitch, srcMAC: macSender, tc: 10<<2 | 2, flow: uint32(i*7919) & 0xfffff, hl: 64,
			src: netip.MustParseAddr("fd00:1::1"), dst: netip.MustParseAddr("fd00:9::2"),
			sport: uint16(49152 + i*13), dport: 4791, rawPayload: []byte("payload"),
		}
		want := members[FlowHash(f.src, f.dst, f.flow, f.sport)%uint32(len(members))]
		ret, out := h.run(f.bytes())
		if ret != xdpRedirect {
			t.Fatalf("flow %d: verdict %d", i, ret)
		}
		w := sent(f, want, "fd00:9::2", 63)
		if !bytes.Equal(out, w.bytes()) {
			t.Fatalf("flow %d (label %#x sport %d): went to MAC %x, want port %d", i, f.flow, f.sport, out[:6], want)
		}
		seen[want]++
	}
	if len(seen) < 3 {
		t.Errorf("64 flows used only ports %v of 4: hash does not spread", seen)
	}
	// Same flow, same member, whatever the payload.
	var first []byte
	for i := 0; i < 5; i++ {
		f := testFrame{dstMAC: macSwitch, srcMAC: macSender, hl: 64, flow: 0x777,
			src: netip.MustParseAddr("fd00:1::1"), dst: netip.MustParseAddr("fd00:9::2"),
			sport: 1000, dport: 4791, rawPayload: bytes.Repeat([]byte{byte(i)}, 10+i)}
		_, out := h.run(f.bytes())
		if first == nil {
			first = out[:6]
		} else if !bytes.Equal(first, out[:6]) {
			t.Fatalf("same flow hashed to %x then %x", first, out[:6])
		}
	}
	// ECMP mode does no uSID processing: own uN is just a destination.
	if ret, _ := h.run(usidFrame("5f00:1:100:200::", 64).bytes()); ret != xdpDrop {
		t.Fatalf("ECMP mode processed a uSID: verdict %d", ret)
	}
	// The hash also reads the encapsulated UDP source port in SRv6 mode.
	must(t, h.d.SetMode(ModeSRv6))
	must(t, h.d.AddRoute(netip.MustParsePrefix("5f00:1:a00::/48"), NextHop{Group: true, GroupID: 7}))
	for i := 0; i < 16; i++ {
		f := usidFrame("5f00:1:100:a00:c001::", 64)
		f.sport = uint16(i * 101)
		da := netip.MustParseAddr("5f00:1:a00:c001::")
		want := members[FlowHash(f.src, da, f.flow, f.sport)%4]
		_, out := h.run(f.bytes())
		if !bytes.Equal(out, sent(f, want, da.String(), 63).bytes()) {
			t.Fatalf("SRv6 flow %d: went to MAC %x, want port %d", i, out[:6], want)
		}
	}
}

func TestRoutesAndPortsAPI(t *testing.T) {
	h := newHarness(t)
	rs, err := h.d.Routes()
	must(t, err)
	if len(rs) != 5 {
		t.Fatalf("%d routes, want 5: %v", len(rs), rs)
	}
	if rs[0].Prefix != netip.MustParsePrefix("5f00:1:200::/48") || rs[0].NextHop != (NextHop{Port: 1}) {
		t.Errorf("first route %+v", rs[0])
	}
	must(t, h.d.DelRoute(netip.MustParsePrefix("5f00:1:200::/48")))
	if err := h.d.DelRoute(netip.MustParsePrefix("5f00:1:200::/48")); err == nil {
		t.Error("deleting a missing route succeeded")
	}
	if ret, _ := h.run(usidFrame("5f00:1:100:200::", 64).bytes()); ret != xdpDrop {
		t.Errorf("deleted route still used: verdict %d", ret)
	}
	must(t, h.d.DelPort(2))
	if ret, _ := h.run(usidFrame("5f00:1:300::", 64).bytes()); ret != xdpDrop || h.counters(ingressPort).DropNoRoute != 2 {
		t.Errorf("route to deleted port: verdict %d counters %+v", ret, h.counters(ingressPort))
	}
	for _, bad := range []error{
		h.d.AddRoute(netip.MustParsePrefix("10.0.0.0/8"), NextHop{Port: 1}),
		h.d.AddRoute(netip.MustParsePrefix("fd00::/8"), NextHop{Port: MaxPorts}),
		h.d.SetECMPGroup(1, nil),
		h.d.SetPort(1, Port{Ifindex: 1}),
		h.d.SetPort(1, Port{Ifindex: 1, NeighMAC: make([]byte, 6), OwnMAC: make([]byte, 6), Model: PortModel{CapacityBps: 1e9}}),
		h.d.SetPort(1, Port{Ifindex: 1, NeighMAC: make([]byte, 6), OwnMAC: make([]byte, 6), Model: PortModel{CapacityBps: 1e9, BufferBytes: 100, TrimBytes: 200}}),
		h.d.SetFault(1, Fault{LossPPM: 2_000_000}),
		h.d.SetFault(1, Fault{FlapOn: 1}),
	} {
		if bad == nil {
			t.Error("invalid configuration accepted")
		}
	}
}

// TestBlockBitsCheckedInProgram: the program bounds the block length it reads
// from the config map instead of trusting user space. The map can be written
// by anything holding the pin; with an unchecked length 0 the uN helpers
// shifted the block itself and forwarded the frame to a wrong prefix.
func TestBlockBitsCheckedInProgram(t *testing.T) {
	const da = "5f00:1:0:100:200::" // own uSID 0x0100 only if the block were 48 bits (or 0)
	for _, tc := range []struct {
		bits    uint32
		wantRet uint32
		cnt     counter
		port    PortID
	}{
		{32, xdpRedirect, cForwarded, 3}, // control: a valid length routes the frame
		{0, xdpDrop, cNoRoute, ingressPort},
		{8, xdpDrop, cNoRoute, ingressPort},
		{24, xdpDrop, cNoRoute, ingressPort},
		{64, xdpDrop, cNoRoute, ingressPort},
		{1 << 31, xdpDrop, cNoRoute, ingressPort},
	} {
		t.Run(strconv.FormatUint(uint64(tc.bits), 10), func(t *testing.T) {
			h := newHarness(t)
			must(t, h.d.AddRoute(netip.MustParsePrefix("5f00::/16"), NextHop{Port: 3}))
			var c SwitchSwConfig
			must(t, h.d.objs.Config.Lookup(uint32(0), &c))
			c.BlockBits = tc.bits // past SetSwitchConfig's validation, as a foreign map writer would
			must(t, h.d.objs.Config.Put(uint32(0), c))
			ret, out := h.run(usidFrame(da, 64).bytes())
			if ret != tc.wantRet {
				t.Fatalf("block_bits %d: verdict %d (DA out %v), want %d", tc.bits, ret, frameDA(out), tc.wantRet)
			}
			checkOneOutcome(t, h, tc.port, tc.cnt)
		})
	}
}
