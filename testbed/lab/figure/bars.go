package figure

import (
	"fmt"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

// Bars is a bar chart of measured values (one bar per label): the tools'
// results of a scenario's runs, e.g. every variant's busbw in S7.
type Bars struct {
	// Key names the chart (in its file name), e.g. busbw.
	Key         string
	Title, Unit string
	Labels      []string
	Values      []float64
}

// SaveBars draws b as a PNG (or any format gonum/plot infers from path).
func SaveBars(b Bars, path string, w, h vg.Length) error {
	if len(b.Labels) == 0 || len(b.Labels) != len(b.Values) {
		return fmt.Errorf("figure %s: %d labels for %d values", b.Title, len(b.Labels), len(b.Values))
	}
	p := plot.New()
	p.Title.Text = b.Title
	p.Y.Label.Text = b.Unit
	p.Y.Min = 0
	vals := make(plotter.Values, len(b.Values))
	copy(vals, b.Values)
	bc, err := plotter.NewBarChart(vals, vg.Points(18))
	if err != nil {
		return fmt.Errorf("figure %s: %w", b.Title, err)
	}
	bc.Color = palette[0]
	p.Add(bc)
	p.NominalX(b.Labels...)
	p.X.Tick.Label.Rotation = 0.5
	p.X.Tick.Label.XAlign = -1.0
	p.X.Tick.Label.YAlign = -0.5
	return p.Save(w, h, path)
}
