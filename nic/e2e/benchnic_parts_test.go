package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The pure parts of bench-nic: the statistics, the per-round ratios and the
// generated section of docs/performance.md (no root needed).
func TestBenchNICStats(t *testing.T) {
	for _, tc := range []struct {
		in          []float64
		med, lo, hi float64
		ok          bool
	}{
		{nil, 0, 0, 0, false},
		{[]float64{nan}, 0, 0, 0, false},
		{[]float64{3, 1, 2}, 2, 1, 3, true},
		{[]float64{4, nan, 1, 2, 3}, 2.5, 1, 4, true},
	} {
		med, lo, hi, ok := stats(tc.in)
		if med != tc.med || lo != tc.lo || hi != tc.hi || ok != tc.ok {
			t.Errorf("stats(%v) = %v %v %v %v, want %v %v %v %v", tc.in, med, lo, hi, ok, tc.med, tc.lo, tc.hi, tc.ok)
		}
	}
}

func TestBenchNICRatiosPairRounds(t *testing.T) {
	r := &benchNICResult{vals: map[string]map[string][]float64{}}
	c := bwCase{65536, 1}
	for round, v := range [][2]float64{{1, 2}, {3, 3}, {2, 8}} { // raw, mrc
		r.add("veth", mRaw, round, v[0])
		r.add("veth", bwName(c), round, v[1])
	}
	r.add("veth", basePrefix+bwName(c), 1, 1.5) // missing in rounds 1 and 3
	r.add("veth", mRawTxCPU, 0, 200)
	r.add("veth", "sender mrc-nicd CPU in 64 KiB, 1 QP, ms per GB", 0, 300)
	r.add("veth", mRawRxCPU, 0, 50)
	r.add("veth", "receiver mrc-nicd CPU in 64 KiB, 1 QP, ms per GB", 0, 400)
	r.add("veth", mUDP, 0, 10)
	r.add("veth", mRawPingHandoff, 0, 30)
	r.add("veth", latName(2), 0, 60)
	got := map[string][]float64{}
	for _, x := range r.ratios() {
		got[x.name] = x.vals
	}
	want := map[string][]float64{
		"bw 64 KiB, 1 QP / raw AF_XDP":                        {2, 1, 4},
		"after / before: mrc-write-bw 64 KiB, 1 QP, Gb/s":     {2},
		"sender CPU per GB 64 KiB, 1 QP / raw sender":         {1.5},
		"receiver CPU per GB 64 KiB, 1 QP / raw receiver":     {8},
		"lat 2 B / UDP ping-pong":                             {6},
		"lat 2 B / raw AF_XDP ping-pong with hand-offs":       {2},
		"raw AF_XDP ping-pong with hand-offs / UDP ping-pong": {3},
	}
	for name, w := range want {
		g := got[name]
		if len(g) != len(w) {
			t.Fatalf("%s: %v, want %v (all: %v)", name, g, w, got)
		}
		for i := range w {
			if g[i] != w[i] {
				t.Errorf("%s: %v, want %v", name, g, w)
			}
		}
	}
}

func TestWriteGenerated(t *testing.T) {
	genBegin, genEnd := genMarkers("bench-nic")
	f := filepath.Join(t.TempDir(), "performance.md")
	if err := os.WriteFile(f, []byte("# P\n\nprose\n\n"+genBegin+"\nold\n"+genEnd+"\n\nafter\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := writeGenerated(f, "bench-nic", "new\n"); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(f)
	if s := string(b); s != "# P\n\nprose\n\n"+genBegin+"\nnew\n"+genEnd+"\n\nafter\n" {
		t.Errorf("got %q", s)
	}
	// A run at RoCE MTU 4096 adds its own section and leaves the default's.
	if err := writeGenerated(f, genSection(4096), "mtu4096\n"); err != nil {
		t.Fatal(err)
	}
	b4, e4 := genMarkers("bench-nic-mtu4096")
	b, _ = os.ReadFile(f)
	if s := string(b); s != "# P\n\nprose\n\n"+genBegin+"\nnew\n"+genEnd+"\n\nafter\n\n"+b4+"\nmtu4096\n"+e4+"\n" {
		t.Errorf("with the 4096 section: got %q", s)
	}
	if err := writeGenerated(f, genSection(2048), "again\n"); err != nil {
		t.Fatal(err)
	}
	b, _ = os.ReadFile(f)
	if s := string(b); !strings.Contains(s, genBegin+"\nagain\n"+genEnd) || !strings.Contains(s, b4+"\nmtu4096\n"+e4) {
		t.Errorf("rewriting the default section: got %q", s)
	}
	g := filepath.Join(t.TempDir(), "x.md")
	if err := writeGenerated(g, "bench-nic", "first\n"); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(g); !strings.Contains(string(b), genBegin+"\nfirst\n"+genEnd) {
		t.Errorf("new file: %q", b)
	}
}
