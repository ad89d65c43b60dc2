// Package verdict checks a scenario's expectations against the series a run
// sampled. Every measured value is computed here from the data; nothing is
// taken from the scenario but the bounds.
package verdict

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/softmrc/softmrc/testbed/lab/scenario"
	"github.com/softmrc/softmrc/testbed/lab/series"
)

// Data is what a run measured.
type Data interface {
	// Series returns a sampled series by name (scenario.SeriesHelp).
	Series(name string) (series.Series, error)
	// Capacity is the emulated capacity behind a series, in its unit.
	Capacity(name string) (float64, error)
	// ToolErrors lists the traffic processes that failed, one line each.
	ToolErrors() []string
	// FaultTime is when faults[i] of the scenario was requested (sent) and
	// when the request returned (done: it had taken effect), relative to
	// the traffic's zero, and when the next fault after it was requested
	// (the end of the run if none); false: it was not applied.
	FaultTime(i int) (sent, done, next time.Duration, ok bool)
	// RTT is the flows' typical round-trip time (0: unknown); recovery
	// times are also given in RTTs.
	RTT() time.Duration
	// QPGrowth is, for every QP of host (by QP id), how much each
	// counter in keys grew over the window (relative to the traffic's
	// zero). A window from 0 counts from the QP's creation: its counters
	// start at 0, and the first packets leave before time zero.
	QPGrowth(host string, w scenario.Window, keys ...string) (map[string]map[string]float64, error)
}

// Result is one checked expectation.
type Result struct {
	Claim    string
	Metric   string
	Series   string
	Measured float64 // NaN when it could not be computed
	Unit     string
	Bounds   string
	Pass     bool
	// Reported: a report-only claim (scenario.Expect.Report), shown with
	// its value and never judged; Pass is then false and means nothing.
	Reported bool
	// Condition: a condition of other claims (scenario.Expect.Condition),
	// judged against its bound (Pass: it holds) but never counted.
	Condition bool
	// Given and GivenNot are the claim's condition (scenario.Expect);
	// NotApplicable is set by ApplyGiven when the condition went the
	// other way: the claim was not judged and does not count.
	Given         string
	GivenNot      bool
	NotApplicable bool
	// Detail says how Measured was computed (windows, reference, levels).
	Detail string
}

// Verdict is PASS, FAIL or REPORTED (a report-only claim).
func (r Result) Verdict() string {
	switch {
	case r.Reported:
		return "REPORTED"
	case r.NotApplicable:
		return "N/A"
	case r.Condition && r.Pass:
		return "HOLDS"
	case r.Condition:
		return "DOES NOT HOLD"
	case r.Pass:
		return "PASS"
	}
	return "FAIL"
}

// Counts says whether the result decides its run's pass or fail.
func (r Result) Counts() bool { return !r.Reported && !r.Condition && !r.NotApplicable }

// ApplyGiven judges the claims that have a condition (Result.Given) by
// the condition's result among rs (a per-run claim, its text prefixed
// with its variant in a scenario with variants): when the condition went
// the other way the claim is N/A; when it was not measured, so is the
// claim (and it fails). Call it once every result of a scenario is in.
func ApplyGiven(rs []Result) {
	for i := range rs {
		r := &rs[i]
		if r.Given == "" {
			continue
		}
		var cond *Result
		for j := range rs {
			c := &rs[j]
			if c.Condition && (c.Claim == r.Given || strings.HasSuffix(c.Claim, ": "+r.Given)) {
				cond = c
				break
			}
		}
		switch {
		case cond == nil || math.IsNaN(cond.Measured):
			r.Pass = false
			r.Detail = fmt.Sprintf("not measured: its condition «%s» was not measured (its run failed); %s", r.Given, r.Detail)
		case cond.Pass == r.GivenNot:
			r.NotApplicable, r.Pass = true, false
			r.Detail = fmt.Sprintf("not judged: its condition «%s» %s in this run (%s %s %s); %s",
				r.Given, map[bool]string{true: "held", false: "did not hold"}[cond.Pass], cond.Claim, value(cond.Measured), cond.Bounds, r.Detail)
		default:
			r.Detail = fmt.Sprintf("judged: its condition «%s» %s (%s %s); %s",
				r.Given, map[bool]string{true: "held", false: "did not hold"}[cond.Pass], value(cond.Measured), cond.Bounds, r.Detail)
		}
	}
}

func value(x float64) string { return strconv.FormatFloat(x, 'g', 4, 64) }

// LowBaseline is the share of the emulated capacity below which a ratio's
// baseline is flagged as not capacity-bound.
const LowBaseline = 0.8

// Smoothing is how many samples the recovery and dip metrics average, so
// that one short sampling interval does not count as recovered.
const Smoothing = 3

// Check evaluates one expectation.
func Check(e scenario.Expect, d Data) Result {
	r := Result{Claim: e.Claim, Metric: e.Metric, Series: e.Series, Bounds: e.Bounds(), Measured: math.NaN(), Unit: "ratio", Reported: e.Report, Condition: e.Condition}
	var err error
	if e.AfterFault != nil {
		sent, ft, next, ok := d.FaultTime(*e.AfterFault)
		if !ok {
			r.Detail = fmt.Sprintf("not measured: faults[%d] was not applied", *e.AfterFault)
			return r
		}
		// Windows start from when the fault had surely taken effect;
		// recovery is timed from when it was requested (it may act
		// before the request returns), so it is never under-stated.
		e.Window = scenario.Window{From: ft + e.Window.From, To: ft + e.Window.To}
		if e.Window.To > next {
			r.Detail = fmt.Sprintf("not measured: faults[%d] took effect at %v, so the window %v runs into the next fault (requested at %v); the machine applied faults too late for this timeline",
				*e.AfterFault, ft.Round(time.Millisecond), e.Window, next.Round(time.Millisecond))
			return r
		}
		e.At += sent
	}
	switch e.Metric {
	case scenario.MetricRatio, scenario.MetricDip:
		err = ratio(e, d, &r)
	case scenario.MetricRecovery:
		err = recovery(e, d, &r)
	case scenario.MetricQPLossBound:
		err = qpLossBound(e, d, &r)
	case scenario.MetricImbalance:
		err = imbalance(e, d, &r)
	case scenario.MetricJain:
		err = jainSeries(e, d, &r)
	case scenario.MetricToolErrors:
		errs := d.ToolErrors()
		r.Measured, r.Unit = float64(len(errs)), "errors"
		r.Detail = "every traffic process exited 0 with no QP error and no --verify mismatch"
		if len(errs) > 0 {
			r.Detail = fmt.Sprintf("%d failed: %v", len(errs), errs)
		}
	default:
		err = fmt.Errorf("unknown metric %q", e.Metric)
	}
	if err != nil {
		r.Detail = "not measured: " + err.Error()
		return r
	}
	r.Pass = !e.Report && within(e, r.Measured)
	return r
}

// CheckAll evaluates every expectation of a scenario.
func CheckAll(s *scenario.Scenario, d Data) []Result {
	out := make([]Result, 0, len(s.Expect))
	for _, e := range s.Expect {
		if e.CrossRun() {
			continue // CheckValues: the tools' results, not the series
		}
		out = append(out, Check(e, d))
	}
	return out
}

func within(e scenario.Expect, m float64) bool {
	if math.IsNaN(m) || e.Report {
		return false
	}
	const eps = 1e-9
	if e.Want != nil {
		tol := 0.0
		if e.Tolerance != nil {
			tol = *e.Tolerance
		}
		if math.Abs(m-*e.Want) > tol+eps {
			return false
		}
	}
	if e.Min != nil && m < *e.Min-eps {
		return false
	}
	if e.Max != nil && m > *e.Max+eps {
		return false
	}
	return true
}

// reference is the baseline of a ratio: the series' mean over the baseline
// window, or its emulated capacity.
func reference(e scenario.Expect, s series.Series, d Data) (float64, string, error) {
	if e.BaselineCapacity {
		of, whose := e.Series, ""
		if e.CapacityOf != "" {
			of, whose = e.CapacityOf, " of "+e.CapacityOf
		}
		c, err := d.Capacity(of)
		if err != nil {
			return 0, "", err
		}
		if c <= 0 {
			return 0, "", fmt.Errorf("series %s has no emulated capacity (set a link capacity in the topology)", of)
		}
		return c, fmt.Sprintf("emulated capacity%s %s", whose, human(c, s.Unit)), nil
	}
	// Over several windows: the samples of all of them, as one.
	var pts []series.Point
	var names []string
	for _, w := range e.BaselineWindows() {
		pts = append(pts, s.Window(w.From, w.To)...)
		names = append(names, w.String())
	}
	all := series.Series{Name: s.Name, Unit: s.Unit, Points: pts}
	inf := time.Duration(math.MaxInt64)
	b, stat := all.Mean(-inf, inf), "mean"
	if e.Median {
		b, stat = all.Median(-inf, inf), "median"
	}
	over := strings.Join(names, " and ")
	if math.IsNaN(b) || b <= 0 {
		return 0, "", fmt.Errorf("series %s carried nothing over the baseline window %s", e.Series, over)
	}
	return b, fmt.Sprintf("baseline %s (%s over %s)", human(b, s.Unit), stat, over), nil
}

func ratio(e scenario.Expect, d Data, r *Result) error {
	s, err := d.Series(e.Series)
	if err != nil {
		return err
	}
	ref, refText, err := reference(e, s, d)
	if err != nil {
		return err
	}
	var m float64
	var what string
	if e.Metric == scenario.MetricDip {
		m = s.Smooth(Smoothing).Min(e.Window.From, e.Window.To)
		what = fmt.Sprintf("lowest %d-sample average", Smoothing)
	} else if e.Median {
		m = s.Median(e.Window.From, e.Window.To)
		what = fmt.Sprintf("median (mean %s)", human(s.Mean(e.Window.From, e.Window.To), s.Unit))
	} else {
		m = s.Mean(e.Window.From, e.Window.To)
		what = "mean"
	}
	if math.IsNaN(m) {
		return fmt.Errorf("no sample of %s in the window %v", e.Series, e.Window)
	}
	r.Measured = m / ref
	r.Detail = fmt.Sprintf("%s %s over %v / %s", what, human(m, s.Unit), e.Window, refText)
	// A baseline far below the emulated capacity means the run was bound
	// by something else (CPU): say so, the ratio is then less telling.
	if c, err := d.Capacity(e.Series); err == nil && c > 0 && !e.BaselineCapacity {
		r.Detail += fmt.Sprintf("; the baseline is %.0f %% of the emulated capacity", 100*ref/c)
		if ref < LowBaseline*c {
			r.Detail += " (below " + fmt.Sprintf("%.0f", 100*LowBaseline) + " %: this run was not bound by the port models)"
		}
	}
	return nil
}

// jainSeries is Jain's index of the series' means over the window (metric
// jain with a list of series).
func jainSeries(e scenario.Expect, d Data, r *Result) error {
	var xs []float64
	var parts []string
	for _, n := range e.SeriesList {
		s, err := d.Series(n)
		if err != nil {
			return err
		}
		m := s.Mean(e.Window.From, e.Window.To)
		if math.IsNaN(m) {
			return fmt.Errorf("no sample of %s in the window %v", n, e.Window)
		}
		xs = append(xs, m)
		parts = append(parts, fmt.Sprintf("%s %s", n, human(m, s.Unit)))
	}
	j, ok := Jain(xs)
	if !ok {
		return fmt.Errorf("every series carried nothing over %v (%s)", e.Window, strings.Join(parts, ", "))
	}
	r.Measured, r.Unit, r.Series = j, "index", strings.Join(e.SeriesList, ", ")
	r.Detail = fmt.Sprintf("Jain's index (Σx)²/(n·Σx²) of %d means over %v: %s", len(xs), e.Window, strings.Join(parts, ", "))
	return nil
}

func recovery(e scenario.Expect, d Data, r *Result) error {
	s, err := d.Series(e.Series)
	if err != nil {
		return err
	}
	settled := s.Mean(e.Window.From, e.Window.To)
	if math.IsNaN(settled) || settled <= 0 {
		return fmt.Errorf("series %s carried nothing over the settled window %v", e.Series, e.Window)
	}
	level := e.Level * settled
	at, ok := s.Smooth(Smoothing).FirstReach(e.At, level)
	r.Unit = "ms"
	if !ok {
		r.Measured = math.Inf(1)
		r.Detail = fmt.Sprintf("never reached %.0f%% of the settled %s (mean over %v) after %v", e.Level*100, human(settled, s.Unit), e.Window, e.At)
		return nil
	}
	// The smoothed point at `at` averages the Smoothing samples ending
	// there; the series got to the level no later than that point.
	r.Measured = float64(at-e.At) / float64(time.Millisecond)
	if rtt := d.RTT(); rtt > 0 {
		r.Detail = fmt.Sprintf("%.0f RTTs of %v; ", float64(at-e.At)/float64(rtt), rtt.Round(time.Microsecond))
	}
	r.Detail += fmt.Sprintf("from %v to the first %d-sample average ≥ %.0f%% of the settled %s (mean over %v)", e.At, Smoothing, e.Level*100, human(settled, s.Unit), e.Window)
	return nil
}

func human(v float64, unit string) string {
	if unit == "bit/s" {
		switch {
		case v >= 1e9:
			return fmt.Sprintf("%.3g Gbit/s", v/1e9)
		case v >= 1e6:
			return fmt.Sprintf("%.4g Mbit/s", v/1e6)
		}
		return fmt.Sprintf("%.4g kbit/s", v/1e3)
	}
	return fmt.Sprintf("%.4g %s", v, unit)
}

// Counter names qpLossBound reads (internal/telemetry's keys).
const (
	keyLosses        = "losses"
	keyTimeouts      = "timeouts"
	keyInFlightAtBad = "inflight_at_bad"
)

// qpLossBound is S9's claim per QP: the packets it lost (SACK-hole losses
// plus timeouts) over the window are at most the packets it had
// unacknowledged on its EVs when they were declared ASSUMED_BAD. The
// measured value is the worst QP's lost / bound. A run in which no EV of
// any QP was declared bad did not exercise the claim: not measured.
func qpLossBound(e scenario.Expect, d Data, r *Result) error {
	host := strings.TrimPrefix(e.Series, "qp:")
	g, err := d.QPGrowth(host, e.Window, keyLosses, keyTimeouts, keyInFlightAtBad)
	if err != nil {
		return err
	}
	if len(g) == 0 {
		return fmt.Errorf("no QP of %s was sampled over %v", host, e.Window)
	}
	ids := slices.Sorted(maps.Keys(g))
	var worst, totalBound float64
	var parts []string
	for _, id := range ids {
		c := g[id]
		lost, bound := c[keyLosses]+c[keyTimeouts], c[keyInFlightAtBad]
		totalBound += bound
		q := 0.0
		switch {
		case lost > 0 && bound == 0:
			q = math.Inf(1)
		case lost > 0:
			q = lost / bound
		}
		worst = max(worst, q)
		parts = append(parts, fmt.Sprintf("%s lost %.0f (%.0f + %.0f timeouts) of %.0f", id, lost, c[keyLosses], c[keyTimeouts], bound))
	}
	if totalBound == 0 {
		return fmt.Errorf("no EV of %s's %d QPs was declared ASSUMED_BAD over %v, so nothing was in flight on a bad path: the faults did not exercise the claim (%s)",
			host, len(g), e.Window, strings.Join(parts, "; "))
	}
	r.Measured = worst
	r.Detail = fmt.Sprintf("worst QP's lost / in flight on its EVs when declared ASSUMED_BAD, %d QPs of %s over %v: %s",
		len(g), host, e.Window, strings.Join(parts, "; "))
	return nil
}

// Grouper is implemented by Data that can name the series of a group,
// for metric imbalance: uplinks:SWITCH is one set (the switch's fabric
// ports' tx series), uplinks:t0 one set per T0 of the run.
type Grouper interface {
	SeriesGroup(name string) ([][]string, error)
}

// imbalance is, per set, the busiest series' mean over the set's mean of
// means, over the window (the whole run when none is given); the measured
// value is the worst set's.
func imbalance(e scenario.Expect, d Data, r *Result) error {
	g, ok := d.(Grouper)
	if !ok {
		return fmt.Errorf("this run cannot resolve series group %s", e.Series)
	}
	sets, err := g.SeriesGroup(e.Series)
	if err != nil {
		return err
	}
	w := e.Window
	if w.To == 0 {
		w = scenario.Window{From: 0, To: time.Duration(math.MaxInt64)}
	}
	var details []string
	worst := math.NaN()
	for _, names := range sets {
		var means []float64
		var sum, top float64
		unit := ""
		for _, n := range names {
			s, err := d.Series(n)
			if err != nil {
				return err
			}
			m := s.Mean(w.From, w.To)
			if math.IsNaN(m) {
				return fmt.Errorf("no sample of %s in the window", n)
			}
			means = append(means, m)
			sum += m
			top = max(top, m)
			unit = s.Unit
		}
		if len(means) == 0 || sum <= 0 {
			details = append(details, fmt.Sprintf("%s carried nothing", strings.Join(names, ", ")))
			continue
		}
		x := top / (sum / float64(len(means)))
		if math.IsNaN(worst) || x > worst {
			worst = x
		}
		var parts []string
		for i, n := range names {
			parts = append(parts, fmt.Sprintf("%s %s (%.0f %%)", strings.TrimPrefix(n, "tx:"), human(means[i], unit), 100*means[i]/sum))
		}
		details = append(details, fmt.Sprintf("%.2f: %s", x, strings.Join(parts, ", ")))
	}
	if math.IsNaN(worst) {
		return fmt.Errorf("the ports of %s carried nothing: %s", e.Series, strings.Join(details, "; "))
	}
	over := "the whole run"
	if e.Window.To != 0 {
		over = e.Window.String()
	}
	r.Measured, r.Unit = worst, "ratio"
	r.Detail = fmt.Sprintf("busiest port's mean over the ports' mean, over %s, the worst of: %s", over, strings.Join(details, "; "))
	return nil
}
