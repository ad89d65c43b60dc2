package verdict

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/softmrc/softmrc/testbed/lab/scenario"
	"github.com/softmrc/softmrc/testbed/lab/series"
)

type values map[string]float64

func (v values) Value(n string) (float64, bool) { x, ok := v[n]; return x, ok }

// s8 is a scenario with variants whose cross-run claims are S8's.
const s8 = `name: s8
topology: {preset: clos-2p}
traffic:
  - {name: victim, from: h0, to: h2, duration: 5s}
  - {name: i0, from: h1, to: h3, duration: 5s}
  - {name: i1, from: h2, to: h3, duration: 5s}
  - {name: i2, from: h0, to: h3, duration: 5s}
variants:
  - {name: alone, traffic: [victim]}
  - {name: incast}
expect:
  - {claim: victim keeps 95 %, metric: value, value: incast.victim.rate, of: alone.victim.rate, min: 0.95}
  - {claim: fair, metric: jain, variant: incast, values: [i0.rate, i1.rate, i2.rate], min: 0.9}
  - {claim: victim rate, metric: value, value: alone.victim.rate, min: 50}
`

// TestCheckValues: the cross-run verdicts are computed from the measured
// values, and the same claims FAIL on values that do not hold them.
func TestCheckValues(t *testing.T) {
	s, err := scenario.Parse("s8.yaml", []byte(s8))
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name     string
		v        values
		measured []float64 // NaN: not measured
		pass     []bool
		detail   []string
	}{
		{"holds", values{"alone.victim.rate": 80, "incast.victim.rate": 78, "incast.i0.rate": 10, "incast.i1.rate": 11, "incast.i2.rate": 12},
			[]float64{78.0 / 80, 33.0 * 33 / (3 * (100 + 121 + 144)), 80}, []bool{true, true, true},
			[]string{"incast.victim.rate = 78 Mbit/s over alone.victim.rate = 80 Mbit/s", "incast.i0.rate 10", "alone.victim.rate = 80 Mbit/s"}},
		// The seed's RoCE victim (a 25 % loss) and one incast flow taking
		// everything: both claims must FAIL.
		{"must fail", values{"alone.victim.rate": 80, "incast.victim.rate": 60, "incast.i0.rate": 30, "incast.i1.rate": 0, "incast.i2.rate": 0},
			[]float64{0.75, 1.0 / 3, 80}, []bool{false, false, true}, nil},
		{"victim failed alone", values{"alone.victim.rate": 0, "incast.victim.rate": 60, "incast.i0.rate": 0, "incast.i1.rate": 0, "incast.i2.rate": 0},
			[]float64{math.NaN(), math.NaN(), 0}, []bool{false, false, false},
			[]string{"not measured: alone.victim.rate = 0 Mbit/s, the divisor", "not measured: every value is 0", ""}},
		{"variant run failed", values{"incast.victim.rate": 60, "incast.i0.rate": 10, "incast.i1.rate": 10},
			[]float64{math.NaN(), math.NaN(), math.NaN()}, []bool{false, false, false},
			[]string{"not measured: alone.victim.rate was not measured", "not measured: incast.i2.rate was not measured", ""}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rs := CheckValues(s, c.v)
			if len(rs) != 3 {
				t.Fatalf("%d results, want 3", len(rs))
			}
			for i, r := range rs {
				m := c.measured[i]
				if (math.IsNaN(m) != math.IsNaN(r.Measured)) || (!math.IsNaN(m) && math.Abs(r.Measured-m) > 1e-9) {
					t.Errorf("%s: measured %v, want %v (%s)", r.Claim, r.Measured, m, r.Detail)
				}
				if r.Pass != c.pass[i] {
					t.Errorf("%s: pass %v, want %v (%s)", r.Claim, r.Pass, c.pass[i], r.Detail)
				}
				if c.detail != nil && !strings.Contains(r.Detail, c.detail[i]) {
					t.Errorf("%s: detail %q, want it to contain %q", r.Claim, r.Detail, c.detail[i])
				}
			}
		})
	}
}

func TestJain(t *testing.T) {
	for _, c := range []struct {
		xs   []float64
		want float64
		ok   bool
	}{
		{[]float64{5, 5, 5, 5, 5, 5, 5}, 1, true},
		{[]float64{7, 0, 0, 0, 0, 0, 0}, 1.0 / 7, true},
		{[]float64{1, 2}, 9.0 / 10, true},
		{[]float64{0, 0}, 0, false},
		{nil, 0, false},
	} {
		j, ok := Jain(c.xs)
		if ok != c.ok || math.Abs(j-c.want) > 1e-12 {
			t.Errorf("Jain(%v) = %v, %v; want %v, %v", c.xs, j, ok, c.want, c.ok)
		}
	}
}

// CheckAll leaves the cross-run claims to CheckValues: a series-less value
// claim must not come out as "unknown metric".
func TestCheckAllSkipsValues(t *testing.T) {
	s, err := scenario.Parse("s8.yaml", []byte(s8))
	if err != nil {
		t.Fatal(err)
	}
	if rs := CheckAll(s, nil); len(rs) != 0 {
		t.Errorf("CheckAll gave %d results for cross-run claims: %+v", len(rs), rs)
	}
}

// grouped is a fake with series groups (uplinks:SWITCH).
type grouped struct {
	fake
	groups map[string][][]string
}

func (g grouped) SeriesGroup(n string) ([][]string, error) {
	if ns, ok := g.groups[n]; ok {
		return ns, nil
	}
	return nil, fmt.Errorf("no group %s", n)
}

func flat(name string, v float64) series.Series {
	s := series.Series{Name: name, Unit: "bit/s"}
	for t := 10 * time.Millisecond; t <= time.Second; t += 10 * time.Millisecond {
		s.Points = append(s.Points, series.Point{T: t, V: v})
	}
	return s
}

// TestCheckImbalance: spraying evens the uplinks (passes ≤ 1.1); two
// pinned flows hashed onto one of two uplinks read 2 and FAIL it.
func TestCheckImbalance(t *testing.T) {
	e := scenario.Expect{Claim: "even", Metric: scenario.MetricImbalance, Series: "uplinks:p0-t0-0", Max: ptr(1.1)}
	groups := map[string][][]string{"uplinks:p0-t0-0": {{"tx:p0-t0-0:u0", "tx:p0-t0-0:u1"}}}
	for _, c := range []struct {
		name   string
		u0, u1 float64
		want   float64
		pass   bool
	}{
		{"sprayed", 40e6, 38e6, 40.0 / 39, true},
		{"collision", 80e6, 0, 2, false},
		{"three to one", 60e6, 20e6, 1.5, false},
	} {
		d := grouped{fake{s: map[string]series.Series{"tx:p0-t0-0:u0": flat("tx:p0-t0-0:u0", c.u0), "tx:p0-t0-0:u1": flat("tx:p0-t0-0:u1", c.u1)}}, groups}
		r := Check(e, d)
		if math.Abs(r.Measured-c.want) > 1e-9 || r.Pass != c.pass {
			t.Errorf("%s: measured %v pass %v, want %v %v (%s)", c.name, r.Measured, r.Pass, c.want, c.pass, r.Detail)
		}
	}
	// Nothing carried, or no way to resolve the group: not measured.
	idle := grouped{fake{s: map[string]series.Series{"tx:p0-t0-0:u0": flat("u0", 0), "tx:p0-t0-0:u1": flat("u1", 0)}}, groups}
	if r := Check(e, idle); r.Pass || !math.IsNaN(r.Measured) {
		t.Errorf("idle uplinks: %+v, want not measured", r)
	}
	// uplinks:t0: the worst T0's.
	two := grouped{fake{s: map[string]series.Series{"a:u0": flat("a:u0", 40e6), "a:u1": flat("a:u1", 40e6), "b:u0": flat("b:u0", 60e6), "b:u1": flat("b:u1", 20e6)}},
		map[string][][]string{"uplinks:t0": {{"a:u0", "a:u1"}, {"b:u0", "b:u1"}}}}
	e.Series = "uplinks:t0"
	if r := Check(e, two); r.Measured != 1.5 || r.Pass {
		t.Errorf("two T0s: %+v, want the worst, 1.5, FAIL", r)
	}
	if r := Check(e, fake{}); r.Pass || !strings.Contains(r.Detail, "cannot resolve series group") {
		t.Errorf("no grouper: %+v", r)
	}
}

func ptr(x float64) *float64 { return &x }

// TestReportOnly: S8's RoCE claims are reported, not judged. The table
// holds a bounded claim that must still FAIL beside report-only ones,
// which show the value they measured (or why not) with verdict REPORTED
// and never count.
func TestReportOnly(t *testing.T) {
	f := strings.Replace(s8, "  - {claim: victim rate, metric: value, value: alone.victim.rate, min: 50}\n",
		"  - {claim: RoCE victim keeps, metric: value, value: incast.victim.rate, of: alone.victim.rate, report: true}\n"+
			"  - {claim: RoCE fairness, metric: jain, variant: incast, values: [i0.rate, i1.rate, i2.rate], report: true}\n", 1)
	s, err := scenario.Parse("s8.yaml", []byte(f))
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name     string
		v        values
		verdicts []string
		measured []float64
	}{
		{"the seed's 25 % loss", values{"alone.victim.rate": 80, "incast.victim.rate": 60, "incast.i0.rate": 30, "incast.i1.rate": 1, "incast.i2.rate": 1},
			[]string{"FAIL", "FAIL", "REPORTED", "REPORTED"}, []float64{0.75, 32.0 * 32 / (3 * 902), 0.75, 32.0 * 32 / (3 * 902)}},
		{"holds", values{"alone.victim.rate": 80, "incast.victim.rate": 79, "incast.i0.rate": 10, "incast.i1.rate": 10, "incast.i2.rate": 10},
			[]string{"PASS", "PASS", "REPORTED", "REPORTED"}, []float64{79.0 / 80, 1, 79.0 / 80, 1}},
		{"not measured", values{"incast.victim.rate": 79},
			[]string{"FAIL", "FAIL", "REPORTED", "REPORTED"}, []float64{math.NaN(), math.NaN(), math.NaN(), math.NaN()}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rs := CheckValues(s, c.v)
			if len(rs) != 4 {
				t.Fatalf("%d results, want 4", len(rs))
			}
			for i, r := range rs {
				if r.Verdict() != c.verdicts[i] {
					t.Errorf("%s: verdict %s, want %s (%s)", r.Claim, r.Verdict(), c.verdicts[i], r.Detail)
				}
				if r.Counts() == r.Reported || (r.Reported && r.Pass) {
					t.Errorf("%s: counts %v, reported %v, pass %v: a report never counts nor passes", r.Claim, r.Counts(), r.Reported, r.Pass)
				}
				m := c.measured[i]
				if (math.IsNaN(m) != math.IsNaN(r.Measured)) || (!math.IsNaN(m) && math.Abs(r.Measured-m) > 1e-9) {
					t.Errorf("%s: measured %v, want %v (%s)", r.Claim, r.Measured, m, r.Detail)
				}
				if r.Reported && r.Bounds != "reported, not judged" {
					t.Errorf("%s: bounds %q", r.Claim, r.Bounds)
				}
			}
		})
	}
}

// TestApplyGiven: S7's RoCE 1 QP claims, judged by whether the run's ring
// flows collided on a T0 uplink (a condition computed from the port
// series): with a collision "≤ 0.6 × MRC" is judged (and FAILS when RoCE
// is not below), without one "> 0.6" is judged instead, the other is N/A
// and neither the condition nor an N/A claim counts.
func TestApplyGiven(t *testing.T) {
	s, err := scenario.Parse("s7.yaml", []byte(`name: s7
topology: {preset: clos-2p}
traffic:
  - {name: ar, tool: mrc-allreduce-perf, hosts: [h0, h2, h1, h3], size: 2MiB}
variants:
  - {name: mrc}
  - {name: roce, transport: roce}
expect:
  - {claim: collided, variant: roce, metric: imbalance, series: "uplinks:t0", min: 1.3, condition: true}
  - {claim: below, metric: value, value: roce.ar.busbw, of: mrc.ar.busbw, max: 0.6, given: collided}
  - {claim: not below, metric: value, value: roce.ar.busbw, of: mrc.ar.busbw, min: 0.6, given_not: collided}
`))
	if err != nil {
		t.Fatal(err)
	}
	ce := s.Expect[0]
	groups := map[string][][]string{"uplinks:t0": {{"u0", "u1"}}}
	for _, c := range []struct {
		name      string
		u0, u1    float64 // the uplinks' rates: the condition
		roce      float64 // RoCE's busbw (MRC's is 60)
		verdicts  [3]string
		countFail bool // a counted claim failed
	}{
		{"collision, RoCE half", 80e6, 0, 30, [3]string{"HOLDS", "PASS", "N/A"}, false},
		{"collision, RoCE not below: fails", 80e6, 0, 50, [3]string{"HOLDS", "FAIL", "N/A"}, true},
		{"no collision, RoCE near MRC", 40e6, 40e6, 50, [3]string{"DOES NOT HOLD", "N/A", "PASS"}, false},
		{"no collision, RoCE half anyway: fails", 40e6, 40e6, 30, [3]string{"DOES NOT HOLD", "N/A", "FAIL"}, true},
		{"condition not measured", 0, 0, 30, [3]string{"DOES NOT HOLD", "FAIL", "FAIL"}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := grouped{fake{s: map[string]series.Series{"u0": flat("u0", c.u0), "u1": flat("u1", c.u1)}}, groups}
			cr := Check(ce, d)
			cr.Claim = "roce: " + cr.Claim // as runVariants prefixes a variant's claims
			rs := append([]Result{cr}, CheckValues(s, values{"roce.ar.busbw": c.roce, "mrc.ar.busbw": 60})...)
			ApplyGiven(rs)
			failed := false
			for i, r := range rs {
				if r.Verdict() != c.verdicts[i] {
					t.Errorf("%s: %s (%s), want %s", r.Claim, r.Verdict(), r.Detail, c.verdicts[i])
				}
				failed = failed || (r.Counts() && !r.Pass)
			}
			if failed != c.countFail {
				t.Errorf("a counted claim failed: %v, want %v", failed, c.countFail)
			}
		})
	}
}
