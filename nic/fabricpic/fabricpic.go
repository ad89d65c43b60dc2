// Package fabricpic draws mrc-mapper's link map as a PNG picture of the
// fabric: per plane its T1s on top and T0s below them, the hosts along
// the bottom, every link a line coloured by its state (good grey, lossy
// orange, dead red) and a bad whole switch drawn as a red node. The
// layout comes from the link names alone (h<i>, p<p>-t0-<k>, p<p>-t1-<j>,
// the testbed's), so the picture needs nothing but the map.
package fabricpic

import (
	"fmt"
	"image/color"
	"io"
	"sort"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"

	"github.com/softmrc/softmrc/nic/pathprobe"
)

// Colours of the states.
var (
	Good  = color.RGBA{170, 170, 170, 255}
	Lossy = color.RGBA{240, 140, 0, 255}
	Dead  = color.RGBA{210, 0, 0, 255}
)

// StateColour is the colour of a link or switch in that state.
func StateColour(state string) color.RGBA {
	switch state {
	case pathprobe.Lossy:
		return Lossy
	case pathprobe.Dead:
		return Dead
	}
	return Good
}

// node is a parsed node name.
type node struct {
	name  string
	kind  string // h, t0, t1
	plane int
	index int
}

func parse(name string) (node, error) {
	if i, err := strconv.Atoi(strings.TrimPrefix(name, "h")); strings.HasPrefix(name, "h") && err == nil {
		return node{name: name, kind: "h", index: i}, nil
	}
	var p, i int
	var tier string
	if n, err := fmt.Sscanf(strings.ReplaceAll(name, "-", " "), "p%d %s %d", &p, &tier, &i); err == nil && n == 3 && (tier == "t0" || tier == "t1") {
		return node{name: name, kind: tier, plane: p, index: i}, nil
	}
	return node{}, fmt.Errorf("node %q: not a testbed name (h<i>, p<p>-t0-<k>, p<p>-t1-<j>)", name)
}

// Layout is where each node of the map sits (x, y in plot units) and the
// links as node pairs; exported for tests.
type Layout struct {
	Pos   map[string][2]float64
	Edges [][2]string // per link of the map, in its order; nil for a switch row
}

// Place lays the map out.
func Place(links []pathprobe.Link) (Layout, error) {
	nodes := map[string]node{}
	lay := Layout{Pos: map[string][2]float64{}}
	for _, l := range links {
		var ends []string
		if l.Kind == "switch" {
			ends = []string{l.Name}
		} else {
			a, b, ok := strings.Cut(l.Name, "--")
			if !ok {
				return lay, fmt.Errorf("link %q: want NODE--NODE", l.Name)
			}
			ends = []string{a, b}
			lay.Edges = append(lay.Edges, [2]string{a, b})
		}
		if l.Kind == "switch" {
			lay.Edges = append(lay.Edges, [2]string{})
		}
		for _, e := range ends {
			n, err := parse(e)
			if err != nil {
				return lay, err
			}
			nodes[e] = n
		}
	}
	planes, t0s, t1s, hosts := 0, map[int]int{}, map[int]int{}, 0
	for _, n := range nodes {
		switch n.kind {
		case "h":
			hosts = max(hosts, n.index+1)
		case "t0":
			planes = max(planes, n.plane+1)
			t0s[n.plane] = max(t0s[n.plane], n.index+1)
		case "t1":
			planes = max(planes, n.plane+1)
			t1s[n.plane] = max(t1s[n.plane], n.index+1)
		}
	}
	// Each plane is a block 1 wide; hosts spread over all blocks.
	for _, n := range nodes {
		var x, y float64
		switch n.kind {
		case "h":
			x = (float64(n.index) + 0.5) * float64(max(planes, 1)) / float64(hosts)
		case "t0":
			x, y = float64(n.plane)+(float64(n.index)+0.5)/float64(t0s[n.plane]), 1
		case "t1":
			x, y = float64(n.plane)+(float64(n.index)+0.5)/float64(t1s[n.plane]), 2
		}
		lay.Pos[n.name] = [2]float64{x, y}
	}
	return lay, nil
}

// Write draws the map as a PNG of w×h to out.
func Write(out io.Writer, links []pathprobe.Link, title string, w, h vg.Length) error {
	lay, err := Place(links)
	if err != nil {
		return err
	}
	p := plot.New()
	p.Title.Text = title
	p.HideAxes()
	// Good links first so the bad ones are drawn over them.
	order := make([]int, len(links))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool {
		return links[order[a]].State == pathprobe.Good && links[order[b]].State != pathprobe.Good
	})
	for _, i := range order {
		l := links[i]
		if l.Kind == "switch" {
			continue // drawn as its node below
		}
		e := lay.Edges[i]
		a, b := lay.Pos[e[0]], lay.Pos[e[1]]
		ln, err := plotter.NewLine(plotter.XYs{{X: a[0], Y: a[1]}, {X: b[0], Y: b[1]}})
		if err != nil {
			return err
		}
		ln.Color = StateColour(l.State)
		ln.Width = vg.Points(1)
		if l.State != pathprobe.Good {
			ln.Width = vg.Points(3.5)
		}
		p.Add(ln)
	}
	badSwitch := map[string]string{}
	for _, l := range links {
		if l.Kind == "switch" {
			badSwitch[l.Name] = l.State
		}
	}
	var names []string
	for n := range lay.Pos {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		pos := lay.Pos[n]
		sc, err := plotter.NewScatter(plotter.XYs{{X: pos[0], Y: pos[1]}})
		if err != nil {
			return err
		}
		sc.GlyphStyle.Shape = draw.BoxGlyph{}
		sc.GlyphStyle.Radius = vg.Points(5)
		sc.GlyphStyle.Color = color.RGBA{60, 90, 160, 255}
		if st, ok := badSwitch[n]; ok {
			sc.GlyphStyle.Color = StateColour(st)
			sc.GlyphStyle.Radius = vg.Points(8)
		}
		p.Add(sc)
	}
	lb, err := plotter.NewLabels(plotter.XYLabels{XYs: xys(lay, names), Labels: names})
	if err != nil {
		return err
	}
	for i := range lb.TextStyle {
		lb.TextStyle[i].Font.Size = vg.Points(6)
		lb.TextStyle[i].XAlign = draw.XCenter
		lb.Offset = vg.Point{Y: vg.Points(7)}
	}
	p.Add(lb)
	p.Y.Min, p.Y.Max = -0.3, 2.4
	c := vgimg.PngCanvas{Canvas: vgimg.New(w, h)}
	p.Draw(draw.New(c))
	_, err = c.WriteTo(out)
	return err
}

func xys(lay Layout, names []string) plotter.XYs {
	out := make(plotter.XYs, len(names))
	for i, n := range names {
		out[i].X, out[i].Y = lay.Pos[n][0], lay.Pos[n][1]
	}
	return out
}
