package dataplane

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"math/rand/v2"
	"net/netip"
	"testing"
)

// refSwitch is an independent Go model of the switch program for the harness
// topology (SRv6 mode, block 5f00:1::/32, own uN 0x0100, no port models, no
// faults). The fuzz tests hold the BPF program to it frame by frame.
type refSwitch struct {
	routes []Route
	groups map[GroupID][]PortID
	local  map[netip.Addr]bool
}

func harnessRef() *refSwitch {
	return &refSwitch{
		routes: []Route{
			{netip.MustParsePrefix("5f00:1:200::/48"), NextHop{Port: 1}},
			{netip.MustParsePrefix("5f00:1:300::/48"), NextHop{Port: 2}},
			{netip.MustParsePrefix("5f00:1:c001::/48"), NextHop{Port: 4}},
			{netip.MustParsePrefix("fd00:4::/32"), NextHop{Port: 4}},
			{netip.MustParsePrefix("fd00:9::/32"), NextHop{Group: true, GroupID: 7}},
		},
		groups: map[GroupID][]PortID{7: {0, 1, 2, 3}},
		local:  map[netip.Addr]bool{},
	}
}

// forward returns the verdict, the output frame, and the port and counter
// that must move.
func (r *refSwitch) forward(in []byte) (uint32, []byte, PortID, counter) {
	out := append([]byte(nil), in...)
	if binary.BigEndian.Uint16(in[12:]) != 0x86dd {
		return xdpPass, out, ingressPort, cPass
	}
	if len(in) < 54 || in[14]>>4 != 6 {
		return xdpDrop, nil, ingressPort, cMalformed
	}
	if int(binary.BigEndian.Uint16(in[18:]))+40 > len(in)-14 {
		return xdpDrop, nil, ingressPort, cMalformed
	}
	da := out[38:54]
	daAddr := netip.AddrFrom16([16]byte(da))
	if da[0] == 0xff || (da[0] == 0xfe && da[1]&0xc0 == 0x80) || r.local[daAddr] {
		return xdpPass, out, ingressPort, cPass
	}
	executed := false
	for {
		own := binary.BigEndian.Uint32(da) == 0x5f000001 && binary.BigEndian.Uint16(da[4:]) == ownUSID
		if !own {
			break
		}
		if allZero(da[6:]) {
			return xdpDrop, nil, ingressPort, cEOC
		}
		if out[21] <= 1 {
			return xdpDrop, nil, ingressPort, cHopLimit
		}
		copy(da[4:], da[6:])
		da[14], da[15] = 0, 0
		out[21]--
		executed = true
	}
	if !executed {
		if out[21] <= 1 {
			return xdpDrop, nil, ingressPort, cHopLimit
		}
		out[21]--
	}
	daAddr = netip.AddrFrom16([16]byte(da))
	best := -1
	for i, rt := range r.routes {
		if rt.Prefix.Contains(daAddr) && (best < 0 || rt.Prefix.Bits() > r.routes[best].Prefix.Bits()) {
			best = i
		}
	}
	if best < 0 {
		return xdpDrop, nil, ingressPort, cNoRoute
	}
	nh := r.routes[best].NextHop
	p := nh.Port
	if nh.Group {
		m := r.groups[nh.GroupID]
		src := netip.AddrFrom16([16]byte(out[22:38]))
		fl := binary.BigEndian.Uint32(out[14:]) & 0xfffff
		p = m[FlowHash(src, daAddr, fl, refSport(out))%uint32(len(m))]
	}
	n, o := neighMAC(p), ownMAC(p)
	copy(out[0:], n[:])
	copy(out[6:], o[:])
	return xdpRedirect, out, p, cForwarded
}

func refSport(f []byte) uint16 {
	nh, udp := f[20], 54
	if nh == 41 {
		if len(f) < 94 || f[54]>>4 != 6 {
			return 0
		}
		nh, udp = f[60], 94
	}
	if nh != 17 || len(f) < udp+8 {
		return 0
	}
	return binary.BigEndian.Uint16(f[udp:])
}

func allZero(b []byte) bool {
	for _, x := range b {
		if x != 0 {
			return false
		}
	}
	return true
}

// seedFrames are valid frames of every kind the switch handles.
func seedFrames() [][]byte {
	ecmp := usidFrame("fd00:9::1", 64)
	ecmp.encap = false
	ndp := usidFrame("ff02::1:ff00:1", 255)
	ndp.encap, ndp.nextHeader = false, 58
	arp := usidFrame("::", 0)
	arp.ethType, arp.rawPayload = 0x0806, make([]byte, 28)
	hbh := usidFrame("5f00:1:100:200::", 64)
	hbh.nextHeader = 0
	return [][]byte{
		usidFrame("5f00:1:100:200::", 64).bytes(),
		usidFrame("5f00:1:100:100:300:c001:1:2", 3).bytes(),
		usidFrame("5f00:1:100::", 64).bytes(),
		usidFrame("5f00:1:200::", 1).bytes(),
		dataFrame(10, 2, mrcHdr{opcode: 0xCB, ts: true, payload: 300}).bytes(),
		ecmp.bytes(), ndp.bytes(), arp.bytes(), hbh.bytes(),
	}
}

// mutate returns a damaged copy of f: header bytes flipped, truncated,
// extended, a lying payload length, or pure noise.
func mutate(rng *rand.Rand, f []byte) []byte {
	b := append([]byte(nil), f...)
	switch rng.IntN(6) {
	case 0: // flip bytes in the headers
		for i := 0; i < 1+rng.IntN(4); i++ {
			b[rng.IntN(min(len(b), 110))] ^= byte(1 + rng.IntN(255))
		}
	case 1: // truncate
		b = b[:14+rng.IntN(len(b)-13)]
	case 2: // extend with junk
		b = append(b, make([]byte, rng.IntN(200))...)
	case 3: // payload length lies
		if len(b) >= 20 {
			binary.BigEndian.PutUint16(b[18:], uint16(rng.IntN(4000)))
		}
	case 4: // random next header (extension headers, ICMPv6, ...)
		if len(b) >= 21 {
			b[20] = []byte{0, 43, 44, 59, 60, 58, 6, 41, 17}[rng.IntN(9)]
		}
	default: // noise, sometimes keeping an IPv6 EtherType
		b = make([]byte, 14+rng.IntN(300))
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		if rng.IntN(2) == 0 {
			b[12], b[13], b[14] = 0x86, 0xdd, 0x60|b[14]&0x0f
		}
	}
	return b
}

// checkAgainstRef runs one frame and compares verdict, output and the
// counter that moved with the reference model.
func checkAgainstRef(t testing.TB, h *harness, ref *refSwitch, in []byte) string {
	t.Helper()
	wantRet, wantOut, p, cnt := ref.forward(in)
	before := cnt.get(h.counters(p))
	ret, out := h.run(in)
	if ret != wantRet {
		t.Fatalf("input %s: verdict %d, reference %d (%s)", hex.EncodeToString(in), ret, wantRet, cnt.name)
	}
	if wantOut != nil && !bytes.Equal(out, wantOut) {
		t.Fatalf("input %s:\n got  %s\n want %s", hex.EncodeToString(in), hex.EncodeToString(out), hex.EncodeToString(wantOut))
	}
	if after := cnt.get(h.counters(p)); after != before+1 {
		t.Fatalf("input %s: port %d %s went %d -> %d, want +1", hex.EncodeToString(in), p, cnt.name, before, after)
	}
	return cnt.name
}

func TestMalformedInput(t *testing.T) {
	good := usidFrame("5f00:1:100:200::", 64).bytes()
	withPlen := func(n uint16) []byte {
		b := append([]byte(nil), good...)
		binary.BigEndian.PutUint16(b[18:], n)
		return b
	}
	v4in6 := append([]byte(nil), good...)
	v4in6[14] = 0x45
	oversize := usidFrame("5f00:1:100:200::", 64)
	oversize.rawPayload = make([]byte, 3300)
	srh := usidFrame("5f00:1:100:200::", 64)
	srh.encap, srh.nextHeader = false, 43
	srh.rawPayload = []byte{59, 2, 4, 1, 0, 0, 0, 0, 0x5f, 0, 0, 1, 0, 0x99, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}
	srhOut := sent(srh, 1, "5f00:1:200::", 63)
	over := sent(oversize, 1, "5f00:1:200::", 63)
	padded := append(append([]byte(nil), good...), make([]byte, 30)...)
	paddedOut := append(sent(usidFrame("5f00:1:100:200::", 64), 1, "5f00:1:200::", 63).bytes(), make([]byte, 30)...)
	cases := []struct {
		name    string
		in      []byte
		wantRet uint32
		want    []byte
		p       PortID
		cnt     counter
	}{
		{"Ethernet only", good[:14], xdpDrop, nil, ingressPort, cMalformed},
		{"IPv6 header cut", good[:14+39], xdpDrop, nil, ingressPort, cMalformed},
		{"version 4 in an IPv6 EtherType", v4in6, xdpDrop, nil, ingressPort, cMalformed},
		{"payload length longer than frame", withPlen(uint16(len(good) - 14 - 40 + 1)), xdpDrop, nil, ingressPort, cMalformed},
		{"payload length 0xffff", withPlen(0xffff), xdpDrop, nil, ingressPort, cMalformed},
		{"trailing padding is forwarded", padded, xdpRedirect, paddedOut, 1, cForwarded},
		{"SRH: DA shifted, SRH untouched", srh.bytes(), xdpRedirect, srhOut.bytes(), 1, cForwarded},
		{"3.4 KB frame", oversize.bytes(), xdpRedirect, over.bytes(), 1, cForwarded},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			ret, out := h.run(tc.in)
			if ret != tc.wantRet || (tc.want != nil && !bytes.Equal(out, tc.want)) {
				t.Fatalf("verdict %d out %x; want %d %x", ret, out, tc.wantRet, tc.want)
			}
			if got := tc.cnt.get(h.counters(tc.p)); got != 1 {
				t.Fatalf("port %d %s = %d, want 1", tc.p, tc.cnt.name, got)
			}
		})
	}
}

// TestFuzzLoop drives damaged and random frames through the program and the
// reference model: the program never forwards a frame the model would not,
// never forwards a different frame, never aborts, and counts every frame
// exactly once.
func TestFuzzLoop(t *testing.T) {
	h := newHarness(t)
	ref := harnessRef()
	rng := rand.New(rand.NewPCG(1, 2))
	seeds := seedFrames()
	n := 3000
	if testing.Short() {
		n = 300
	}
	seen := map[string]int{}
	for i := 0; i < n; i++ {
		seen[checkAgainstRef(t, h, ref, mutate(rng, seeds[rng.IntN(len(seeds))]))]++
	}
	for _, c := range []counter{cForwarded, cPass, cMalformed, cNoRoute, cHopLimit, cEOC} {
		if seen[c.name] == 0 {
			t.Errorf("no fuzzed frame ended as %s (outcomes %v): the loop does not cover it", c.name, seen)
		}
	}
	t.Logf("outcomes: %v", seen)
	var rx, outs uint64
	for p := PortID(0); p <= UnmappedPort; p++ {
		c := h.counters(p)
		rx += c.RxPackets
		outs += outcomes(c)
	}
	if rx != uint64(n) || outs != uint64(n) {
		t.Fatalf("%d frames: rx %d, outcomes %d", n, rx, outs)
	}
}

// FuzzSwitch is the go-fuzz entry: go test -fuzz FuzzSwitch ./switchd/dataplane
func FuzzSwitch(f *testing.F) {
	for _, s := range seedFrames() {
		f.Add(s)
	}
	h := newHarness(f)
	ref := harnessRef()
	f.Fuzz(func(t *testing.T, in []byte) {
		// BPF_PROG_RUN rejects frames shorter than an Ethernet header or
		// longer than a page minus head/tailroom; drivers never deliver them.
		if len(in) < 14 || len(in) > 3000 {
			t.Skip()
		}
		h.t = t
		checkAgainstRef(t, h, ref, in)
	})
}
