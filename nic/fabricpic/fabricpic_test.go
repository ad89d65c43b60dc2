package fabricpic

import (
	"bytes"
	"fmt"
	"image"
	"image/png"
	"strings"
	"testing"

	"gonum.org/v1/plot/vg"

	"github.com/softmrc/softmrc/nic/pathprobe"
)

// clos2p is the map of clos-2p with every link good except those in bad
// (name → state); a bad switch row replaces nothing, it is added.
func clos2p(bad map[string]string) []pathprobe.Link {
	var ls []pathprobe.Link
	add := func(name, kind string) {
		st := pathprobe.Good
		if s, ok := bad[name]; ok {
			st = s
		}
		ls = append(ls, pathprobe.Link{Name: name, Kind: kind, State: st})
	}
	for p := 0; p < 2; p++ {
		for h := 0; h < 4; h++ {
			add(fmt.Sprintf("h%d--p%d-t0-%d", h, p, h/2), "nic-t0")
		}
		for k := 0; k < 2; k++ {
			for j := 0; j < 2; j++ {
				add(fmt.Sprintf("p%d-t0-%d--p%d-t1-%d", p, k, p, j), "t0-t1")
			}
		}
	}
	for n, st := range bad {
		if !strings.Contains(n, "--") {
			ls = append(ls, pathprobe.Link{Name: n, Kind: "switch", State: st})
		}
	}
	return ls
}

func TestPlace(t *testing.T) {
	lay, err := Place(clos2p(nil))
	if err != nil {
		t.Fatal(err)
	}
	if len(lay.Pos) != 4+4+4 {
		t.Fatalf("%d nodes, want 12: %v", len(lay.Pos), lay.Pos)
	}
	for _, c := range []struct{ above, below string }{{"p0-t1-0", "p0-t0-0"}, {"p1-t0-1", "h3"}} {
		if lay.Pos[c.above][1] <= lay.Pos[c.below][1] {
			t.Errorf("%s at %v not above %s at %v", c.above, lay.Pos[c.above], c.below, lay.Pos[c.below])
		}
	}
	// Planes are side by side: every switch of plane 0 left of plane 1's.
	for _, a := range []string{"p0-t0-0", "p0-t0-1", "p0-t1-0", "p0-t1-1"} {
		for _, b := range []string{"p1-t0-0", "p1-t0-1", "p1-t1-0", "p1-t1-1"} {
			if lay.Pos[a][0] >= lay.Pos[b][0] {
				t.Errorf("%s at %v not left of %s at %v", a, lay.Pos[a], b, lay.Pos[b])
			}
		}
	}
	if _, err := Place([]pathprobe.Link{{Name: "spine7--leaf2", Kind: "t0-t1"}}); err == nil || !strings.Contains(err.Error(), "testbed name") {
		t.Errorf("a foreign name: %v", err)
	}
}

// TestWrite: a PNG of the asked size whose red and orange pixels appear
// exactly when a link or switch is dead or lossy.
func TestWrite(t *testing.T) {
	cases := []struct {
		name        string
		bad         map[string]string
		red, orange bool
	}{
		{"all good", nil, false, false},
		{"a dead T0-T1 link", map[string]string{"p0-t0-0--p0-t1-1": pathprobe.Dead}, true, false},
		{"a lossy NIC-T0 link", map[string]string{"h2--p1-t0-1": pathprobe.Lossy}, false, true},
		{"a dead T1", map[string]string{"p1-t1-0": pathprobe.Dead}, true, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var b bytes.Buffer
			if err := Write(&b, clos2p(c.bad), "link map", 6*vg.Inch, 3*vg.Inch); err != nil {
				t.Fatal(err)
			}
			img, err := png.Decode(&b)
			if err != nil {
				t.Fatal(err)
			}
			if sz := img.Bounds().Size(); sz.X < 400 || sz.Y < 200 {
				t.Fatalf("picture %v", sz)
			}
			red, orange := count(img, Dead), count(img, Lossy)
			if (red > 20) != c.red || (orange > 20) != c.orange {
				t.Fatalf("%d red and %d orange pixels, want red %v orange %v", red, orange, c.red, c.orange)
			}
		})
	}
}

func count(img image.Image, want interface{ RGBA() (r, g, b, a uint32) }) int {
	wr, wg, wb, _ := want.RGBA()
	n := 0
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			r, g, bl, _ := img.At(x, y).RGBA()
			if r == wr && g == wg && bl == wb {
				n++
			}
		}
	}
	return n
}
