package report

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

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
		}}
	dir := t.TempDir()
	path, err := Write(dir, o)
	if err != nil {
		t.Fatal(err)
	}
	md, _ := os.ReadFile(path)
	for _, w := range []string{"## x — FAIL", "| holds | ratio of `rx:h3` | 0.750 | 0.75 ± 0.03 | **PASS** | mean / x |", "| broken | recovery_ms of `rx:h3` | never | ≤ 300 | **FAIL** |", "![fig-rx-h3.png](fig-rx-h3.png)", "*Why these numbers:* because"} {
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
