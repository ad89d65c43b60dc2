package oam

import (
	"errors"
	"slices"
	"testing"

	"github.com/softmrc/softmrc/internal/pathtmpl"
	"github.com/softmrc/softmrc/internal/wire"
	"github.com/softmrc/softmrc/testbed/plan"
	"github.com/softmrc/softmrc/testbed/topo"
)

func TestBuildParse(t *testing.T) {
	src := wire.Addr128FromSlice([]byte{0xfd, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1})
	tgt := wire.Addr128FromSlice([]byte{0xfd, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 4})
	dst := wire.Addr128FromSlice([]byte{0x5f, 0, 0, 1, 0x40, 0, 0x02, 0, 0x41, 0, 0xc1, 0, 0, 0, 0, 0})
	ret := wire.Addr128FromSlice([]byte{0x5f, 0, 0, 1, 0x41, 0, 0x01, 0, 0x40, 0, 0xc0, 0, 0, 0, 0, 0})
	for _, k := range []Kind{Loop, EchoRequest, EchoReply, Reflect, Reflected} {
		p := Probe{Kind: k, ID: 0xdeadbeef, Seq: 7, EV: wire.MakeEV(1, 1, 0x12345), TxTime: 123456789}
		if k == Reflect {
			p.Return = ret
		}
		var b [FrameLen + 10]byte
		n, err := Build(b[:], Net{SrcMAC: [6]byte{2, 0, 0, 0, 0, 1}, DstMAC: [6]byte{2, 0, 0, 0, 0, 2}, Src: src, Dst: dst, Target: tgt}, p)
		if err != nil || n != FrameLen {
			t.Fatalf("Build: %d, %v", n, err)
		}
		if !Is(b[:n]) {
			t.Fatal("Is false on a probe")
		}
		got, from, err := Parse(b[:n])
		if err != nil || got != p || from != src {
			t.Fatalf("Parse = %+v from %v, %v; want %+v from %v", got, from, err, p, src)
		}
		// The outer destination is the container, the inner one the target.
		if wire.Addr128FromSlice(b[14+24:14+40]) != dst || wire.Addr128FromSlice(b[54+24:54+40]) != tgt {
			t.Fatal("addresses misplaced")
		}
		// The UDP checksum verifies (sum over pseudo-header and UDP is 0xffff).
		if c := udpChecksum(b[54+8:54+40], b[94:n]); c != 0xffff && c != 0 {
			// Recomputing over a datagram whose checksum field is set
			// gives 0 (or 0xffff): any other value is a wrong checksum.
			t.Fatalf("UDP checksum does not verify: %#x", c)
		}
	}
	var short [FrameLen - 1]byte
	if _, err := Build(short[:], Net{}, Probe{Kind: Loop}); err == nil {
		t.Fatal("Build into a short buffer succeeded")
	}
	var b [FrameLen]byte
	Build(b[:], Net{Src: src, Dst: dst}, Probe{Kind: Loop})
	b[94+8] ^= 0xff // magic
	if _, _, err := Parse(b[:]); !errors.Is(err, ErrNotProbe) {
		t.Fatalf("bad magic: %v", err)
	}
	b[94+2] = 0 // another UDP port: MRC traffic, not OAM
	if Is(b[:]) {
		t.Fatal("Is true for another UDP port")
	}
}

// h0Template is h0's path template on clos-2p, h0's downlink uSID on
// plane, and the peer indexes of h1 (under h0's T0) and h3 (across a T1).
func h0Template(t *testing.T, plane int) (tm *pathtmpl.Template, self uint16, h1, h3 int) {
	t.Helper()
	tp, _ := topo.Preset("clos-2p")
	pl, err := plan.Build(tp, plan.Options{RunDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if tm, err = pl.Template(&pl.Hosts[0]); err != nil {
		t.Fatal(err)
	}
	h1, _ = tm.PeerIndex("h1")
	h3, _ = tm.PeerIndex("h3")
	return tm, uint16(pl.Hosts[0].Ports[plane].DownlinkUSID), h1, h3
}

// TestTrace: the hops of h0's paths on clos-2p, cross-T1 and T0-local, and
// the loop containers cut at each.
func TestTrace(t *testing.T) {
	tm, self, h1, h3 := h0Template(t, 1)
	type hop struct {
		name string
		usid uint16
		via  []uint16
		kind Kind
	}
	cases := []struct {
		peer int
		ev   wire.EV
		want []hop
	}{
		{h3, wire.MakeEV(1, 1, 9), []hop{
			{"p1-t0-0", 0x4001, []uint16{0x4001, self}, Loop},
			{"p1-t1-1", 0x0201, []uint16{0x4001, 0x0201, 0x4001, self}, Loop},
			{"p1-t0-1", 0x4101, []uint16{0x4001, 0x0201, 0x4101, 0x0201, 0x4001, self}, Loop},
			{"h3", 0xc101, []uint16{0x4001, 0x0201, 0x4101, 0xc101}, EchoRequest},
		}},
		{h1, wire.MakeEV(1, 0, 9), []hop{
			{"p1-t0-0", 0x4001, []uint16{0x4001, self}, Loop},
			{"h1", 0xc101, []uint16{0x4001, 0xc101}, EchoRequest},
		}},
	}
	for _, c := range cases {
		hs, err := Trace(tm, c.peer, c.ev, self)
		if err != nil {
			t.Fatal(err)
		}
		if len(hs) != len(c.want) {
			t.Fatalf("%s: %d hops, want %d: %+v", tm.Peers[c.peer].Name, len(hs), len(c.want), hs)
		}
		for i, w := range c.want {
			h := hs[i]
			if h.Name != w.name || h.USID != w.usid || !slices.Equal(h.Via, w.via) || h.Kind != w.kind {
				t.Errorf("%s hop %d: %s %04x %04x %v, want %s %04x %04x %v", tm.Peers[c.peer].Name, i+1, h.Name, h.USID, h.Via, h.Kind, w.name, w.usid, w.via, w.kind)
			}
			if _, err := tm.Format().Build(tm.BlockAddr(), h.Via...); err != nil {
				t.Errorf("hop %d's uSIDs do not fit a container: %v", i+1, err)
			}
		}
	}
	if _, err := Trace(tm, h3, wire.MakeEV(5, 0, 0), self); err == nil {
		t.Error("an EV on a plane the template lacks traced")
	}
	// A 16-bit block leaves 7 slots; a 48-bit one 5, too few for hop 3.
	t48 := *tm
	t48.BlockBits, t48.Block = 48, "5f00:1:2::"
	if err := t48.Validate(); err != nil {
		t.Fatal(err)
	}
	if _, err := Trace(&t48, h3, wire.MakeEV(0, 0, 0), self); err == nil {
		t.Error("a loop of 6 uSIDs accepted in a 5-slot container")
	}
}

// TestRoundTrip: the two containers of a Reflect probe from h0 on clos-2p:
// out along the EV's path to the peer, back through the chosen T1 to h0;
// T0-local peers come back through their shared T0.
func TestRoundTrip(t *testing.T) {
	tm, self, h1, h3 := h0Template(t, 0)
	for _, c := range []struct {
		name     string
		peer     int
		ev       wire.EV
		back     uint8
		out, ret []uint16
	}{
		{"cross-T1, back over the other T1", h3, wire.MakeEV(0, 1, 5), 0,
			[]uint16{0x4000, 0x0200, 0x4100, 0xc100}, []uint16{0x4100, 0x0100, 0x4000, self}},
		{"cross-T1, back over the same T1", h3, wire.MakeEV(0, 1, 5), 1,
			[]uint16{0x4000, 0x0200, 0x4100, 0xc100}, []uint16{0x4100, 0x0200, 0x4000, self}},
		{"T0-local", h1, wire.MakeEV(0, 0, 0), 1, []uint16{0x4000, 0xc100}, []uint16{0x4000, self}},
	} {
		out, ret, err := RoundTrip(tm, c.peer, c.ev, c.back, self)
		if err != nil || !slices.Equal(out, c.out) || !slices.Equal(ret, c.ret) {
			t.Errorf("%s: %04x back %04x, %v; want %04x back %04x", c.name, out, ret, err, c.out, c.ret)
		}
	}
	if _, _, err := RoundTrip(tm, h3, wire.MakeEV(0, 0, 0), 2, self); err == nil {
		t.Error("a return T1 index the template lacks accepted")
	}
	if _, _, err := RoundTrip(tm, h3, wire.MakeEV(5, 0, 0), 0, self); err == nil {
		t.Error("a plane the template lacks accepted")
	}
}

func TestInBlock(t *testing.T) {
	block := wire.Addr128FromSlice([]byte{0x5f, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0})
	for _, c := range []struct {
		a    []byte
		bits int
		want bool
	}{
		{[]byte{0x5f, 0, 0, 1, 0x41, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0}, 32, true},
		{[]byte{0x5f, 0, 0, 2, 0x41, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0}, 32, false},    // another fabric's block
		{[]byte{0xfd, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1}, 32, false},       // a host address
		{[]byte{0x5f, 0, 0, 1, 0x41, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0}, 0, false},     // no block
		{[]byte{0x5f, 0, 0, 0x01, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, 33, false}, // differs in bit 33
	} {
		if got := InBlock(wire.Addr128FromSlice(c.a), block, c.bits); got != c.want {
			t.Errorf("InBlock(%x, /%d) = %v, want %v", c.a, c.bits, got, c.want)
		}
	}
}

func TestSwitchName(t *testing.T) {
	for u, want := range map[uint16]string{0x4000: "p0-t0-0", 0x4103: "p3-t0-1", 0x0100: "p0-t1-0", 0x0402: "p2-t1-3", 0xc000: "usid-c000"} {
		if got := SwitchName(u); got != want {
			t.Errorf("SwitchName(%04x) = %s, want %s", u, got, want)
		}
	}
}
