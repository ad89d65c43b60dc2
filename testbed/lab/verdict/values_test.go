package verdict

import (
	"math"
	"strings"
	"testing"

	"github.com/softmrc/softmrc/testbed/lab/scenario"
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
