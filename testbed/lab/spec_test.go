package lab

import (
	"testing"

	"github.com/softmrc/softmrc/testbed/lab/scenario"
	"github.com/softmrc/softmrc/testbed/plan"
	"github.com/softmrc/softmrc/testbed/scenarios"
)

// TestSeriesCapacity: the emulated capacity behind rx:hN is its downlinks'
// unless the traffic crosses a T1 and the fabric ports are smaller (S5:
// 4 T1 × 3.125 Mbit/s per plane under 25 Mbit/s downlinks).
func TestSeriesCapacity(t *testing.T) {
	cases := []struct {
		scenario, series string
		want             float64
	}{
		{"s01-bandwidth", "rx:h1", 50e6},
		{"s05-switch-failure", "rx:h3", 50e6},
		{"s05-switch-failure", "rx:h3:p2", 12.5e6},
		{"s02-nic-links", "rx:h3", 50e6},
		{"s05-switch-failure", "tx:p0-t0-1:u0", 3.125e6},
		{"s05-switch-failure", "goodput:h0", 100e6},
		// The 16 T1 → T0 1 links (4 planes × 4 T1) at 3.125 Mbit/s, one
		// plane's 4; unmodelled fabric links give no capacity.
		{"s05-switch-failure", "fabric:h3", 50e6},
		{"s05-switch-failure", "fabric:h3:p1", 12.5e6},
		{"s02-nic-links", "fabric:h3", 0},
	}
	for _, c := range cases {
		s, _, err := scenarios.Load(c.scenario)
		if err != nil {
			t.Fatal(err)
		}
		tp, err := s.Topology.Resolve()
		if err != nil {
			t.Fatal(err)
		}
		pl, err := plan.Build(tp, plan.Options{Prefix: "t", RunDir: "/nonexistent"})
		if err != nil {
			t.Fatal(err)
		}
		s.Expect = append(s.Expect, scenario.Expect{Series: c.series})
		specs, err := seriesSpecs(s, pl)
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, sp := range specs {
			if sp.name == c.series {
				found = true
				if n := len(sp.ports); sp.name == "fabric:h3" && n != 16 {
					t.Errorf("%s: %d ports, want the 16 T1 ports facing h3's T0", sp.name, n)
				}
				if sp.capacity != c.want {
					t.Errorf("%s %s: capacity %g, want %g", c.scenario, c.series, sp.capacity, c.want)
				}
			}
		}
		if !found {
			t.Errorf("%s: no series %s", c.scenario, c.series)
		}
	}
}
