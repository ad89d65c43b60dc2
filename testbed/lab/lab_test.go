package lab_test

import (
	"context"
	"io"
	"log/slog"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/softmrc/softmrc/testbed/lab"
	"github.com/softmrc/softmrc/testbed/lab/report"
	"github.com/softmrc/softmrc/testbed/lab/scenario"
	"github.com/softmrc/softmrc/testbed/lab/verdict"
	"github.com/softmrc/softmrc/testbed/netns"
)

// bins returns a folder with the daemons and mrc-write-bw: $MRC_BIN, or
// fresh builds.
func bins(t *testing.T) string {
	t.Helper()
	names := []string{"mrc-switchd", "mrc-nicd", "mrc-write-bw", "mrc-allreduce-perf"}
	if d := os.Getenv("MRC_BIN"); d != "" {
		for _, n := range names {
			if _, err := os.Stat(filepath.Join(d, n)); err != nil {
				t.Fatalf("MRC_BIN=%s has no %s (run make build)", d, n)
			}
		}
		return d
	}
	mod, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		t.Skipf("skipping: no go tool to build the daemons and MRC_BIN unset: %v", err)
	}
	root := filepath.Dir(strings.TrimSpace(string(mod)))
	dir := t.TempDir()
	for _, n := range names {
		cmd := exec.Command("go", "build", "-o", filepath.Join(dir, n), "./cmd/"+n)
		cmd.Dir = root
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go build %s: %v\n%s", n, err, b)
		}
	}
	return dir
}

// short is a 6-second scenario on clos-2p with a fault timeline: the T0
// port facing the sender in plane 1 goes down at 1.5 s and up at 4.5 s
// (mrc-switchd port faults: the NIC sees no carrier change and must find
// out from its losses). The windows are anchored to when the fault took
// effect (after_fault): on this loaded machine that was up to 1.6 s late. Host links are
// modelled at 25 Mbit/s per plane, far below what the NICs carry, so the
// rate is the port models' when the machine is not overloaded. The
// verdicts asserted here hold whatever the load: plane 1 carries nothing
// while its port is down (must PASS) and "plane 1 keeps half its rate"
// (must FAIL). "Half the total" is recomputed from the series but not
// asserted: at a load average of 30 the baseline window was once at 15 %
// of the capacity (the NIC not scheduled) and the ratio meaningless.
const short = `name: e2e
title: end to end on real daemons
topology:
  preset: clos-2p
  links:
    host: {capacity: 25Mbit, buffer: 64KiB, trim_threshold: 32KiB}
traffic:
  - {name: a, from: h0, to: h3, qps: 2, size: 32KiB, duration: 6s, verify: true}
faults:
  - {at: 1.5s, target: "p1-t0-0:d0", op: down}
  - {at: 4.5s, target: "p1-t0-0:d0", op: up}
sampling: {interval: 10ms}
expect:
  - {claim: "one plane of two: half", metric: ratio, series: "rx:h3", after_fault: 0, window: 0.3s..0.9s, baseline: 0.5s..1.4s, want: 0.5, tolerance: 0.1}
  - {claim: "must fail: plane 1 keeps half its rate while its port is down", metric: ratio, series: "rx:h3:p1", after_fault: 0, window: 0.2s..0.9s, baseline: 0.5s..1.4s, min: 0.5}
  - {claim: "plane 1 carries nothing while down", metric: ratio, series: "rx:h3:p1", after_fault: 0, window: 0.2s..0.9s, baseline: 0.5s..1.4s, max: 0.05}
  - {claim: "no QP error", metric: tool_errors, max: 0}
`

// TestRunEndToEnd runs a scenario with a fault timeline on real mrc-switchd
// and mrc-nicd processes and mrc-write-bw, and checks that the verdicts
// are the ones the sampled series give, including one that must fail.
func TestRunEndToEnd(t *testing.T) {
	if err := netns.Supported(); err != nil {
		if os.Getenv("MRC_TEST_REQUIRE_PRIV") == "1" {
			t.Fatalf("MRC_TEST_REQUIRE_PRIV=1 but: %v", err)
		}
		t.Skipf("skipping: %v", err)
	}
	bin := bins(t)
	s, err := scenario.Parse("e2e.yaml", []byte(short))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out := t.TempDir()
	var prog strings.Builder
	o := lab.Run(ctx, s, lab.Options{BinDir: bin, OutDir: out, Progress: &prog, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if o.Err != nil {
		t.Fatalf("run: %v\nprogress:\n%s", o.Err, prog.String())
	}
	// Torn down: none of the run's namespaces is left.
	for _, ns := range o.Plan.Namespaces {
		if netns.Exists(ns) {
			t.Errorf("namespace %s left after the run", ns)
		}
	}
	// The daemons' logs are kept, whole: each host's ends with its
	// daemon's last line, written as the teardown stopped it.
	for _, h := range o.Plan.Hosts {
		b, err := os.ReadFile(filepath.Join(out, "logs", h.Name+".log"))
		if err != nil {
			t.Errorf("%s's log not kept: %v", h.Name, err)
			continue
		}
		if !strings.Contains(string(b), "mrc-nicd running") || !strings.Contains(string(b), "mrc-nicd stopping") {
			t.Errorf("%s's kept log lacks the daemon's first or last line:\n%s", h.Name, b)
		}
	}
	if len(o.Faults) != 2 || o.Samples < 100 {
		t.Fatalf("%d faults applied, %d samples", len(o.Faults), o.Samples)
	}
	for _, f := range o.Faults {
		if d := f.T - f.At; d < 0 || d > 1900*time.Millisecond {
			t.Errorf("fault %s %s planned at %v, requested at %v, applied at %v", f.Target, f.Op, f.At, f.Sent, f.T)
		}
	}
	// The verdicts are the series': recompute the first one here.
	rx := o.Series["rx:h3"]
	ft := o.Faults[0].T
	want := rx.Mean(ft+300*time.Millisecond, ft+900*time.Millisecond) / rx.Mean(500*time.Millisecond, 1400*time.Millisecond)
	if math.Abs(o.Results[0].Measured-want) > 1e-9 {
		t.Errorf("verdict measured %v, the series give %v", o.Results[0].Measured, want)
	}
	for i, wantPass := range []bool{true, false, true, true} {
		if i == 0 {
			t.Logf("%s: %.3f (%s) — %s", o.Results[0].Claim, o.Results[0].Measured, o.Results[0].Bounds, o.Results[0].Detail)
			continue
		}
		r := o.Results[i]
		t.Logf("%s: %.3f %s (%s) pass=%v — %s", r.Claim, r.Measured, r.Unit, r.Bounds, r.Pass, r.Detail)
		if r.Pass != wantPass {
			t.Errorf("%q: pass=%v, want %v (%s)", r.Claim, r.Pass, wantPass, r.Detail)
		}
	}
	if o.Pass() {
		t.Error("the outcome passes although one expectation must fail")
	}
	path, err := report.Write(filepath.Join(out, "report"), o)
	if err != nil {
		t.Fatal(err)
	}
	md, _ := os.ReadFile(path)
	for _, w := range []string{"e2e — FAIL", "**FAIL**", "**PASS**", "fig-rx-h3.png"} {
		if !strings.Contains(string(md), w) {
			t.Errorf("report.md lacks %q:\n%s", w, md)
		}
	}
	if _, err := os.Stat(filepath.Join(out, "report", "fig-rx-h3.png")); err != nil {
		t.Error(err)
	}
	if !strings.Contains(prog.String(), "[e2e] t=") {
		t.Errorf("no progress line:\n%s", prog.String())
	}
}

// collectives is S7's form at test size: an all-reduce group on the pair
// preset, run as two variants (MRC and RoCE), each on its own testbed.
const collectives = `name: e2ecoll
topology:
  preset: pair
  links:
    host: {capacity: 100Mbit, buffer: 128KiB, ecn_threshold: 16KiB, trim_threshold: 64KiB, host_ecn: true}
  dcqcn_scale: 100
traffic:
  - {name: ar, tool: mrc-allreduce-perf, hosts: [h0, h1], size: 256KiB, iters: 2, check: true, timeout: 60s}
variants:
  - {name: mrc, transport: mrc}
  - {name: roce, transport: roce}
expect:
  - {claim: "MRC's busbw over RoCE's", metric: value, value: mrc.ar.busbw, of: roce.ar.busbw, min: 0}
  - {claim: "must fail: MRC 1000 × RoCE", metric: value, value: mrc.ar.busbw, of: roce.ar.busbw, min: 1000}
  - {claim: "MRC: ran, every element right", variant: mrc, metric: tool_errors, max: 0}
  - {claim: "RoCE: ran, every element right", variant: roce, metric: tool_errors, max: 0}
`

// TestRunCollectivesEndToEnd runs a collective group on real daemons in
// two variants and checks that the cross-run verdicts are computed from
// the tools' results (one must FAIL), that every variant's testbed is
// gone, and that the figures hold only named series (a group's host once
// drew an empty one: its per-plane series were not sampled).
func TestRunCollectivesEndToEnd(t *testing.T) {
	if err := netns.Supported(); err != nil {
		if os.Getenv("MRC_TEST_REQUIRE_PRIV") == "1" {
			t.Fatalf("MRC_TEST_REQUIRE_PRIV=1 but: %v", err)
		}
		t.Skipf("skipping: %v", err)
	}
	bin := bins(t)
	s, err := scenario.Parse("e2ecoll.yaml", []byte(collectives))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	out := t.TempDir()
	var prog strings.Builder
	o := lab.Run(ctx, s, lab.Options{BinDir: bin, OutDir: out, Progress: &prog, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if o.Err != nil || len(o.Variants) != 2 {
		t.Fatalf("run: %v (%d variants)\nprogress:\n%s", o.Err, len(o.Variants), prog.String())
	}
	if a, b := o.Variants[0].Plan, o.Variants[1].Plan; a.RunID != b.RunID || a.Prefix == b.Prefix {
		t.Errorf("variants' plans: run ids %#x and %#x, prefixes %s and %s: want one run id (the same ECMP draw) and two testbeds",
			a.RunID, b.RunID, a.Prefix, b.Prefix)
	}
	for _, v := range o.Variants {
		for _, ns := range v.Plan.Namespaces {
			if netns.Exists(ns) {
				t.Errorf("variant %s: namespace %s left after the run", v.Label, ns)
			}
		}
		for _, f := range v.Figures {
			for _, ser := range f.Series {
				if ser.Name == "" || len(ser.Points) == 0 {
					t.Errorf("variant %s: figure %q has an empty series %+v", v.Label, f.Title, ser.Name)
				}
			}
		}
	}
	mrc, roce := o.Values["mrc.ar.busbw"], o.Values["roce.ar.busbw"]
	if mrc <= 0 || roce <= 0 || o.Values["mrc.ar.wrong"] != 0 || o.Values["roce.ar.wrong"] != 0 {
		t.Fatalf("values %v: want busbw > 0 and #wrong 0 for both", o.Values)
	}
	var ratio, fail *verdict.Result
	for i, r := range o.Results {
		t.Logf("%s: %.4g %s (%s) pass=%v — %s", r.Claim, r.Measured, r.Unit, r.Bounds, r.Pass, r.Detail)
		switch r.Claim {
		case "MRC's busbw over RoCE's":
			ratio = &o.Results[i]
		case "must fail: MRC 1000 × RoCE":
			fail = &o.Results[i]
		default:
			if !r.Pass {
				t.Errorf("%q failed: %s", r.Claim, r.Detail)
			}
		}
	}
	if ratio == nil || fail == nil || len(o.Results) != 4 {
		t.Fatalf("%d results, want the 2 per-run and 2 cross-run claims", len(o.Results))
	}
	if math.Abs(ratio.Measured-mrc/roce) > 1e-9 || !ratio.Pass {
		t.Errorf("ratio verdict %v (pass %v), the values give %v", ratio.Measured, ratio.Pass, mrc/roce)
	}
	if fail.Pass {
		t.Error("MRC 1000 × RoCE passed")
	}
	path, err := report.Write(filepath.Join(out, "report"), o)
	if err != nil {
		t.Fatal(err)
	}
	md, _ := os.ReadFile(path)
	for _, w := range []string{"e2ecoll — FAIL", "| mrc.ar.busbw |", "fig-values-busbw.png", "[roce/report.md]"} {
		if !strings.Contains(string(md), w) {
			t.Errorf("report.md lacks %q:\n%s", w, md)
		}
	}
}
