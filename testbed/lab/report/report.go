// Package report writes what an mrc-lab run produced: the series as CSV,
// one PNG per series group and report.md (claim, measured value, bounds,
// PASS/FAIL, or REPORTED for a report-only claim, figures), and the combined report of several scenarios.
package report

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"gonum.org/v1/plot/vg"

	"github.com/softmrc/softmrc/testbed/lab"
	"github.com/softmrc/softmrc/testbed/lab/figure"
	"github.com/softmrc/softmrc/testbed/lab/series"
)

// Write puts series.csv, the figures and report.md into dir and returns the
// report's path.
func Write(dir string, o *lab.Outcome) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	var figs []string
	for _, v := range o.Variants {
		if _, err := Write(filepath.Join(dir, v.Label), v); err != nil {
			return "", err
		}
	}
	if bars := valueBars(o); len(bars) > 0 {
		for _, bc := range bars {
			name := "fig-values-" + bc.Key + ".png"
			if err := figure.SaveBars(bc, filepath.Join(dir, name), 8*vg.Inch, 4*vg.Inch); err != nil {
				return "", err
			}
			figs = append(figs, name)
		}
	}
	var names []string
	for n := range o.Series {
		names = append(names, n)
	}
	slices.Sort(names)
	if len(names) > 0 {
		var ss []series.Series
		for _, n := range names {
			ss = append(ss, o.Series[n])
		}
		f, err := os.Create(filepath.Join(dir, "series.csv"))
		if err != nil {
			return "", err
		}
		err = series.WriteCSV(f, ss)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return "", err
		}
	}
	for _, fg := range o.Figures {
		name := "fig-" + sanitize(fg.Series[0].Name) + ".png"
		if err := figure.Save(fg, filepath.Join(dir, name), 8*vg.Inch, 3.5*vg.Inch); err != nil {
			return "", err
		}
		figs = append(figs, name)
	}
	path := filepath.Join(dir, "report.md")
	return path, os.WriteFile(path, []byte(Markdown(o, figs, "")), 0o644)
}

func sanitize(s string) string {
	return strings.NewReplacer(":", "-", "/", "-", " ", "-").Replace(s)
}

// Verdict is PASS, FAIL or ERROR (the run itself failed).
func Verdict(o *lab.Outcome) string {
	switch {
	case o.Err != nil:
		return "ERROR"
	case o.Pass():
		return "PASS"
	}
	return "FAIL"
}

func value(v float64, unit string) string {
	switch {
	case math.IsNaN(v):
		return "not measured"
	case math.IsInf(v, 1):
		return "never"
	case unit == "ratio" || unit == "index":
		return fmt.Sprintf("%.3f", v)
	case unit == "ms":
		return fmt.Sprintf("%.0f ms", v)
	}
	return fmt.Sprintf("%.4g %s", v, unit)
}

// Markdown is one scenario's report; figures are paths relative to the
// report, prefixed with figDir.
func Markdown(o *lab.Outcome, figs []string, figDir string) string {
	s := o.Scenario
	var b strings.Builder
	fmt.Fprintf(&b, "## %s — %s\n\n", label(o), Verdict(o))
	if s.Title != "" {
		fmt.Fprintf(&b, "%s\n\n", s.Title)
	}
	if s.Why != "" {
		fmt.Fprintf(&b, "*Why these numbers:* %s\n\n", strings.TrimSpace(s.Why))
	}
	top := s.Topology.Preset
	if top == "" {
		top = s.Topology.File
	}
	fmt.Fprintf(&b, "Topology %s; sampling every %v; %d samples; %d faults applied; took %v; load average %s → %s. Scenario file `%s`.\n\n",
		top, s.Interval, o.Samples, len(o.Faults), o.Took.Round(100*time.Millisecond), o.LoadBefore, o.LoadAfter, s.Source)
	if o.RTT > 0 {
		fmt.Fprintf(&b, "Median smoothed RTT of the senders' QPs: %v.\n\n", o.RTT.Round(time.Microsecond))
	}
	if g := lab.GapSummary(o.Logs); g != "" {
		fmt.Fprintf(&b, "The daemons logged %s: times no port of theirs was served (docs/operations.md, \"When the run loop stalls\").\n\n", g)
	}
	if o.Err != nil {
		fmt.Fprintf(&b, "**The run failed:** %v\n\n", o.Err)
	}
	if len(o.Results) > 0 {
		b.WriteString("| claim | metric | measured | passes if | verdict | how it was measured |\n|---|---|---|---|---|---|\n")
		for _, r := range o.Results {
			v := r.Verdict()
			m := r.Metric
			if r.Series != "" {
				m += " of `" + r.Series + "`"
			}
			fmt.Fprintf(&b, "| %s | %s | %s | %s | **%s** | %s |\n", r.Claim, m, value(r.Measured, r.Unit), r.Bounds, v, strings.ReplaceAll(r.Detail, "|", "/"))
		}
		b.WriteString("\n")
	}
	if len(o.Variants) > 0 {
		b.WriteString("Variants (each a full run on its own testbed; its report, series and figures in its folder):\n\n| variant | verdict | took | load average | report |\n|---|---|---|---|---|\n")
		for _, v := range o.Variants {
			verdict := Verdict(v)
			if v.Err == nil && len(v.Results) == 0 {
				verdict = "ran (no per-run claims)"
			}
			fmt.Fprintf(&b, "| %s | %s | %v | %s → %s | [%s/report.md](%s) |\n", v.Label, verdict, v.Took.Round(100*time.Millisecond), v.LoadBefore, v.LoadAfter, v.Label, filepath.Join(figDir, v.Label, "report.md"))
		}
		b.WriteString("\n")
	}
	if len(o.Values) > 0 {
		var keys []string
		for k := range o.Values {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		b.WriteString("Measured values (the tools' results: rate and busbw/algbw in Mbit/s, wrong in elements):\n\n| value | measured |\n|---|---|\n")
		for _, k := range keys {
			fmt.Fprintf(&b, "| %s | %.4g |\n", k, o.Values[k])
		}
		b.WriteString("\n")
	}
	var colls []lab.FlowResult
	for _, f := range o.Flows {
		if f.Flow.IsCollective() {
			colls = append(colls, f)
		}
	}
	if len(colls) > 0 {
		b.WriteString("| collective | ranks (in order) | transport | QPs per peer | size × iters | busbw | algbw | #wrong | result |\n|---|---|---|---|---|---|---|---|---|\n")
		for _, f := range colls {
			v := lab.FlowValues(f)
			st, wrong := "ok", "not checked"
			if f.Err != nil {
				st = "error: " + f.Err.Error()
			}
			if x, ok := v["wrong"]; ok {
				wrong = fmt.Sprintf("%g", x)
			}
			tr := f.Flow.Transport
			if tr == "" {
				tr = "mrc"
			}
			fmt.Fprintf(&b, "| %s (%s) | %s | %s | %d | %d B × %d | %.1f Mbit/s | %.1f Mbit/s | %s | %s |\n", f.Flow.Name, f.Flow.Tool, strings.Join(f.Flow.Hosts, ","), tr, f.Flow.QPs, f.Flow.Size, f.Flow.Iters, v["busbw"], v["algbw"], wrong, strings.ReplaceAll(st, "|", "/"))
		}
		b.WriteString("\n")
	}
	if len(o.Flows) > len(colls) {
		b.WriteString("| flow | from → to | QPs × size | duration | mrc-write-bw average | verify |\n|---|---|---|---|---|---|\n")
		for _, f := range o.Flows {
			if f.Flow.IsCollective() {
				continue
			}
			st := "off"
			switch {
			case f.Err != nil:
				st = "error: " + f.Err.Error()
			case f.Verified && f.Mismatches == 0:
				st = "every byte right"
			case f.Verified:
				st = fmt.Sprintf("%d bytes wrong", f.Mismatches)
			}
			fmt.Fprintf(&b, "| %s | %s → %s | %d × %d B | %v from %v | %.1f MiB/s | %s |\n", f.Flow.Name, f.Flow.From, f.Flow.To, f.Flow.QPs, f.Flow.Size, f.Flow.Duration, f.Flow.Start, f.Average, st)
		}
		b.WriteString("\n")
	}
	if len(o.Faults) > 0 {
		b.WriteString("Faults (planned → requested..returned, relative to the traffic start): ")
		var fs []string
		for _, f := range o.Faults {
			planned := fmt.Sprint(f.At)
			if f.BeforeTraffic {
				planned = "before the traffic"
			}
			fs = append(fs, fmt.Sprintf("%s→%v..%v %s %s", planned, f.Sent.Round(time.Millisecond), f.T.Round(time.Millisecond), f.Target, f.Op))
		}
		b.WriteString(strings.Join(fs, "; "))
		b.WriteString(".\n\n")
	}
	if len(o.Logs) > 0 {
		b.WriteString("Warnings and errors the daemons logged (their whole logs are in [logs/](" + filepath.Join(figDir, "logs") + ")):\n\n| log | lines | the first of them |\n|---|---|---|\n")
		for _, n := range o.Logs {
			var ls []string
			for _, l := range n.Lines {
				if len(l) > 400 {
					l = l[:400] + " …"
				}
				ls = append(ls, "`"+strings.ReplaceAll(strings.ReplaceAll(l, "|", "/"), "`", "'")+"`")
			}
			fmt.Fprintf(&b, "| [%s](%s) | %d | %s |\n", n.File, filepath.Join(figDir, "logs", n.File), n.Warnings, strings.Join(ls, "<br>"))
		}
		b.WriteString("\n")
	}
	for _, f := range figs {
		fmt.Fprintf(&b, "![%s](%s)\n\n", f, filepath.Join(figDir, f))
	}
	return b.String()
}

// valueBars are the bar charts of a scenario with variants: one per unit,
// a bar per measured value in Mbit/s (busbw and rate), in variant order.
func valueBars(o *lab.Outcome) []figure.Bars {
	if len(o.Variants) == 0 {
		return nil
	}
	var out []figure.Bars
	for _, key := range []string{"busbw", "rate"} {
		bc := figure.Bars{Key: key, Title: fmt.Sprintf("%s: %s of every run (Mbit/s)", o.Scenario.Name, key), Unit: key + " (Mbit/s)"}
		for _, v := range o.Variants {
			for _, f := range v.Flows {
				if x, ok := lab.FlowValues(f)[key]; ok {
					bc.Labels = append(bc.Labels, v.Label+" "+f.Flow.Name)
					bc.Values = append(bc.Values, x)
				}
			}
		}
		if len(bc.Values) > 0 {
			out = append(out, bc)
		}
	}
	return out
}

func label(o *lab.Outcome) string {
	if o.Label != "" {
		return o.Label
	}
	return o.Scenario.Name
}

// Tally counts, per scenario, the runs whose every claim passed.
func Tally(outs []*lab.Outcome) string {
	var names []string
	pass, runs := map[string]int{}, map[string]int{}
	for _, o := range outs {
		n := o.Scenario.Name
		if runs[n] == 0 {
			names = append(names, n)
		}
		runs[n]++
		if o.Pass() {
			pass[n]++
		}
	}
	var b strings.Builder
	b.WriteString("| scenario | runs with every claim passing |\n|---|---|\n")
	for _, n := range names {
		fmt.Fprintf(&b, "| %s | %d of %d |\n", n, pass[n], runs[n])
	}
	return b.String()
}

// Summary is one row per scenario for the combined report.
func Summary(outs []*lab.Outcome) string {
	var b strings.Builder
	b.WriteString("| scenario | claim | measured | passes if | verdict |\n|---|---|---|---|---|\n")
	for _, o := range outs {
		if o.Err != nil {
			fmt.Fprintf(&b, "| %s | (run failed) | %s | | **ERROR** |\n", label(o), strings.ReplaceAll(o.Err.Error(), "|", "/"))
			continue
		}
		for _, r := range o.Results {
			v := r.Verdict()
			fmt.Fprintf(&b, "| %s | %s | %s | %s | **%s** |\n", label(o), r.Claim, value(r.Measured, r.Unit), r.Bounds, v)
		}
	}
	return b.String()
}
