package verdict

import (
	"fmt"
	"math"
	"strings"

	"github.com/softmrc/softmrc/testbed/lab/scenario"
)

// Values are the measured values of the runs of a scenario (the tools'
// results, by scenario.Keys): FLOW.KEY, or VARIANT.FLOW.KEY with variants.
type Values interface {
	// Value is a measured value; false: not measured (the run or the
	// tool failed before it reported, or the key is not measured there).
	Value(name string) (float64, bool)
}

// CheckValues evaluates the scenario's cross-run expectations (metrics
// value and jain) on the measured values.
func CheckValues(s *scenario.Scenario, v Values) []Result {
	var out []Result
	for _, e := range s.Expect {
		if e.CrossRun() {
			out = append(out, CheckValue(s, e, v))
		}
	}
	return out
}

// units of the keys, for the report.
var keyUnit = map[string]string{"rate": "Mbit/s", "busbw": "Mbit/s", "job_busbw": "Mbit/s", "algbw": "Mbit/s", "wrong": "elements"}

// CheckValue evaluates one value or jain expectation.
func CheckValue(s *scenario.Scenario, e scenario.Expect, v Values) Result {
	r := Result{Claim: e.Claim, Metric: e.Metric, Bounds: e.Bounds(), Measured: math.NaN(), Reported: e.Report, Given: e.Given, GivenNot: e.GivenNot}
	get := func(name string) (float64, string, string, error) {
		full, _, key, err := s.ResolveValue(e.Variant, name)
		if err != nil {
			return 0, "", "", err
		}
		x, ok := v.Value(full)
		if !ok {
			return 0, full, key, fmt.Errorf("%s was not measured (its run failed, or the tool did not report it)", full)
		}
		return x, full, key, nil
	}
	switch e.Metric {
	case scenario.MetricValue:
		a, an, key, err := get(e.Value)
		if err != nil {
			r.Detail = "not measured: " + err.Error()
			return r
		}
		r.Series = an
		if e.Of == "" {
			r.Measured, r.Unit = a, keyUnit[key]
			r.Detail = fmt.Sprintf("%s = %.4g %s", an, a, keyUnit[key])
			break
		}
		b, bn, bkey, err := get(e.Of)
		if err != nil {
			r.Detail = "not measured: " + err.Error()
			return r
		}
		r.Series, r.Unit = an+" / "+bn, "ratio"
		if b == 0 {
			r.Detail = fmt.Sprintf("not measured: %s = 0 %s, the divisor (its tool failed?); %s = %.4g %s", bn, keyUnit[bkey], an, a, keyUnit[key])
			return r
		}
		r.Measured = a / b
		r.Detail = fmt.Sprintf("%s = %.4g %s over %s = %.4g %s", an, a, keyUnit[key], bn, b, keyUnit[bkey])
	case scenario.MetricJain:
		var xs []float64
		var parts []string
		for _, n := range e.Values {
			x, full, _, err := get(n)
			if err != nil {
				r.Detail = "not measured: " + err.Error()
				return r
			}
			xs = append(xs, x)
			parts = append(parts, fmt.Sprintf("%s %.4g", full, x))
		}
		j, ok := Jain(xs)
		r.Unit = "index"
		if !ok {
			r.Detail = "not measured: every value is 0 (" + strings.Join(parts, ", ") + ")"
			return r
		}
		r.Measured = j
		r.Detail = fmt.Sprintf("Jain's index (Σx)²/(n·Σx²) of %d values: %s", len(xs), strings.Join(parts, ", "))
	default:
		r.Detail = fmt.Sprintf("not measured: metric %s is not a cross-run metric", e.Metric)
		return r
	}
	r.Pass = within(e, r.Measured)
	return r
}

// Jain is Jain's fairness index of xs, (Σx)² / (n·Σx²): 1 when all are
// equal, 1/n when one has everything. False when every x is 0 (or none
// is given): fairness of nothing is not defined.
func Jain(xs []float64) (float64, bool) {
	var sum, sq float64
	for _, x := range xs {
		sum += x
		sq += x * x
	}
	if len(xs) == 0 || sq == 0 {
		return 0, false
	}
	return sum * sum / (float64(len(xs)) * sq), true
}
