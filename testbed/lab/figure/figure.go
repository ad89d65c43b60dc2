// Package figure draws a run's series as PNG line plots with gonum/plot:
// one figure per group of series, every fault of the timeline marked by a
// vertical line.
package figure

import (
	"fmt"
	"image/color"
	"math"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"

	"github.com/softmrc/softmrc/testbed/lab/series"
)

// MaxLabels is how many fault marks get a text label; beyond it the
// labels would overlap and only the lines are drawn.
const MaxLabels = 12

// Mark is a vertical line at a time, labelled (a fault, a repair).
type Mark struct {
	T     time.Duration
	Label string
}

// Figure is one plot.
type Figure struct {
	Title  string
	Series []series.Series
	Marks  []Mark
}

var palette = []color.RGBA{
	{0x1f, 0x77, 0xb4, 255}, {0xff, 0x7f, 0x0e, 255}, {0x2c, 0xa0, 0x2c, 255}, {0xd6, 0x27, 0x28, 255},
	{0x94, 0x67, 0xbd, 255}, {0x8c, 0x56, 0x4b, 255}, {0xe3, 0x77, 0xc2, 255}, {0x7f, 0x7f, 0x7f, 255},
}

// scale picks a display unit for bit/s series.
func scale(unit string, peak float64) (float64, string) {
	if unit != "bit/s" {
		return 1, unit
	}
	switch {
	case peak >= 1e9:
		return 1e9, "Gbit/s"
	case peak >= 1e6:
		return 1e6, "Mbit/s"
	}
	return 1e3, "kbit/s"
}

// Save draws f to path as a PNG of w×h inches.
func Save(f Figure, path string, w, h vg.Length) error {
	p := plot.New()
	p.Title.Text = f.Title
	p.X.Label.Text = "time since traffic start (s)"
	peak, unit := 0.0, ""
	for _, s := range f.Series {
		unit = s.Unit
		for _, pt := range s.Points {
			peak = math.Max(peak, pt.V)
		}
	}
	div, label := scale(unit, peak)
	p.Y.Label.Text = label
	p.Y.Min = 0
	p.Legend.Top = true
	p.Add(plotter.NewGrid())
	for i, s := range f.Series {
		xy := make(plotter.XYs, len(s.Points))
		for j, pt := range s.Points {
			xy[j].X, xy[j].Y = pt.T.Seconds(), pt.V/div
		}
		l, err := plotter.NewLine(xy)
		if err != nil {
			return fmt.Errorf("figure %s: series %s: %w", f.Title, s.Name, err)
		}
		l.Color = palette[i%len(palette)]
		l.Width = vg.Points(1.2)
		if i == 0 && len(f.Series) > 1 {
			l.Width = vg.Points(2)
		}
		p.Add(l)
		p.Legend.Add(s.Name, l)
	}
	top := peak / div * 1.1
	if top == 0 {
		top = 1
	}
	p.Y.Max = top
	for _, m := range f.Marks {
		x := m.T.Seconds()
		l, err := plotter.NewLine(plotter.XYs{{X: x, Y: 0}, {X: x, Y: top}})
		if err != nil {
			return err
		}
		l.Color = color.RGBA{0xb0, 0, 0, 255}
		l.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
		p.Add(l)
		if len(f.Marks) > MaxLabels {
			continue // a chaos timeline: lines only, the report lists the faults
		}
		lb, err := plotter.NewLabels(plotter.XYLabels{XYs: plotter.XYs{{X: x, Y: top * 0.97}}, Labels: []string{" " + m.Label}})
		if err == nil {
			lb.TextStyle[0].Font.Size = vg.Points(7)
			lb.TextStyle[0].Color = l.Color
			p.Add(lb)
		}
	}
	return p.Save(w, h, path)
}
