package pathtmpl

import (
	"errors"
	"net/netip"
	"os"
	"strings"
	"testing"

	"github.com/softmrc/softmrc/internal/wire"
)

func TestLoadAndPaths(t *testing.T) {
	tp, err := Load("testdata/h0.yaml")
	if err != nil {
		t.Fatal(err)
	}
	h1, ok := tp.PeerIndex("h1")
	if !ok {
		t.Fatal("h1 missing")
	}
	h2, _ := tp.PeerIndex("h2")
	if i, ok := tp.PeerByAddr(wire.Addr128FromNetip(netip.MustParseAddr("fd00:1:1::3"))); !ok || i != h2 {
		t.Fatalf("PeerByAddr = %d %v", i, ok)
	}
	p1, err := tp.Compile(h1)
	if err != nil {
		t.Fatal(err)
	}
	p2, _ := tp.Compile(h2)
	for _, tc := range []struct {
		ps   *Paths
		ev   wire.EV
		want string
	}{
		{p1, wire.MakeEV(0, 0, 7), "5f00:1:4000:100:4100:c000::"},
		{p1, wire.MakeEV(0, 1, 7), "5f00:1:4000:200:4100:c000::"},
		{p1, wire.MakeEV(1, 3, 7), "5f00:1:4001:201:4101:c001::"}, // T1 3 mod 2 = 1
		{p2, wire.MakeEV(1, 1, 9), "5f00:1:4001:c101::"},          // T0-local ignores T1
	} {
		got, ok := tc.ps.Dst(tc.ev)
		if !ok || got.String() != tc.want {
			t.Errorf("Dst(%v) = %v %v, want %s", tc.ev, got, ok, tc.want)
		}
	}
	if _, ok := p1.Dst(wire.MakeEV(2, 0, 0)); ok {
		t.Error("plane 2 is not in the template")
	}
	if u := p1.USIDs(wire.MakeEV(1, 0, 0)); len(u) != 4 || u[1] != T1USID(0, 1) || u[2] != T0USID(1, 1) || u[3] != DownlinkUSID(0, 1) {
		t.Errorf("USIDs = %x", u)
	}
	if a := testing.AllocsPerRun(100, func() { p1.Dst(wire.MakeEV(1, 1, 1)) }); a != 0 {
		t.Errorf("Dst allocates %v", a)
	}
	// Round trip through Marshal.
	b, err := tp.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Parse(b); err != nil {
		t.Fatalf("re-parse: %v\n%s", err, b)
	}
}

func TestInvalid(t *testing.T) {
	good := `version: 1
block: "5f00:1::"
planes: 1
t1_count: 1
local: {name: a, planes: [{plane: 0, addr: "fd00::1", t0: 0x4000, t1: [0x0100]}]}
peers: [{name: b, planes: [{plane: 0, addr: "fd00::2", t0: 0x4100, downlink: 0xc000}]}]
`
	if _, err := Parse([]byte(good)); err != nil {
		t.Fatalf("good template rejected: %v", err)
	}
	for name, mut := range map[string][2]string{
		"unknown key":      {"planes: 1", "planes: 1\nplanez: 2"},
		"bad version":      {"version: 1", "version: 9"},
		"bad block":        {`"5f00:1::"`, `"10.0.0.1"`},
		"block bits set":   {`"5f00:1::"`, `"5f00:1:2::"`},
		"too many planes":  {"planes: 1", "planes: 17"},
		"t1 count differs": {"t1_count: 1", "t1_count: 2"},
		"missing plane":    {"planes: 1", "planes: 2"},
		"zero downlink":    {"downlink: 0xc000", "downlink: 0"},
		"bad peer addr":    {`"fd00::2"`, `"nope"`},
		"duplicate peer":   {"peers: [{name: b,", "peers: [{name: b, planes: [{plane: 0, addr: \"fd00::3\", t0: 1, downlink: 1}]}, {name: b,"},
	} {
		_, err := Parse([]byte(strings.Replace(good, mut[0], mut[1], 1)))
		if !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: err = %v, want ErrInvalid", name, err)
		}
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte("version: 1\nplanes: 1\n"))
	if b, err := os.ReadFile("testdata/h0.yaml"); err == nil {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		tp, err := Parse(b)
		if err != nil {
			return
		}
		for i := range tp.Peers {
			ps, err := tp.Compile(i)
			if err != nil {
				continue
			}
			for p := 0; p < tp.Planes; p++ {
				ps.Dst(wire.MakeEV(wire.Plane(p), 255, 0))
			}
		}
	})
}
