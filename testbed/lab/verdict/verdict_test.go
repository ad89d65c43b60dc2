package verdict

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/softmrc/softmrc/testbed/lab/scenario"
	"github.com/softmrc/softmrc/testbed/lab/series"
)

type fake struct {
	s    map[string]series.Series
	cap  float64
	errs []string
	qps  *series.Counters // per-QP counters (qp_loss_bound), time zero at 0
}

func (f fake) QPGrowth(host string, w scenario.Window, keys ...string) (map[string]map[string]float64, error) {
	if f.qps == nil {
		return nil, fmt.Errorf("no QP of %s sampled", host)
	}
	return f.qps.GrowthByID(host, 0, w.From, w.To, keys...)
}

func (f fake) Series(n string) (series.Series, error) {
	s, ok := f.s[n]
	if !ok {
		return s, fmt.Errorf("no series %s", n)
	}
	return s, nil
}
func (f fake) Capacity(string) (float64, error) { return f.cap, nil }
func (f fake) ToolErrors() []string             { return f.errs }
func (f fake) RTT() time.Duration               { return 200 * time.Microsecond }
func (f fake) FaultTime(i int) (time.Duration, time.Duration, time.Duration, bool) {
	switch i {
	case 0:
		return time.Second, time.Second, 2 * time.Second, true
	case 2: // applied 1.5 s late, 0.5 s before the next fault
		return 3400 * time.Millisecond, 3500 * time.Millisecond, 4 * time.Second, true
	case 3: // the up at 2 s was requested at 1.95 s and returned at 2.05 s
		return 1950 * time.Millisecond, 2050 * time.Millisecond, 4 * time.Second, true
	}
	return 0, 0, 0, false
}

// steps builds a 10 ms series: full until down, then frac×full until up,
// linear recovery over ramp, then full.
func steps(full, frac float64, down, up, ramp time.Duration) series.Series {
	s := series.Series{Name: "rx:h3", Unit: "bit/s"}
	for t := 10 * time.Millisecond; t <= 4*time.Second; t += 10 * time.Millisecond {
		v := full
		switch {
		case t > down && t <= up:
			v = full * frac
		case t > up && t <= up+ramp:
			v = full * (frac + (1-frac)*float64(t-up)/float64(ramp))
		}
		s.Points = append(s.Points, series.Point{T: t, V: v})
	}
	return s
}

func f(x float64) *float64 { return &x }

func TestCheck(t *testing.T) {
	pass := fake{s: map[string]series.Series{"rx:h3": steps(100e6, 0.75, time.Second, 2*time.Second, 200*time.Millisecond)}, cap: 104e6}
	// The same run with MRC failing to use the remaining planes: 50 %
	// instead of 75 %, and a slow recovery. These must FAIL.
	fail := fake{s: map[string]series.Series{"rx:h3": steps(100e6, 0.5, time.Second, 2*time.Second, 900*time.Millisecond)}, cap: 104e6, errs: []string{"flow a: exit status 1"}}
	w := func(a, b time.Duration) scenario.Window { return scenario.Window{From: a, To: b} }
	ratio := scenario.Expect{Claim: "3 of 4 planes", Metric: scenario.MetricRatio, Series: "rx:h3", Window: w(1200*time.Millisecond, 1900*time.Millisecond), Baseline: w(200*time.Millisecond, 900*time.Millisecond), Want: f(0.75), Tolerance: f(0.03)}
	capa := scenario.Expect{Claim: "≥ 96 % of capacity", Metric: scenario.MetricRatio, Series: "rx:h3", Window: w(200*time.Millisecond, 900*time.Millisecond), BaselineCapacity: true, Min: f(0.96)}
	rec := scenario.Expect{Claim: "recovers in 300 ms", Metric: scenario.MetricRecovery, Series: "rx:h3", Window: w(3*time.Second, 3900*time.Millisecond), At: 2 * time.Second, Level: 0.9, Max: f(300)}
	dip := scenario.Expect{Claim: "dip", Metric: scenario.MetricDip, Series: "rx:h3", Window: w(time.Second, 2*time.Second), Baseline: w(200*time.Millisecond, 900*time.Millisecond), Min: f(0.7)}
	anchored := ratio
	zero, one := 0, 1
	anchored.AfterFault, anchored.Window = &zero, w(200*time.Millisecond, 900*time.Millisecond)
	noFault := anchored
	noFault.AfterFault = &one
	two, three := 2, 3
	late := anchored
	late.AfterFault = &two
	recAnchored := rec
	recAnchored.AfterFault, recAnchored.At, recAnchored.Window = &three, 0, w(950*time.Millisecond, 1850*time.Millisecond)
	med := ratio
	med.Median = true
	// One 100 ms stall (the NIC not scheduled) inside the 700 ms window.
	stall := fake{s: map[string]series.Series{"rx:h3": steps(100e6, 0.75, time.Second, 2*time.Second, 0)}}
	for i, p := range stall.s["rx:h3"].Points {
		if p.T > 1500*time.Millisecond && p.T <= 1600*time.Millisecond {
			stall.s["rx:h3"].Points[i].V = 0
		}
	}
	tools := scenario.Expect{Claim: "no QP error", Metric: scenario.MetricToolErrors, Max: f(0)}
	cases := []struct {
		name     string
		e        scenario.Expect
		d        fake
		measured float64
		pass     bool
	}{
		{"ratio pass", ratio, pass, 0.75, true},
		{"ratio fail", ratio, fail, 0.5, false},
		{"capacity pass", capa, pass, 100 / 104.0, true},
		{"capacity fail", capa, fake{s: pass.s, cap: 110e6}, 100 / 110.0, false},
		// 90 % of full is reached when the ramp gets to 0.9: 0.6 of 200 ms,
		// the 3-sample average 10 ms later.
		{"recovery pass", rec, pass, 130, true},
		{"recovery fail", rec, fail, 740, false},
		{"dip pass", dip, pass, 0.75, true},
		{"dip fail", dip, fail, 0.5, false},
		{"median ignores a stall", med, stall, 0.75, true},
		// Anchored to faults[0], which took effect at 1 s: the window
		// 0.2..0.9 s after it is the degraded part.
		{"after fault", anchored, pass, 0.75, true},
		{"after fault that did not happen", noFault, pass, math.NaN(), false},
		{"after a fault so late the window runs into the next", late, pass, math.NaN(), false},
		// Timed from the request (1.95 s), not from its return: 130 ms
		// after 2 s is 180 ms after 1.95 s.
		{"recovery after fault", recAnchored, pass, 180, true},
		{"mean counts the stall", ratio, stall, 0.75 * 6 / 7, false},
		{"tools pass", tools, pass, 0, true},
		{"tools fail", tools, fail, 1, false},
	}
	// A baseline at 40 % of the emulated capacity is flagged.
	if r := Check(ratio, fake{s: pass.s, cap: 250e6}); !strings.Contains(r.Detail, "the baseline is 40 % of the emulated capacity (below 80 %: this run was not bound by the port models)") {
		t.Errorf("low baseline not flagged: %s", r.Detail)
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := Check(c.e, c.d)
			if r.Pass != c.pass || (math.IsNaN(c.measured) != math.IsNaN(r.Measured)) || math.Abs(r.Measured-c.measured) > 0.011*max(1, c.measured) {
				t.Errorf("measured %v pass %v (%s); want %v pass %v", r.Measured, r.Pass, r.Detail, c.measured, c.pass)
			}
			if r.Detail == "" {
				t.Error("no detail")
			}
			if c.name == "ratio pass" && !strings.Contains(r.Detail, "the baseline is 96 % of the emulated capacity") {
				t.Errorf("no baseline share: %s", r.Detail)
			}
			// 130 ms at a 200 µs RTT.
			if c.name == "recovery pass" && !strings.Contains(r.Detail, "650 RTTs of 200µs") {
				t.Errorf("recovery not in RTTs: %s", r.Detail)
			}
		})
	}
}

func TestCheckNotMeasured(t *testing.T) {
	e := scenario.Expect{Claim: "x", Metric: scenario.MetricRatio, Series: "rx:h9", Window: scenario.Window{To: time.Second}, BaselineCapacity: true, Min: f(0)}
	r := Check(e, fake{})
	if r.Pass || !math.IsNaN(r.Measured) || !strings.Contains(r.Detail, "not measured: no series rx:h9") {
		t.Errorf("%+v", r)
	}
	// A series that carried nothing in its baseline cannot pass a ratio.
	s := series.Series{Unit: "bit/s", Points: []series.Point{{T: time.Second, V: 0}, {T: 2 * time.Second, V: 0}}}
	e = scenario.Expect{Claim: "x", Metric: scenario.MetricRatio, Series: "s", Window: scenario.Window{From: time.Second, To: 2 * time.Second}, Baseline: scenario.Window{To: time.Second}, Min: f(0)}
	if r := Check(e, fake{s: map[string]series.Series{"s": s}}); r.Pass {
		t.Errorf("zero baseline passed: %+v", r)
	}
}

// capFake has a capacity per series (S6 divides goodput by a shared link's).
type capFake struct {
	fake
	caps map[string]float64
}

func (f capFake) Capacity(n string) (float64, error) { return f.caps[n], nil }

// TestCheckECNBalancing is S6 on synthetic series: flow 2 joins flow 1's
// EV-A at 3 s. Balanced (flow 1 moves to EV-B within 0.3 s) must PASS;
// flow 1 staying on EV-A, which starves flow 2 to a third of the shared
// link, must FAIL; and the divisor is the shared link's capacity, not the
// flow's own (its host's 100 Mbit/s would make the balanced case fail).
func TestCheckECNBalancing(t *testing.T) {
	const link = 20e6
	flow := func(name string, before, after float64, start, settle time.Duration) series.Series {
		s := series.Series{Name: name, Unit: "bit/s"}
		for at := 10 * time.Millisecond; at <= 7*time.Second; at += 10 * time.Millisecond {
			v := before
			switch {
			case at > start+settle:
				v = after
			case at > start:
				v = (before + after) / 2
			}
			s.Points = append(s.Points, series.Point{T: at, V: v})
		}
		return s
	}
	mk := func(f1After, f2After float64) capFake {
		return capFake{fake: fake{s: map[string]series.Series{
			"goodput:h0": flow("goodput:h0", 0.93*2*link, f1After, 3*time.Second, 300*time.Millisecond),
			"goodput:h1": flow("goodput:h1", 0, f2After, 3*time.Second, 300*time.Millisecond),
		}}, caps: map[string]float64{"goodput:h0": 100e6, "goodput:h1": 100e6, "tx:p0-t0-0:u0": link}}
	}
	balanced := mk(0.93*link, 0.93*link)
	stuck := mk(0.93*link*1.5, 0.93*link/3)
	w := scenario.Window{From: 4 * time.Second, To: 6800 * time.Millisecond}
	for _, c := range []struct {
		d      Data
		series string
		pass   bool
	}{
		{balanced, "goodput:h0", true}, {balanced, "goodput:h1", true},
		{stuck, "goodput:h0", true}, {stuck, "goodput:h1", false},
	} {
		e := scenario.Expect{Claim: "≥ 45 %", Metric: scenario.MetricRatio, Series: c.series, Window: w, BaselineCapacity: true, CapacityOf: "tx:p0-t0-0:u0", Min: f(0.45)}
		r := Check(e, c.d)
		if r.Pass != c.pass || !strings.Contains(r.Detail, "of tx:p0-t0-0:u0") {
			t.Errorf("%s: pass %v (%.3f, %s), want %v", c.series, r.Pass, r.Measured, r.Detail, c.pass)
		}
	}
	own := scenario.Expect{Claim: "own capacity", Metric: scenario.MetricRatio, Series: "goodput:h1", Window: w, BaselineCapacity: true, Min: f(0.45)}
	if r := Check(own, balanced); r.Pass {
		t.Errorf("without capacity of, goodput:h1 is measured against its host's 100 Mbit/s and must fail: %.3f", r.Measured)
	}
}

// qpRun builds h0's per-QP counters as mrc-nicd samples them every 10 ms:
// each QP is created at created (before time zero: its first packets leave
// before 64 KiB have arrived) and first sampled 120 ms later (a QP shows
// up in the stream at the daemon's next tick, later on a loaded machine),
// declares an EV bad at badAt with atBad packets unacknowledged on it, and
// loses lost packets (SACK holes) and tmo (timeouts) evenly over its
// first 400 ms.
type qpRun struct {
	id               string
	created, badAt   time.Duration
	atBad, lost, tmo float64
}

func qpCounters(runs []qpRun) *series.Counters {
	var c series.Counters
	for t := -200 * time.Millisecond; t <= 4*time.Second; t += 10 * time.Millisecond {
		for _, q := range runs {
			if t < q.created+120*time.Millisecond {
				continue
			}
			frac := min(1, float64(t-q.created)/float64(400*time.Millisecond))
			bad := 0.0
			if t >= q.badAt {
				bad = q.atBad
			}
			c.Add(series.Sample{T: int64(t), Source: "h0", Kind: "qp", ID: q.id, Values: map[string]float64{
				"losses": math.Floor(frac * q.lost), "timeouts": math.Floor(frac * q.tmo), "inflight_at_bad": bad, "acked_bytes": float64(t),
			}})
		}
	}
	return &c
}

// TestCheckQPLossBound is S9 on synthetic per-QP counters. A QP that loses
// no more than it had in flight on its EVs when they were declared bad
// passes; one that keeps losing after (it went on spraying on the broken
// path) must FAIL; a QP that lost packets it never had in flight on a bad
// EV must FAIL; and a run where no EV was ever declared bad did not
// exercise the claim (not measured). The first losses happen before time
// zero: a window from 0 counts them (from the QP's creation).
func TestCheckQPLossBound(t *testing.T) {
	e := scenario.Expect{Claim: "lost ≤ in flight at bad", Metric: scenario.MetricQPLossBound, Series: "qp:h0", Window: scenario.Window{To: 3 * time.Second}, Max: f(1)}
	early := -50 * time.Millisecond // declared bad before time zero
	cases := []struct {
		name     string
		runs     []qpRun
		measured float64
		pass     bool
		detail   string
	}{
		{"bounded", []qpRun{{"0x0101", -150 * time.Millisecond, early, 12, 2, 10}, {"0x0102", -140 * time.Millisecond, 200 * time.Millisecond, 20, 5, 10}}, 12.0 / 12, true, "0x0101 lost 12 (2 + 10 timeouts) of 12"},
		{"keeps losing", []qpRun{{"0x0101", -150 * time.Millisecond, early, 12, 2, 10}, {"0x0102", -140 * time.Millisecond, 200 * time.Millisecond, 20, 30, 10}}, 40.0 / 20, false, "0x0102 lost 40 (30 + 10 timeouts) of 20"},
		{"lost with nothing declared bad", []qpRun{{"0x0101", -150 * time.Millisecond, early, 12, 2, 10}, {"0x0102", -140 * time.Millisecond, 10 * time.Second, 20, 3, 0}}, math.Inf(1), false, "0x0102 lost 3 (3 + 0 timeouts) of 0"},
		{"no path broken", []qpRun{{"0x0101", -150 * time.Millisecond, 10 * time.Second, 0, 0, 0}}, math.NaN(), false, "not measured: no EV of h0's 1 QPs was declared ASSUMED_BAD"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := Check(e, fake{qps: qpCounters(c.runs)})
			same := r.Measured == c.measured || (math.IsNaN(c.measured) && math.IsNaN(r.Measured)) || math.Abs(r.Measured-c.measured) < 1e-9
			if r.Pass != c.pass || !same || !strings.Contains(r.Detail, c.detail) {
				t.Errorf("measured %v pass %v (%s); want %v pass %v, detail with %q", r.Measured, r.Pass, r.Detail, c.measured, c.pass, c.detail)
			}
		})
	}
	// The bounded run passes only because the window counts from each
	// QP's creation: QP 0x0101 declared its EV bad at -50 ms, before its
	// first sample (-30 ms) and before time zero. Counted from time zero
	// (or from the first sample), its bound is 0 and what it lost
	// afterwards fails the claim.
	late := e
	late.Window.From = time.Millisecond
	if r := Check(late, fake{qps: qpCounters(cases[0].runs)}); r.Pass || !strings.Contains(r.Detail, "0x0101 lost 9 (2 + 7 timeouts) of 0") {
		t.Errorf("from 1 ms the bad EV (declared at -50 ms) is outside the window, want FAIL: %v %s", r.Pass, r.Detail)
	}
}

// TestCheckBaselineWindows: a ratio over a list of baseline windows is the
// window's mean over the mean of every sample in any of them (S8: the
// victim beside the paced flows before and after the incast). A drift that
// one window before the incast would read as a loss cancels out.
func TestCheckBaselineWindows(t *testing.T) {
	// 150 Mbit/s falling by 10 Mbit/s a second (CPU weather getting
	// worse), and 10 % lower from 2 s to 3 s (the incast).
	s := series.Series{Name: "goodput:h7", Unit: "bit/s"}
	for tt := 10 * time.Millisecond; tt <= 5*time.Second; tt += 10 * time.Millisecond {
		v := 150e6 - 10e6*tt.Seconds()
		if tt > 2*time.Second && tt <= 3*time.Second {
			v *= 0.9
		}
		s.Points = append(s.Points, series.Point{T: tt, V: v})
	}
	d := fake{s: map[string]series.Series{"goodput:h7": s}}
	w := func(a, b float64) scenario.Window {
		return scenario.Window{From: time.Duration(a * float64(time.Second)), To: time.Duration(b * float64(time.Second))}
	}
	for _, c := range []struct {
		name      string
		baselines []scenario.Window
		want      float64
		pass      bool
	}{
		// Before only: the drift adds to the loss (125·0.9 / 135).
		{"before", []scenario.Window{w(1, 2)}, 0.9 * 125 / 135, false},
		// Before and after: the drift cancels (125·0.9 / 125).
		{"before and after", []scenario.Window{w(1, 2), w(3, 4)}, 0.9, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := scenario.Expect{Claim: c.name, Metric: scenario.MetricRatio, Series: "goodput:h7", Window: w(2, 3), Baseline: c.baselines[0], Min: f(0.895)}
			if len(c.baselines) > 1 {
				e.Baselines = c.baselines
			}
			r := Check(e, d)
			if math.Abs(r.Measured-c.want) > 0.002 || r.Pass != c.pass {
				t.Errorf("measured %.4f pass %v, want %.4f pass %v (%s)", r.Measured, r.Pass, c.want, c.pass, r.Detail)
			}
			if len(c.baselines) > 1 && !strings.Contains(r.Detail, "over 1s..2s and 3s..4s") {
				t.Errorf("detail %q does not name both windows", r.Detail)
			}
		})
	}
}

// TestCheckJainSeries: metric jain over series is computed from the series'
// means over the window, not from whole-run averages: seven flows whose
// first one ran alone before the window are fair inside it (PASS), and the
// same flows with one of them taking three times the others' share inside
// the window FAIL.
func TestCheckJainSeries(t *testing.T) {
	flow := func(before, during float64) series.Series {
		s := series.Series{Unit: "bit/s"}
		for tm := 10 * time.Millisecond; tm <= 4*time.Second; tm += 10 * time.Millisecond {
			v := during
			if tm <= time.Second {
				v = before
			}
			s.Points = append(s.Points, series.Point{T: tm, V: v})
		}
		return s
	}
	var names []string
	fair := fake{s: map[string]series.Series{}}
	unfair := fake{s: map[string]series.Series{}}
	for i := 0; i < 7; i++ {
		n := fmt.Sprintf("goodput:h%d", i)
		names = append(names, n)
		before, during, heavy := 0.0, 7e6, 7e6
		if i == 0 {
			before, heavy = 50e6, 21e6 // alone first; then, unfair, 3 shares
		}
		fair.s[n] = flow(before, during)
		unfair.s[n] = flow(before, heavy)
	}
	e := scenario.Expect{Claim: "fair", Metric: scenario.MetricJain, SeriesList: names, Window: scenario.Window{From: 1500 * time.Millisecond, To: 3500 * time.Millisecond}, Min: f(0.9)}
	if r := Check(e, fair); !r.Pass || math.Abs(r.Measured-1) > 1e-9 || !strings.Contains(r.Detail, "goodput:h0 7") {
		t.Errorf("fair flows: %+v", r)
	}
	// (3+6)² / (7·(9+6)) = 81/105.
	if r := Check(e, unfair); r.Pass || math.Abs(r.Measured-81.0/105) > 1e-9 {
		t.Errorf("one flow with 3 shares: %+v, want FAIL at %.4f", r, 81.0/105)
	}
	// The whole run would have counted flow 0's time alone.
	whole := e
	whole.Window = scenario.Window{From: 0, To: 4 * time.Second}
	if r := Check(whole, fair); r.Pass {
		t.Errorf("whole-run means judged fair: %+v", r)
	}
	missing := e
	missing.SeriesList = append(slices.Clone(names), "goodput:h9")
	if r := Check(missing, fair); r.Pass || !strings.Contains(r.Detail, "not measured") {
		t.Errorf("a missing series: %+v", r)
	}
}
