package report

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/softmrc/softmrc/nic/collperf"
	"github.com/softmrc/softmrc/testbed/lab"
	"github.com/softmrc/softmrc/testbed/lab/figure"
	"github.com/softmrc/softmrc/testbed/lab/scenario"
	"github.com/softmrc/softmrc/testbed/lab/series"
	"github.com/softmrc/softmrc/testbed/lab/verdict"
)

func TestWrite(t *testing.T) {
	s := &scenario.Scenario{Name: "x", Title: "a claim", Why: "because", Source: "x.yaml", Interval: 10 * time.Millisecond, Topology: scenario.Topology{Preset: "clos-2p"}}
	ser := series.Series{Name: "rx:h3", Unit: "bit/s", Points: []series.Point{{T: 10 * time.Millisecond, V: 1e6}, {T: 20 * time.Millisecond, V: 2e6}}}
	o := &lab.Outcome{Scenario: s, Series: map[string]series.Series{"rx:h3": ser},
		Figures: []figure.Figure{{Title: "t", Series: []series.Series{ser}}},
		Results: []verdict.Result{
			{Claim: "holds", Metric: "ratio", Series: "rx:h3", Measured: 0.75, Unit: "ratio", Bounds: "0.75 ± 0.03", Pass: true, Detail: "mean | x"},
			{Claim: "broken", Metric: "recovery_ms", Series: "rx:h3", Measured: math.Inf(1), Unit: "ms", Bounds: "≤ 300", Detail: "never"},
		},
		Logs: []lab.LogNote{
			{File: "h8.log", Warnings: 2, Lines: []string{"level=WARN msg=\"QP failed\" cause=a|b", "level=WARN msg=`x`"}},
			{File: "h3.log", Warnings: 2, Gaps: 2, MaxGap: 937 * time.Millisecond, MaxGapCause: "descheduled: waiting for a CPU"},
			{File: "h4.log", Warnings: 1, Gaps: 1, MaxGap: 60 * time.Millisecond, MaxGapCause: "busy"},
		}}
	dir := t.TempDir()
	path, err := Write(dir, o)
	if err != nil {
		t.Fatal(err)
	}
	md, _ := os.ReadFile(path)
	for _, w := range []string{"## x — FAIL", "| holds | ratio of `rx:h3` | 0.750 | 0.75 ± 0.03 | **PASS** | mean / x |", "| broken | recovery_ms of `rx:h3` | never | ≤ 300 | **FAIL** |", "![fig-rx-h3.png](fig-rx-h3.png)", "*Why these numbers:* because",
		"| [h8.log](logs/h8.log) | 2 | `level=WARN msg=\"QP failed\" cause=a/b`<br>`level=WARN msg='x'` |",
		"The daemons logged 3 run-loop gaps of 50 ms or more in 2 daemons' logs, the longest 937ms on h3 (descheduled: waiting for a CPU)"} {
		if !strings.Contains(string(md), w) {
			t.Errorf("report.md lacks %q:\n%s", w, md)
		}
	}
	csv, _ := os.ReadFile(filepath.Join(dir, "series.csv"))
	if string(csv) != "t_s,rx:h3[bit/s]\n0.0100,1e+06\n0.0200,2e+06\n" {
		t.Errorf("series.csv:\n%s", csv)
	}
	if _, err := os.Stat(filepath.Join(dir, "fig-rx-h3.png")); err != nil {
		t.Error(err)
	}
	sum := Summary([]*lab.Outcome{o, {Scenario: &scenario.Scenario{Name: "y"}, Err: errors.New("bring up: no")}})
	for _, w := range []string{"| x | holds | 0.750 | 0.75 ± 0.03 | **PASS** |", "| x | broken | never | ≤ 300 | **FAIL** |", "| y | (run failed) | bring up: no | | **ERROR** |"} {
		if !strings.Contains(sum, w) {
			t.Errorf("summary lacks %q:\n%s", w, sum)
		}
	}
}

// TestWriteVariants: a scenario with variants writes each run's report in
// its folder, the values table, the busbw bar chart and the collectives.
func TestWriteVariants(t *testing.T) {
	s := &scenario.Scenario{Name: "s7", Source: "s7.yaml", Interval: 10 * time.Millisecond}
	ar := scenario.Flow{Name: "ar", Tool: "mrc-allreduce-perf", Hosts: []string{"h0", "h1"}, QPs: 1, Size: 1 << 20, Iters: 5, Check: true}
	rep := &collperf.Report{Rows: []collperf.Row{{Bytes: 1 << 20, Out: collperf.Result{BusBW: 0.008, AlgBW: 0.008}, In: collperf.Result{BusBW: 0.008, AlgBW: 0.008}}}}
	v1 := &lab.Outcome{Label: "mrc", Scenario: &scenario.Scenario{Name: "s7-mrc", Source: "s7.yaml", Interval: 10 * time.Millisecond},
		Flows: []lab.FlowResult{{Flow: ar, Collective: rep}}}
	v2 := &lab.Outcome{Label: "roce", Scenario: &scenario.Scenario{Name: "s7-roce", Source: "s7.yaml", Interval: 10 * time.Millisecond},
		Flows: []lab.FlowResult{{Flow: ar, Err: errors.New("transport retry exceeded")}}}
	o := &lab.Outcome{Scenario: s, Variants: []*lab.Outcome{v1, v2}, Values: map[string]float64{"mrc.ar.busbw": 64},
		Results: []verdict.Result{{Claim: "mrc beats roce", Metric: "value", Measured: math.NaN(), Unit: "ratio", Bounds: "≥ 1", Detail: "not measured: roce.ar.busbw was not measured"}}}
	dir := t.TempDir()
	path, err := Write(dir, o)
	if err != nil {
		t.Fatal(err)
	}
	md, _ := os.ReadFile(path)
	for _, w := range []string{"| mrc | ran (no per-run claims) |", "[roce/report.md](roce/report.md)", "| mrc.ar.busbw | 64 |", "| mrc beats roce | value | not measured | ≥ 1 | **FAIL** |", "![fig-values-busbw.png](fig-values-busbw.png)"} {
		if !strings.Contains(string(md), w) {
			t.Errorf("report.md lacks %q:\n%s", w, md)
		}
	}
	for _, f := range []string{"fig-values-busbw.png", "mrc/report.md", "roce/report.md"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Error(err)
		}
	}
	vr, _ := os.ReadFile(filepath.Join(dir, "roce", "report.md"))
	if !strings.Contains(string(vr), "| ar (mrc-allreduce-perf) | h0,h1 | mrc | 1 | 1048576 B × 5 |") || !strings.Contains(string(vr), "error: transport retry exceeded") {
		t.Errorf("variant report lacks the failed collective:\n%s", vr)
	}
	mr, _ := os.ReadFile(filepath.Join(dir, "mrc", "report.md"))
	if !strings.Contains(string(mr), "| 64.0 Mbit/s | 64.0 Mbit/s | 0 | ok |") {
		t.Errorf("variant report lacks the collective's busbw:\n%s", mr)
	}
}

// TestReportedClaims: a report-only claim shows its value with verdict
// REPORTED and does not decide the run: beside a passing claim the run
// PASSES whatever the report measured, beside a failing one it FAILS.
func TestReportedClaims(t *testing.T) {
	s := &scenario.Scenario{Name: "s8", Source: "s8.yaml", Interval: 10 * time.Millisecond}
	rep := verdict.Result{Claim: "RoCE victim", Metric: "value", Measured: 0.62, Unit: "ratio", Bounds: "reported, not judged", Reported: true, Detail: "a over b"}
	for _, c := range []struct {
		name    string
		judged  verdict.Result
		verdict string
	}{
		{"beside a pass", verdict.Result{Claim: "MRC victim", Metric: "value", Measured: 0.97, Unit: "ratio", Bounds: "≥ 0.95", Pass: true}, "PASS"},
		{"beside a fail", verdict.Result{Claim: "MRC victim", Metric: "value", Measured: 0.80, Unit: "ratio", Bounds: "≥ 0.95"}, "FAIL"},
	} {
		t.Run(c.name, func(t *testing.T) {
			o := &lab.Outcome{Scenario: s, Results: []verdict.Result{c.judged, rep}}
			if v := Verdict(o); v != c.verdict {
				t.Errorf("verdict %s, want %s", v, c.verdict)
			}
			md := Markdown(o, nil, "")
			for _, w := range []string{"## s8 — " + c.verdict, "| RoCE victim | value | 0.620 | reported, not judged | **REPORTED** | a over b |"} {
				if !strings.Contains(md, w) {
					t.Errorf("report lacks %q:\n%s", w, md)
				}
			}
			if sum := Summary([]*lab.Outcome{o}); !strings.Contains(sum, "| s8 | RoCE victim | 0.620 | reported, not judged | **REPORTED** |") {
				t.Errorf("summary:\n%s", sum)
			}
		})
	}
}
