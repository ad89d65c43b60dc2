package denylist

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/softmrc/softmrc/internal/mrc"
	"github.com/softmrc/softmrc/internal/pathtmpl"
	"github.com/softmrc/softmrc/internal/wire"
	"github.com/softmrc/softmrc/testbed/plan"
	"github.com/softmrc/softmrc/testbed/topo"
)

func buildPlan(t *testing.T, preset string) *plan.Plan {
	t.Helper()
	tp, err := topo.Preset(preset)
	if err != nil {
		t.Fatal(err)
	}
	pl, err := plan.Build(tp, plan.Options{RunDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	return pl
}

// crossed lists the testbed links a packet from host src on ev toward the
// template's peer crosses, walking the path's uSIDs through the plan's
// switches (independent of the names this package derives).
func crossed(pl *plan.Plan, src string, peer string, us []wire.USID) []string {
	byUSID := map[wire.USID]string{}
	for _, s := range pl.Switches {
		byUSID[s.USID] = s.Name
	}
	nodes := []string{src}
	for _, u := range us[:len(us)-1] { // the last uSID is the peer's downlink
		nodes = append(nodes, byUSID[u])
	}
	nodes = append(nodes, peer)
	names := map[string]bool{}
	for _, l := range pl.Links {
		names[l.Name] = true
	}
	var out []string
	for i := 0; i+1 < len(nodes); i++ {
		a, b := nodes[i], nodes[i+1]
		switch {
		case names[a+"--"+b]:
			out = append(out, a+"--"+b)
		case names[b+"--"+a]:
			out = append(out, b+"--"+a)
		default:
			out = append(out, "no link "+a+"/"+b)
		}
	}
	return out
}

// TestLinksMatchTheFabric: for hosts of clos-2p, clos-4p and clos-8p (4
// T0s: a T1 downlink to another T0 concerns only the peers under it) and
// every link of the fabric, a link entry denies exactly the EVs (toward
// each peer) whose path crosses that link, and the links a NIC knows are
// all the testbed's host and fabric links.
func TestLinksMatchTheFabric(t *testing.T) {
	for _, tc := range []struct {
		preset string
		hosts  []int
	}{{"clos-2p", []int{0, 1, 2, 3}}, {"clos-4p", []int{0, 3}}, {"clos-8p", []int{0, 9}}} {
		t.Run(tc.preset, func(t *testing.T) {
			pl := buildPlan(t, tc.preset)
			var all []string
			for _, l := range pl.Links {
				if l.Kind != plan.LinkMgmt {
					all = append(all, l.Name)
				}
			}
			sort.Strings(all)
			for _, hi := range tc.hosts {
				h := &pl.Hosts[hi]
				tm, err := pl.Template(h)
				if err != nil {
					t.Fatal(err)
				}
				f := NewFabric(pl.Planes, tm)
				if got := f.Links(); !slices.Equal(got, all) {
					t.Fatalf("%s knows links %v, the fabric has %v", h.Name, got, all)
				}
				type pathKey struct {
					peer int
					ev   wire.EV
				}
				paths := map[pathKey][]string{}
				t0Local := map[int]bool{}
				for pi, peer := range tm.Peers {
					ps, err := tm.Compile(pi)
					if err != nil {
						t.Fatal(err)
					}
					t0Local[pi] = ps.T0Local()
					for p := 0; p < pl.Planes; p++ {
						for j := 0; j < tm.T1Count; j++ {
							ev := wire.MakeEV(wire.Plane(p), uint8(j), 7)
							paths[pathKey{pi, ev}] = crossed(pl, h.Name, peer.Name, ps.USIDs(ev))
						}
					}
				}
				for _, link := range all {
					rules, err := f.Resolve(Entry{Kind: KindLink, Link: link})
					if err != nil {
						t.Fatal(err)
					}
					hits := 0
					for k, links := range paths {
						want := slices.Contains(links, link)
						got := false
						for _, r := range rules {
							got = got || r.Denies(k.peer, t0Local[k.peer], tm.T1Count, k.ev)
						}
						if got != want {
							t.Fatalf("%s: link %s, peer %s, EV %v (path %v): denied %v, crosses %v",
								h.Name, link, tm.Peers[k.peer].Name, k.ev, links, got, want)
						}
						if want {
							hits++
						}
					}
					if hits == 0 {
						t.Errorf("%s: no path crosses %s, yet the NIC lists it", h.Name, link)
					}
				}
			}
		})
	}
}

func TestResolveErrorsSayWhatExists(t *testing.T) {
	pl := buildPlan(t, "clos-2p")
	tm, err := pl.Template(&pl.Hosts[0])
	if err != nil {
		t.Fatal(err)
	}
	f := NewFabric(pl.Planes, tm)
	ecmp := NewFabric(2, nil)
	cases := []struct {
		f    *Fabric
		e    Entry
		want string // a piece of the error; "" = accepted
	}{
		{f, Entry{Kind: KindEV, EV: uint32(wire.MakeEV(1, 1, 3))}, ""},
		{f, Entry{Kind: KindEV, EV: uint32(wire.MakeEV(5, 0, 3))}, "planes 0..1"},
		{f, Entry{Kind: KindEV, EV: uint32(wire.MakeEV(0, 9, 3))}, "T1 indexes 0..1"},
		{f, Entry{Kind: KindPlane, Plane: 1}, ""},
		{f, Entry{Kind: KindPlane, Plane: 2}, "planes 0..1"},
		{f, Entry{Kind: KindPath, Plane: 0, T1: 1}, ""},
		{f, Entry{Kind: KindPath, Plane: 0, T1: 2}, "T1 indexes 0..1"},
		{f, Entry{Kind: KindPath, Plane: 3, T1: 0}, "planes 0..1"},
		{f, Entry{Kind: KindLink, Link: "p0-t0-0--p0-t1-1"}, ""},
		{f, Entry{Kind: KindLink, Link: "p0-t0-0--p0-t1-7"}, "h0--p0-t0-0, "},
		{ecmp, Entry{Kind: KindLink, Link: "p0-t0-0--p0-t1-1"}, "srv6"},
		{ecmp, Entry{Kind: KindPath, Plane: 0, T1: 1}, "srv6"},
		{ecmp, Entry{Kind: KindPlane, Plane: 1}, ""},
	}
	for _, c := range cases {
		_, err := c.f.Resolve(c.e)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%v: %v", c.e, err)
		case c.want != "" && (err == nil || !errors.Is(err, ErrUnknown) || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%v: error %v, want ErrUnknown mentioning %q", c.e, err, c.want)
		}
	}
}

func TestParseAndFile(t *testing.T) {
	good := []struct {
		kind, arg string
		want      Entry
	}{
		{"ev", "0x10200003", Entry{Kind: KindEV, EV: 0x10200003}},
		{"path", "1,0", Entry{Kind: KindPath, Plane: 1, T1: 0}},
		{"link", "h0--p0-t0-0", Entry{Kind: KindLink, Link: "h0--p0-t0-0"}},
		{"plane", "3", Entry{Kind: KindPlane, Plane: 3}},
	}
	for _, g := range good {
		e, err := Parse(g.kind, g.arg)
		if err != nil || e != g.want {
			t.Errorf("Parse(%s, %s) = %v, %v; want %v", g.kind, g.arg, e, err, g.want)
		}
		if back, err := ParseLine(e.String()); err != nil || back != e {
			t.Errorf("%v does not round-trip through String: %v %v", e, back, err)
		}
	}
	for _, b := range [][2]string{{"ev", "x"}, {"path", "1"}, {"path", "a,b"}, {"link", "h0"}, {"plane", "-1"}, {"t1", "0"}} {
		if _, err := Parse(b[0], b[1]); !errors.Is(err, ErrSyntax) {
			t.Errorf("Parse(%s, %s): %v, want ErrSyntax", b[0], b[1], err)
		}
	}
	dir := t.TempDir()
	p := filepath.Join(dir, "deny")
	os.WriteFile(p, []byte("# maintenance\nplane 1\n\nlink p0-t0-0--p0-t1-1  # flapping\n"), 0o644)
	es, err := ReadFile(p)
	if err != nil || len(es) != 2 || es[0] != (Entry{Kind: KindPlane, Plane: 1}) || es[1].Link != "p0-t0-0--p0-t1-1" {
		t.Fatalf("ReadFile: %v %v", es, err)
	}
	os.WriteFile(p, []byte("plane 1\npath 2\n"), 0o644)
	if _, err := ReadFile(p); err == nil || !strings.Contains(err.Error(), ":2:") {
		t.Fatalf("bad line 2: %v, want an error naming the line", err)
	}
}

func TestList(t *testing.T) {
	tm := &pathtmpl.Template{Block: "5f00:1::", Planes: 2, T1Count: 2}
	tm.Local = pathtmpl.Local{Name: "h0", Planes: []pathtmpl.LocalPlane{
		{Plane: 0, Addr: "fd00::1", T0: pathtmpl.T0USID(0, 0), T1: []wire.USID{pathtmpl.T1USID(0, 0), pathtmpl.T1USID(1, 0)}},
		{Plane: 1, Addr: "fd00:0:1::1", T0: pathtmpl.T0USID(0, 1), T1: []wire.USID{pathtmpl.T1USID(0, 1), pathtmpl.T1USID(1, 1)}}}}
	if err := tm.Validate(); err != nil {
		t.Fatal(err)
	}
	l := NewList(NewFabric(2, tm))
	for _, e := range []Entry{{Kind: KindPlane, Plane: 1}, {Kind: KindPath, Plane: 0, T1: 1}} {
		if added, err := l.Add(e); !added || err != nil {
			t.Fatalf("Add(%v) = %v, %v", e, added, err)
		}
	}
	if added, err := l.Add(Entry{Kind: KindPlane, Plane: 1}); added || err != nil {
		t.Fatalf("second Add = %v, %v; want false, nil", added, err)
	}
	if _, err := l.Add(Entry{Kind: KindPlane, Plane: 4}); err == nil {
		t.Fatal("plane 4 added to a 2-plane NIC")
	}
	if got := l.Rules(); len(got) != 2 || got[0] != (mrc.DenyRule{Plane: 1, T1: mrc.AnyT1, Peer: mrc.AnyPeer}) {
		t.Fatalf("Rules = %v", got)
	}
	if err := l.Remove(Entry{Kind: KindPlane, Plane: 0}); err == nil || !strings.Contains(err.Error(), "plane 1; path 0,1") {
		t.Fatalf("Remove of an absent entry: %v, want the list in the error", err)
	}
	if err := l.Remove(Entry{Kind: KindPlane, Plane: 1}); err != nil || len(l.Entries()) != 1 {
		t.Fatalf("Remove: %v, %v", err, l.Entries())
	}
}
