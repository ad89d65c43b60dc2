package scenario

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/softmrc/softmrc/testbed/plan"
	"github.com/softmrc/softmrc/testbed/run"
	"github.com/softmrc/softmrc/testbed/topo"
)

const good = `name: t1
title: a test
topology:
  preset: clos-2p
  links:
    host: {capacity: 100Mbit, buffer: 256KiB}
traffic:
  - {name: a, from: h0, to: h3, qps: 2, size: 32KiB, duration: 3s, verify: true}
faults:
  - {at: 1s, target: h0:p1, op: down}
  - {at: 2s, target: h0:p1, op: up}
random_faults:
  seed: 7
  from: 0.5s
  until: 2.5s
  every: 100ms..500ms
  hold: 200ms
  targets: [fabric-links, p0-t1-1]
  ops: [blackhole, loss=5%]
sampling: {interval: 20ms}
expect:
  - {claim: half, metric: ratio, series: "rx:h3", window: 1.2s..1.9s, baseline: 0.2s..0.9s, want: 0.5, tolerance: 0.05}
  - {claim: cap, metric: ratio, series: "rx:h3:p0", window: 0.2s..0.9s, baseline: capacity, min: 0.9}
  - {claim: rec, metric: recovery_ms, series: "tx:p0-t0-1:d1", window: 2.3s..2.9s, at: 2s, max: 300}
  - {claim: ok, metric: tool_errors, max: 0}
`

// TestParseJainSeries: metric jain over a list of series is a per-run
// claim (judged on the run's series over its window), not a cross-run one.
func TestParseJainSeries(t *testing.T) {
	f := strings.Replace(good, "  - {claim: ok, metric: tool_errors, max: 0}\n", "  - {claim: ok, metric: tool_errors, max: 0}\n  - {claim: fair, metric: jain, series: [rx:h3, goodput:h0], window: 1s..2s, min: 0.9}\n", 1)
	s, err := Parse("j.yaml", []byte(f))
	if err != nil {
		t.Fatal(err)
	}
	e := s.Expect[len(s.Expect)-1]
	if len(e.SeriesList) != 2 || e.SeriesList[1] != "goodput:h0" || e.Series != "" || e.CrossRun() || e.Window.To != 2*time.Second {
		t.Errorf("jain over series parsed as %+v (cross-run %v)", e, e.CrossRun())
	}
}

func TestParseGood(t *testing.T) {
	s, err := Parse("good.yaml", []byte(good))
	if err != nil {
		t.Fatal(err)
	}
	if s.Interval != 20*time.Millisecond || len(s.Traffic) != 1 || s.Traffic[0].Size != 32<<10 || s.Traffic[0].QPs != 2 || !s.Traffic[0].Verify {
		t.Errorf("parsed %+v", s)
	}
	if s.Traffic[0].TxDepth != 16 {
		t.Errorf("tx_depth default %d", s.Traffic[0].TxDepth)
	}
	if len(s.Faults) != 2 || s.Faults[0].Op.Kind != "down" || s.Faults[1].At != 2*time.Second {
		t.Errorf("faults %+v", s.Faults)
	}
	if r := s.Random; r == nil || r.Seed != 7 || r.MinGap != 100*time.Millisecond || r.MaxGap != 500*time.Millisecond || len(r.Ops) != 2 || r.Ops[1].Loss != 0.05 {
		t.Errorf("random %+v", s.Random)
	}
	if len(s.Expect) != 4 || !s.Expect[1].BaselineCapacity || *s.Expect[0].Tolerance != 0.05 || s.Expect[2].Level != 0.9 {
		t.Errorf("expect %+v", s.Expect)
	}
	if s.Topology.NICPacingBps != 0 {
		t.Errorf("nic_pacing %d, want 0 (the host capacity)", s.Topology.NICPacingBps)
	}
	paced, err := Parse("paced.yaml", []byte(strings.Replace(good, "preset: clos-2p\n", "preset: clos-2p\n  nic_pacing: 106Mbit\n", 1)))
	if err != nil || paced.Topology.NICPacingBps != 106e6 {
		t.Errorf("nic_pacing: %v, %v", paced.Topology, err)
	}
	tp, err := s.Topology.Resolve()
	if err != nil || !tp.NICs || tp.Host.CapacityBps != 100e6 || tp.Planes != 2 {
		t.Errorf("topology %+v, %v", tp, err)
	}
	if s.End() != 3*time.Second {
		t.Errorf("end %v", s.End())
	}
}

// TestParseErrors is the table of documented errors (docs/lab.md).
func TestParseErrors(t *testing.T) {
	base := strings.Replace(good, "random_faults:\n  seed: 7\n  from: 0.5s\n  until: 2.5s\n  every: 100ms..500ms\n  hold: 200ms\n  targets: [fabric-links, p0-t1-1]\n  ops: [blackhole, loss=5%]\n", "", 1)
	rep := func(old, new string) string {
		if !strings.Contains(base, old) {
			t.Fatalf("test table: %q not in the base file", old)
		}
		return strings.Replace(base, old, new, 1)
	}
	cases := []struct {
		name, file, want string
	}{
		{"empty", "", "x.yaml: empty scenario file (allowed: name, title"},
		{"not a mapping", "- a\n- b\n", "x.yaml:1: the file must be a YAML mapping"},
		{"syntax", "name: [\n", "x.yaml:1: YAML syntax:"},
		{"unknown field", rep("title: a test", "titel: a test"), `x.yaml:2: titel: unknown field "titel" (allowed: name, title, why, topology, traffic, faults, random_faults, sampling, duration, expect, variants)`},
		{"twice", rep("title: a test", "title: a\ntitle: b"), "x.yaml:3: title: field given twice"},
		{"bad name", rep("name: t1", "name: T 1"), `x.yaml:1: name: bad name "T 1" (allowed: 1-40 characters`},
		{"no name", rep("name: t1\n", ""), "x.yaml:1: name: missing"},
		{"bad preset", rep("preset: clos-2p", "preset: clos-3p"), `x.yaml:4: topology.preset: unknown value "clos-3p" (allowed: pair | clos-2p | clos-4p | clos-8p)`},
		{"no topology", rep("topology:\n  preset: clos-2p\n  links:\n    host: {capacity: 100Mbit, buffer: 256KiB}\n", ""), "x.yaml:1: topology: missing: name a preset or a topology file"},
		{"bad capacity", rep("capacity: 100Mbit", "capacity: fast"), `x.yaml:6: topology.links.host.capacity: bad value "fast" (allowed: a rate such as`},
		{"nic_pacing 0", rep("preset: clos-2p\n", "preset: clos-2p\n  nic_pacing: 0\n"), `x.yaml:5: topology.nic_pacing: 0 would leave the NICs unpaced (allowed: a rate above 0`},
		{"nic_pacing not a rate", rep("preset: clos-2p\n", "preset: clos-2p\n  nic_pacing: fast\n"), `x.yaml:5: topology.nic_pacing: bad value "fast" (allowed: a rate above 0`},
		{"capacity without buffer", rep("capacity: 100Mbit, buffer: 256KiB", "capacity: 100Mbit"), "x.yaml:3: topology: "},
		{"jain series list with another metric", rep("{claim: ok, metric: tool_errors, max: 0}", "{claim: ok, metric: ratio, series: [rx:h3, rx:h0], window: 1s..2s, baseline: capacity, min: 0.9}"), "x.yaml:17: expect[3].series: a list of series given for metric ratio (allowed: one series name; a list only with metric jain)"},
		{"jain series one", rep("{claim: ok, metric: tool_errors, max: 0}", "{claim: ok, metric: jain, series: [rx:h3], window: 1s..2s, min: 0.9}"), "x.yaml:17: expect[3].series: metric jain needs at least 2 series"},
		{"jain series no window", rep("{claim: ok, metric: tool_errors, max: 0}", "{claim: ok, metric: jain, series: [rx:h3, goodput:h0], min: 0.9}"), "x.yaml:17: expect[3].window: missing for metric jain over series"},
		{"jain series and values", rep("{claim: ok, metric: tool_errors, max: 0}", "{claim: ok, metric: jain, series: [rx:h3, goodput:h0], values: [a.rate, a.rate], window: 1s..2s, min: 0.9}"), "x.yaml:17: expect[3].values: metric jain given both"},
		{"jain series unknown", rep("{claim: ok, metric: tool_errors, max: 0}", "{claim: ok, metric: jain, series: [rx:h3, goodput:h9], window: 1s..2s, min: 0.9}"), "x.yaml:17: expect[3].series[1]:"},
		{"jain series uplinks", rep("{claim: ok, metric: tool_errors, max: 0}", "{claim: ok, metric: jain, series: [rx:h3, uplinks:p0-t0-0], window: 1s..2s, min: 0.9}"), `x.yaml:17: expect[3].series[1]: "uplinks:p0-t0-0" is not a rate series`},
		{"no traffic", rep("traffic:\n  - {name: a, from: h0, to: h3, qps: 2, size: 32KiB, duration: 3s, verify: true}\n", ""), "x.yaml:1: traffic: missing: a scenario drives traffic"},
		{"flow host unknown", rep("to: h3", "to: h9"), "x.yaml:8: traffic[0]: host h9 is not in the topology (allowed: h0 .. h3)"},
		{"flow bad host", rep("to: h3", "to: host3"), `x.yaml:8: traffic[0].to: bad host "host3" (allowed: a host name h0, h1, ...)`},
		{"flow to itself", rep("to: h3", "to: h0"), "x.yaml:8: traffic[0].to: flow a goes from h0 to itself"},
		{"flow qps", rep("qps: 2", "qps: 0"), "x.yaml:8: traffic[0].qps: 0 is out of range (allowed: an integer from 1 to 256)"},
		{"flow size", rep("size: 32KiB", "size: 2GiB"), `x.yaml:8: traffic[0].size: bad size "2GiB"`},
		{"flow fractional duration", rep("duration: 3s", "duration: 2.5s"), "x.yaml:8: traffic[0].duration: 2.5s is not a whole number of seconds (allowed: whole seconds"},
		{"flow no duration", rep(", duration: 3s", ""), "x.yaml:8: traffic[0].duration: missing"},
		{"flow tx_depth", rep("qps: 2,", "qps: 2, tx_depth: 0,"), "x.yaml:8: traffic[0].tx_depth: 0 is out of range (allowed: an integer from 1 to 8192)"},
		{"flow tool", rep("qps: 2,", "tool: ib_write_bw, qps: 2,"), `x.yaml:8: traffic[0].tool: unknown value "ib_write_bw" (allowed: mrc-write-bw | mrc-allreduce-perf | mrc-alltoall-perf)`},
		{"fault op", rep("op: down", "op: explode"), `x.yaml:10: faults[0].op: bad op "explode" (allowed: down | up | blackhole`},
		{"fault loss", rep("op: down", "op: loss=200%"), `x.yaml:10: faults[0].op: bad op "loss=200%"`},
		{"fault target", rep("target: h0:p1, op: down", "target: h0:p7, op: down"), `x.yaml:10: faults[0].target: unknown target "h0:p7" (allowed: a link (e.g. h0--p0-t0-0)`},
		{"fault after run", rep("at: 2s", "at: 3s"), "x.yaml:11: faults[1].at: 3s is after the run (allowed: a time before the end of the traffic (3s))"},
		{"fault no at", rep("at: 2s, ", ""), "x.yaml:11: faults[1].at: missing"},
		{"fault bad at", rep("at: 2s", "at: soon"), `x.yaml:11: faults[1].at: bad duration "soon"`},
		{"interval", rep("interval: 20ms", "interval: 100us"), "x.yaml:12: sampling.interval: 100µs is out of range (allowed: a duration from 1ms to 1s"},
		{"metric", rep("metric: ratio, series: \"rx:h3\",", "metric: speed, series: \"rx:h3\","), `x.yaml:14: expect[0].metric: unknown value "speed" (allowed: ratio | recovery_ms | dip | tool_errors | qp_loss_bound | value | jain | imbalance)`},
		{"no bound", rep(", want: 0.5, tolerance: 0.05", ""), "x.yaml:14: expect[0]: no bound: say what passes (allowed: want (+ tolerance), min or max; or report: true to show the value without a verdict)"},
		{"report with a bound", rep(", want: 0.5, tolerance: 0.05", ", report: true, min: 0.5"), "x.yaml:14: expect[0].report: a report-only claim takes no bound (allowed: report: true with no want, tolerance, min or max"},
		{"report with want", rep(", want: 0.5, tolerance: 0.05", ", want: 0.5, report: true"), "x.yaml:14: expect[0].report: a report-only claim takes no bound"},
		{"report not bool", rep(", want: 0.5, tolerance: 0.05", ", report: maybe"), `x.yaml:14: expect[0].report: "maybe" is not a boolean`},
		{"value without a claim", rep("{claim: ok, metric: tool_errors, max: 0}", "{metric: value, value: a.rate, min: 1}"), "x.yaml:17: expect[3].claim: missing"},
		{"flow rate 0", rep("qps: 2,", "qps: 2, rate: 0,"), `x.yaml:8: traffic[0].rate: bad rate "0" (allowed: mrc-write-bw --rate_limit: a rate above 0`},
		{"flow rate not a rate", rep("qps: 2,", "qps: 2, rate: slow,"), `x.yaml:8: traffic[0].rate: bad rate "slow"`},
		{"tolerance alone", rep("want: 0.5, ", ""), "x.yaml:14: expect[0].tolerance: tolerance without want"},
		{"no baseline", rep(", baseline: 0.2s..0.9s", ""), "x.yaml:14: expect[0].baseline: missing for metric ratio"},
		{"baseline list bad", rep("baseline: 0.2s..0.9s", "baseline: [0.2s..0.9s, soon]"), `x.yaml:14: expect[0].baseline[1]: bad window "soon"`},
		{"baseline list empty", rep("baseline: 0.2s..0.9s", "baseline: []"), "x.yaml:14: expect[0].baseline: an empty list"},
		{"baseline list after run", rep("baseline: 0.2s..0.9s", "baseline: [0.2s..0.9s, 2s..4s]"), "x.yaml:14: expect[0].baseline[1]: 2s..4s ends after the run"},
		{"bad window", rep("window: 1.2s..1.9s", "window: 1.9s..1.2s"), `x.yaml:14: expect[0].window: bad window "1.9s..1.2s" (allowed: FROM..TO with durations, FROM < TO`},
		{"window after run", rep("window: 1.2s..1.9s", "window: 1.2s..4s"), "x.yaml:14: expect[0].window: 1.2s..4s ends after the run"},
		{"series", rep(`series: "rx:h3",`, `series: "rx:h7",`), `x.yaml:14: expect[0].series: series "rx:h7": no host h7 (allowed: rx:HOST`},
		{"series plane", rep(`"rx:h3:p0"`, `"rx:h3:p5"`), `x.yaml:15: expect[1].series: series "rx:h3:p5": no plane p5 (p0 .. p1)`},
		{"recovery without at", rep("at: 2s, max: 300", "max: 300"), "x.yaml:16: expect[2].at: missing for metric recovery_ms"},
		{"level", rep("at: 2s, max: 300", "at: 2s, level: 2, max: 300"), "x.yaml:16: expect[2].level: 2 is out of range (allowed: a number from 0.01 to 1)"},
		{"stat", rep("want: 0.5,", "stat: p99, want: 0.5,"), `x.yaml:14: expect[0].stat: unknown value "p99" (allowed: mean | median)`},
		{"after_fault index", rep("at: 2s, max: 300", "after_fault: 5, max: 300"), "x.yaml:16: expect[2].after_fault: there is no faults[5] (allowed: an index into faults, 0 .. 1)"},
		{"after_fault window", rep("window: 2.3s..2.9s, at: 2s", "window: 0.3s..1.9s, after_fault: 1"), "x.yaml:16: expect[2].window: 2.3s..3.9s ends after the run"},
		{"want not a number", rep("want: 0.5", "want: half"), `x.yaml:14: expect[0].want: "half" is not a number`},
		{"random gap", strings.Replace(good, "every: 100ms..500ms", "every: 1ms..5ms", 1), "x.yaml:16: random_faults.every: gap 1ms is too short"},
		{"random target", strings.Replace(good, "[fabric-links, p0-t1-1]", "[all-the-things]", 1), `x.yaml:13: random_faults.targets[0]: unknown target "all-the-things" (allowed: host-links, fabric-links, nic-ports, t1-switches or a link`},
		{"random op clear", strings.Replace(good, "[blackhole, loss=5%]", "[clear]", 1), `x.yaml:19: random_faults.ops[0]: "clear" repairs`},
		{"random until", strings.Replace(good, "until: 2.5s", "until: 0.2s", 1), "x.yaml:13: random_faults.until: until 200ms is not after from 500ms"},
		{"random no hold", strings.Replace(good, "  hold: 200ms\n", "", 1), "x.yaml:13: random_faults.hold: missing"},
		{"host_ecn not bool", rep("buffer: 256KiB}", "buffer: 256KiB, host_ecn: maybe}"), `x.yaml:6: topology.links.host.host_ecn: "maybe" is not a boolean`},
		{"host_ecn without threshold", rep("buffer: 256KiB}", "buffer: 256KiB, host_ecn: true}"), "x.yaml:3: topology: "},
		{"bad delay", rep("buffer: 256KiB}", "buffer: 256KiB, delay: forever}"), `x.yaml:6: topology.links.host.delay: bad delay "forever"`},
		{"dcqcn_scale", rep("preset: clos-2p\n", "preset: clos-2p\n  dcqcn_scale: 0.5\n"), "x.yaml:5: topology.dcqcn_scale: 0.5 is out of range (allowed: a number from 1 to 1e+06)"},
		{"cc_scale", rep("preset: clos-2p\n", "preset: clos-2p\n  cc_scale: 0\n"), "x.yaml:5: topology.cc_scale: 0 is out of range (allowed: a number from 1 to 1e+06)"},
		{"roce_ack_timeout", rep("preset: clos-2p\n", "preset: clos-2p\n  roce_ack_timeout: -1s\n"), `bad roce_ack_timeout "-1s"`},
		{"topology file missing", rep("preset: clos-2p", "file: nowhere.yaml"), "x.yaml:4: topology.file: open nowhere.yaml: no such file"},
		{"variant without variants", rep("max: 0}", "max: 0, variant: a}"), "x.yaml:17: expect[3].variant: this scenario has no variants"},
		{"value without value", rep("{claim: ok, metric: tool_errors, max: 0}", "{claim: ok, metric: value, min: 1}"), "x.yaml:17: expect[3].value: missing for metric value"},
		{"value of unknown flow", rep("{claim: ok, metric: tool_errors, max: 0}", "{claim: ok, metric: value, value: b.rate, min: 1}"), `x.yaml:17: expect[3]: value "b.rate": the run has no flow "b"`},
		{"value bad key", rep("{claim: ok, metric: tool_errors, max: 0}", "{claim: ok, metric: value, value: a.busbw, min: 1}"), `x.yaml:17: expect[3]: value "a.busbw": flow a (mrc-write-bw) has rate, not "busbw"`},
		{"value with variant prefix", rep("{claim: ok, metric: tool_errors, max: 0}", "{claim: ok, metric: value, value: v.a.rate, min: 1}"), `value "v.a.rate": want FLOW.KEY (this scenario has no variants)`},
		{"jain of one", rep("{claim: ok, metric: tool_errors, max: 0}", "{claim: ok, metric: jain, values: [a.rate], min: 0.9}"), "x.yaml:17: expect[3].values: metric jain needs at least 2 values"},
		{"values on a ratio", rep("want: 0.5, tolerance: 0.05}", "want: 0.5, tolerance: 0.05, values: [a.rate, a.rate]}"), "x.yaml:14: expect[0].values: values given for metric ratio"},
		{"hosts on mrc-write-bw", rep("qps: 2,", "hosts: [h0, h1], qps: 2,"), "x.yaml:8: traffic[0].tool: hosts, iters, warmup, check, slots, slot_bytes and timeout are for collective tools, not mrc-write-bw"},
		{"slots on mrc-write-bw", rep("qps: 2,", "slot_bytes: 32KiB, qps: 2,"), "x.yaml:8: traffic[0].tool: hosts, iters, warmup, check, slots, slot_bytes and timeout are for collective tools, not mrc-write-bw"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse("x.yaml", []byte(c.file))
			if err == nil {
				t.Fatalf("no error; want %q", c.want)
			}
			if !strings.HasPrefix(err.Error(), c.want) && !strings.Contains(err.Error(), c.want) {
				t.Errorf("error\n  %v\nwant it to contain\n  %s", err, c.want)
			}
		})
	}
}

// TestParseEVsAndCapacityOf: S6's flow option evs (mrc-write-bw --evs), the
// flow option transport (mrc-write-bw --transport) and the baseline "capacity of SERIES".
func TestParseEVsAndCapacityOf(t *testing.T) {
	src := strings.Replace(good, "qps: 2,", `qps: 2, evs: "0.0,0.1",`, 1)
	src = strings.Replace(src, "baseline: capacity, min: 0.9", "baseline: capacity of tx:p0-t0-0:u0, min: 0.9", 1)
	s, err := Parse("x.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	if s.Traffic[0].EVs != "0.0,0.1" {
		t.Errorf("evs %q", s.Traffic[0].EVs)
	}
	if s.Traffic[0].Transport != "" {
		t.Errorf("transport %q by default, want \"\" (the tool's default, mrc)", s.Traffic[0].Transport)
	}
	if r, err := Parse("x.yaml", []byte(strings.Replace(good, "qps: 2,", "qps: 2, transport: roce,", 1))); err != nil || r.Traffic[0].Transport != "roce" {
		t.Errorf("transport: roce: %v, %v", err, r)
	}
	if e := s.Expect[1]; !e.BaselineCapacity || e.CapacityOf != "tx:p0-t0-0:u0" {
		t.Errorf("capacity of: %+v", e)
	}
	for _, c := range []struct{ name, from, to, want string }{
		{"bad evs", "qps: 2,", `qps: 2, evs: "0.x",`, `x.yaml:8: traffic[0].evs: "0.x": T1 "x" is not 0..255`},
		{"bad transport", "qps: 2,", `qps: 2, transport: rxe,`, `x.yaml:8: traffic[0].transport: `},
		{"capacity of unknown port", "baseline: capacity, min", "baseline: capacity of tx:p0-t0-0:u9, min", "x.yaml:23: expect[1].baseline: series \"tx:p0-t0-0:u9\": no switch port"},
	} {
		_, err := Parse("x.yaml", []byte(strings.Replace(good, c.from, c.to, 1)))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
}

// TestParseBeforeTrafficAndQPLossBound: S9's fields. A fault with
// before_traffic: true has no time and comes first in the timeline;
// qp_loss_bound reads the per-QP counters of a sending host (qp:HOST) and
// nothing else does.
func TestParseBeforeTrafficAndQPLossBound(t *testing.T) {
	src := strings.Replace(good, "faults:\n", "faults:\n  - {before_traffic: true, target: p1-t0-0--p1-t1-1, op: blackhole}\n", 1)
	src = strings.Replace(src, "  - {claim: ok, metric: tool_errors, max: 0}\n", "  - {claim: ok, metric: tool_errors, max: 0}\n  - {claim: s9, metric: qp_loss_bound, series: \"qp:h0\", window: 0s..2s, max: 1}\n", 1)
	s, err := Parse("x.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	if f := s.Faults[0]; !f.BeforeTraffic || f.At != 0 || f.Target != "p1-t0-0--p1-t1-1" {
		t.Errorf("before_traffic fault %+v", f)
	}
	if s.Faults[1].BeforeTraffic {
		t.Errorf("faults[1] %+v is not before the traffic", s.Faults[1])
	}
	if e := s.Expect[4]; e.Metric != MetricQPLossBound || e.Series != "qp:h0" || e.Window.To != 2*time.Second || *e.Max != 1 {
		t.Errorf("qp_loss_bound %+v", e)
	}
	// A regular fault at 0s stays after the one before the traffic.
	at0 := strings.Replace(src, "faults:\n", "faults:\n  - {at: 0s, target: h0:p0, op: down}\n", 1)
	s0, err := Parse("x.yaml", []byte(at0))
	if err != nil {
		t.Fatal(err)
	}
	tl, err := s0.Timeline(mustPlan(t, s0))
	if err != nil {
		t.Fatal(err)
	}
	if !tl[0].BeforeTraffic || tl[1].BeforeTraffic || tl[1].Target != "h0:p0" {
		t.Errorf("timeline starts %+v, %+v; want the before_traffic fault first", tl[0], tl[1])
	}
	for _, c := range []struct{ name, from, to, want string }{
		{"at and before_traffic", "{before_traffic: true,", "{before_traffic: true, at: 0s,", "x.yaml:10: faults[0].at: a fault before the traffic has no time (allowed: at or before_traffic: true, not both)"},
		{"before_traffic not a bool", "before_traffic: true", "before_traffic: soon", `x.yaml:10: faults[0].before_traffic:`},
		{"fault neither", "{before_traffic: true, ", "{", "x.yaml:10: faults[0].at: missing (allowed: a duration from the traffic start, e.g. 2.5s, or before_traffic: true)"},
		{"qp series for a ratio", `metric: qp_loss_bound, series: "qp:h0"`, `metric: ratio, baseline: capacity, series: "qp:h0"`, `expect[4].series: "qp:h0" is only for metric qp_loss_bound`},
		{"rate series for qp_loss_bound", `series: "qp:h0"`, `series: "rx:h3"`, `expect[4].series: metric qp_loss_bound counts per QP, not series "rx:h3" (allowed: qp:HOST`},
		{"qp of a receiver", `series: "qp:h0"`, `series: "qp:h3"`, "expect[4].series: h3 sends no flow: its QPs lose nothing"},
		{"qp of no host", `series: "qp:h0"`, `series: "qp:h9"`, `expect[4].series: series "qp:h9": no host h9`},
		{"qp_loss_bound without window", `, window: 0s..2s`, ``, "expect[4].window: missing for metric qp_loss_bound"},
	} {
		if !strings.Contains(src, c.from) {
			t.Fatalf("%s: %q not in the file", c.name, c.from)
		}
		_, err := Parse("x.yaml", []byte(strings.Replace(src, c.from, c.to, 1)))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
}

func mustPlan(t *testing.T, s *Scenario) *plan.Plan {
	t.Helper()
	tp, err := s.Topology.Resolve()
	if err != nil {
		t.Fatal(err)
	}
	pl, err := plan.Build(tp, plan.Options{RunDir: "/run/softmrc/test"})
	if err != nil {
		t.Fatal(err)
	}
	return pl
}

// The S7/S8 format: collectives, a topology file next to the scenario,
// variants, and claims on measured values.
const variantsFile = `name: v
topology:
  file: topo/one.yaml
  dcqcn_scale: 1000
traffic:
  - {name: ar, tool: mrc-allreduce-perf, hosts: [h0, h2, h1, h3], size: 2MiB, iters: 3, check: true}
  - {name: a2a, tool: mrc-alltoall-perf, hosts: [h0, h1, h2, h3], size: 1MiB, warmup: 3, slots: 32, slot_bytes: 16KiB}
variants:
  - {name: mrc, transport: mrc}
  - name: roce16
    transport: roce
    qps: 16
    topology: {file: topo/one.yaml}
    traffic: [ar]
    faults: [{before_traffic: true, target: p0-t0-0--p0-t1-0, op: loss=1%}]
expect:
  - {claim: mrc beats roce, metric: value, value: mrc.ar.busbw, of: roce16.ar.busbw, min: 1}
  - {claim: fair, metric: jain, variant: mrc, values: [ar.busbw, a2a.busbw], min: 0.9}
  - {claim: runs, metric: tool_errors, variant: roce16, max: 0}
  - {claim: sprays, metric: imbalance, series: "uplinks:p0-t0-1", variant: mrc, max: 1.1}
`

const oneTopo = `mode: ecmp
planes: 1
t0_per_plane: 2
t1_per_plane: 2
hosts_per_t0: 2
links:
  host: {capacity: 80Mbit, buffer: 128KiB, ecn_threshold: 16KiB, trim_threshold: 64KiB, host_ecn: true}
`

func readTopo(p string) ([]byte, error) {
	if p == "dir/topo/one.yaml" {
		return []byte(oneTopo), nil
	}
	return nil, fmt.Errorf("open %s: no such file", p)
}

// TestRoCEAckTimeout: topology.roce_ack_timeout (S7: NCCL's) is parsed.
func TestRoCEAckTimeout(t *testing.T) {
	src := strings.Replace(variantsFile, "dcqcn_scale: 1000\n", "dcqcn_scale: 1000\n  roce_ack_timeout: 4.295s\n", 1)
	s, err := ParseWith("dir/v.yaml", []byte(src), readTopo)
	if err != nil {
		t.Fatal(err)
	}
	if s.Topology.RoCEAckTimeout != 4295*time.Millisecond {
		t.Fatalf("roce_ack_timeout %v, want 4.295s", s.Topology.RoCEAckTimeout)
	}
}

// TestDCQCNTarget: topology.dcqcn_target (S7's lossless RoCE plane: mlx5's
// rule) is parsed, and only its two rules are allowed.
func TestDCQCNTarget(t *testing.T) {
	src := strings.Replace(variantsFile, "dcqcn_scale: 1000\n", "dcqcn_scale: 1000\n  dcqcn_target: mlx5\n", 1)
	s, err := ParseWith("dir/v.yaml", []byte(src), readTopo)
	if err != nil {
		t.Fatal(err)
	}
	if s.Topology.DCQCNTarget != "mlx5" {
		t.Fatalf("dcqcn_target %q, want mlx5", s.Topology.DCQCNTarget)
	}
	src = strings.Replace(variantsFile, "dcqcn_scale: 1000\n", "dcqcn_scale: 1000\n  dcqcn_target: cx7\n", 1)
	if _, err := ParseWith("dir/v.yaml", []byte(src), readTopo); err == nil || !strings.Contains(err.Error(), "topology.dcqcn_target") || !strings.Contains(err.Error(), "mlx5") {
		t.Fatalf("dcqcn_target cx7: %v, want an error naming the field and the rules", err)
	}
}

// TestCCScale: topology.cc_scale (S7: MRC's CC slowed to 80 Mbit/s) is
// parsed; a variant that replaces the topology without it has none.
func TestCCScale(t *testing.T) {
	src := strings.Replace(variantsFile, "dcqcn_scale: 1000\n", "dcqcn_scale: 1000\n  cc_scale: 1250\n", 1)
	s, err := ParseWith("dir/v.yaml", []byte(src), readTopo)
	if err != nil {
		t.Fatal(err)
	}
	if s.Topology.CCScale != 1250 {
		t.Fatalf("cc_scale %v, want 1250", s.Topology.CCScale)
	}
	for i, want := range []float64{1250, 0} {
		if r := s.Apply(s.Variants[i]); r.Topology.CCScale != want {
			t.Errorf("variant %s: cc_scale %v, want %v", r.Name, r.Topology.CCScale, want)
		}
	}
}

func TestParseVariants(t *testing.T) {
	s, err := ParseWith("dir/v.yaml", []byte(variantsFile), readTopo)
	if err != nil {
		t.Fatal(err)
	}
	if s.Topology.File != "dir/topo/one.yaml" || s.Topology.DCQCNScale != 1000 || len(s.Variants) != 2 {
		t.Fatalf("parsed %+v", s)
	}
	ar := s.Traffic[0]
	if !ar.IsCollective() || ar.Iters != 3 || !ar.Check || ar.Size != 2<<20 || ar.Timeout != 2*time.Minute || len(ar.Hosts) != 4 {
		t.Errorf("collective %+v", ar)
	}
	if a2a := s.Traffic[1]; a2a.Iters != 5 || a2a.Check || a2a.Warmup != 3 || a2a.Slots != 32 || a2a.SlotBytes != 16<<10 {
		t.Errorf("collective defaults %+v: want iters 5, 3 warm-ups, check off, 32 slots of 16 KiB", a2a)
	}
	if ar.Slots != 0 || ar.SlotBytes != 0 || ar.Warmup != 1 {
		t.Errorf("collective %+v: want the defaults: slots and slot_bytes 0 (the tool's), warmup 1", ar)
	}
	tp, err := s.Topology.Resolve()
	if err != nil || tp.Planes != 1 || !tp.Host.HostECN || !tp.NICs {
		t.Errorf("topology file %+v, %v", tp, err)
	}
	if s.End() != 0 {
		t.Errorf("end %v: collectives alone have no planned end", s.End())
	}
	r := s.Apply(s.Variants[1])
	if r.Name != "v-roce16" || len(r.Traffic) != 1 || r.Traffic[0].Transport != "roce" || r.Traffic[0].QPs != 16 || len(r.Faults) != 1 || r.Topology.DCQCNScale != 0 {
		t.Errorf("variant roce16: %+v", r)
	}
	if len(r.Expect) != 1 || r.Expect[0].Metric != MetricToolErrors || r.Expect[0].Variant != "" {
		t.Errorf("variant roce16 expects %+v: want its tool_errors only", r.Expect)
	}
	if m := s.Apply(s.Variants[0]); len(m.Traffic) != 2 || len(m.Expect) != 1 || m.Expect[0].Metric != MetricImbalance || m.Traffic[1].Transport != "mrc" {
		t.Errorf("variant mrc: %+v", m)
	}
	if full, flow, key, err := s.ResolveValue("mrc", "ar.busbw"); err != nil || full != "mrc.ar.busbw" || flow != "ar" || key != "busbw" {
		t.Errorf("ResolveValue: %q %q %q %v", full, flow, key, err)
	}

	rep := func(old, new string) string {
		if !strings.Contains(variantsFile, old) {
			t.Fatalf("test table: %q not in the file", old)
		}
		return strings.Replace(variantsFile, old, new, 1)
	}
	for _, c := range []struct{ name, file, want string }{
		{"collective without hosts", rep("hosts: [h0, h2, h1, h3], ", ""), "dir/v.yaml:6: traffic[0].hosts: a collective needs a group of at least 2 hosts"},
		{"collective host twice", rep("[h0, h2, h1, h3]", "[h0, h2, h0]"), "dir/v.yaml:6: traffic[0].hosts[2]: host h0 twice in the group"},
		{"collective with from", rep("hosts: [h0, h2, h1, h3],", "from: h0, hosts: [h0, h2, h1, h3],"), "dir/v.yaml:6: traffic[0]: mrc-allreduce-perf runs on a group: from, to, duration"},
		{"slot size not a multiple of 4", rep("slot_bytes: 16KiB", "slot_bytes: 1001"), `dir/v.yaml:7: traffic[1].slot_bytes: bad slot size "1001" (allowed: a multiple of 4 bytes up to 16MiB, e.g. 32KiB)`},
		{"too many slots", rep("slots: 32", "slots: 65"), "dir/v.yaml:7: traffic[1].slots:"},
		{"collective with rate", rep("hosts: [h0, h2, h1, h3],", "rate: 10Mbit, hosts: [h0, h2, h1, h3],"), "evs and rate are mrc-write-bw's"},
		{"collective host unknown", rep("[h0, h1, h2, h3]", "[h0, h1, h7]"), "dir/v.yaml:7: traffic[1]: variant mrc: host h7 is not in the topology"},
		{"variant unknown flow", rep("traffic: [ar]", "traffic: [ar, bulk]"), `dir/v.yaml:10: variants[1].traffic[1]: no flow "bulk"`},
		{"variant twice", rep("name: roce16", "name: mrc"), `dir/v.yaml:10: variants[1].name: variant "mrc" given twice`},
		{"variant no name", rep("{name: mrc, transport: mrc}", "{transport: mrc}"), "dir/v.yaml:9: variants[0].name: missing"},
		{"variant unknown field", rep("qps: 16", "qp: 16"), `dir/v.yaml:12: variants[1].qp: unknown field "qp" (allowed: name, topology, transport, qps, traffic, faults)`},
		{"variant fault target", rep("target: p0-t0-0--p0-t1-0", "target: p1-t0-0--p1-t1-0"), `dir/v.yaml:15: faults[0].target: variant roce16: unknown target "p1-t0-0--p1-t1-0"`},
		{"variant timed fault", rep("{before_traffic: true, target", "{at: 1s, target"), "faults[0].at: variant roce16: collectives alone have no planned end"},
		{"value of unknown variant", rep("of: roce16.ar.busbw", "of: roce1.ar.busbw"), `dir/v.yaml:17: expect[0]: value "roce1.ar.busbw": no variant "roce1" (mrc, roce16)`},
		{"value of a flow the variant drops", rep("of: roce16.ar.busbw", "of: roce16.a2a.busbw"), `dir/v.yaml:17: expect[0]: value "roce16.a2a.busbw": the run has no flow "a2a"`},
		{"value without variant", rep("value: mrc.ar.busbw", "value: ar.busbw"), `value "ar.busbw": want VARIANT.FLOW.KEY`},
		{"collective key", rep("of: roce16.ar.busbw", "of: roce16.ar.rate"), `flow ar (mrc-allreduce-perf) has busbw, job_busbw, algbw, wrong, not "rate"`},
		{"per-run claim without variant", rep(", variant: roce16, max: 0}", ", max: 0}"), `dir/v.yaml:19: expect[2].variant: metric tool_errors checks one run: say which variant ("" is none)`},
		{"per-run claim unknown variant", rep("variant: roce16, max: 0}", "variant: roce2, max: 0}"), `expect[2].variant: metric tool_errors checks one run: say which variant ("roce2" is none)`},
		{"imbalance of a host", rep("{claim: runs, metric: tool_errors", "{claim: even, metric: imbalance, series: \"rx:h0\""), `expect[2].series: metric imbalance compares a switch's uplinks, not series "rx:h0"`},
		{"imbalance of a T1", rep("{claim: runs, metric: tool_errors", "{claim: even, metric: imbalance, series: \"uplinks:p0-t1-0\""), `expect[2].series: variant roce16: series "uplinks:p0-t1-0": no T0 switch p0-t1-0 (uplinks:t0 or uplinks:T0`},
		{"uplinks for a ratio", rep("{claim: runs, metric: tool_errors", "{claim: even, metric: ratio, baseline: capacity, window: 0s..1s, series: \"uplinks:p0-t0-0\""), `expect[2].series: "uplinks:p0-t0-0" is only for metric imbalance`},
		{"variant topology file missing", rep("topology: {file: topo/one.yaml}", "topology: {file: topo/two.yaml}"), "dir/v.yaml:13: topology.file: open dir/topo/two.yaml: no such file"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := ParseWith("dir/v.yaml", []byte(c.file), readTopo)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("error\n  %v\nwant it to contain\n  %s", err, c.want)
			}
		})
	}
}

// TestParseReportAndRate: a report-only claim parses with no bound and says
// so in its bounds; a flow's rate becomes bit/s for --rate_limit.
func TestParseReportAndRate(t *testing.T) {
	f := strings.Replace(good, "verify: true}", "verify: true, rate: 14Mbit}", 1)
	f = strings.Replace(f, "{claim: ok, metric: tool_errors, max: 0}", "{claim: ok, metric: tool_errors, max: 0}\n  - {claim: shown, metric: value, value: a.rate, report: true}", 1)
	s, err := Parse("r.yaml", []byte(f))
	if err != nil {
		t.Fatal(err)
	}
	if s.Traffic[0].RateBps != 14e6 {
		t.Errorf("rate %d bit/s, want 14e6", s.Traffic[0].RateBps)
	}
	e := s.Expect[4]
	if !e.Report || e.Bounds() != "reported, not judged" || !e.CrossRun() {
		t.Errorf("report-only claim %+v, bounds %q", e, e.Bounds())
	}
	l, err := Parse("l.yaml", []byte(strings.Replace(good, "baseline: 0.2s..0.9s", "baseline: [0.2s..0.9s, 2s..2.5s]", 1)))
	if err != nil {
		t.Fatal(err)
	}
	if b := l.Expect[0].BaselineWindows(); len(b) != 2 || b[1] != (Window{2 * time.Second, 2500 * time.Millisecond}) || l.Expect[0].Baseline != b[0] {
		t.Errorf("baseline list: %v", b)
	}
	if b := s.Expect[0].BaselineWindows(); len(b) != 1 || b[0] != s.Expect[0].Baseline {
		t.Errorf("one baseline: %v", b)
	}
	if s.Expect[0].Report || s.Expect[0].Bounds() != "0.5 ± 0.05" {
		t.Errorf("a bounded claim: %+v, bounds %q", s.Expect[0], s.Expect[0].Bounds())
	}
}

// TestGivenErrors: a claim's condition (S7's collision) must name a
// condition claim of one run, from a claim comparing values.
func TestGivenErrors(t *testing.T) {
	cond := "  - {claim: collided, metric: imbalance, series: \"uplinks:p0-t0-1\", variant: roce16, min: 1.3, condition: true}\n"
	for _, c := range []struct{ name, add, want string }{
		{"ok", cond + "  - {claim: below, metric: value, value: roce16.ar.busbw, of: mrc.ar.busbw, max: 0.6, given: collided}\n", ""},
		{"no such claim", cond + "  - {claim: below, metric: value, value: roce16.ar.busbw, max: 60, given: collision}\n", `no claim "collision"`},
		{"not a condition", "  - {claim: below, metric: value, value: roce16.ar.busbw, max: 60, given: runs}\n", `claim "runs" is not a condition (condition: true)`},
		{"given on a run's claim", cond + "  - {claim: x, metric: tool_errors, variant: mrc, max: 0, given: collided}\n", "given on metric tool_errors: only claims comparing values take a condition"},
		{"condition without a bound", "  - {claim: c, metric: imbalance, series: \"uplinks:p0-t0-1\", variant: mrc, report: true, condition: true}\n", "a condition needs a bound, not report: true"},
		{"both", cond + "  - {claim: b, metric: value, value: roce16.ar.busbw, max: 60, given: collided, given_not: collided}\n", "a claim has one condition"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, err := ParseWith("dir/v.yaml", []byte(variantsFile+c.add), readTopo)
			switch {
			case c.want == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case c.want == "":
				if e := s.Expect[len(s.Expect)-1]; e.Given != "collided" || e.GivenNot {
					t.Fatalf("given %q (not %v), want collided", e.Given, e.GivenNot)
				}
			case err == nil || !strings.Contains(err.Error(), c.want):
				t.Fatalf("error %v, want one containing %q", err, c.want)
			}
		})
	}
}

// TestOnlyVariants: Only keeps the named variants of the shipped S7 and the
// claims that need no other run; unknown names and a scenario without
// variants are errors.
func TestOnlyVariants(t *testing.T) {
	s, err := Load("../../scenarios/s07-collectives.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		names  []string
		claims []string // every claim kept, by a fragment of its text
	}{
		{[]string{"mrc-1qp"}, []string{"MRC sprays", "MRC, no loss", "MRC 1 QP all-reduce busbw ≥", "MRC 1 QP all-to-all busbw ≥"}},
		{[]string{"mrc-1qp-loss", "mrc-1qp"}, []string{"MRC sprays", "MRC, no loss", "MRC, 1 % loss", "MRC 1 QP all-reduce busbw ≥", "MRC 1 QP all-to-all busbw ≥",
			"all-reduce: MRC under 1 % loss", "all-to-all: MRC under 1 % loss"}},
	} {
		o, err := s.Only(tc.names)
		if err != nil {
			t.Fatal(err)
		}
		var vs []string
		for _, v := range o.Variants {
			vs = append(vs, v.Name)
		}
		if want := []string{"mrc-1qp", "mrc-1qp-loss"}[:len(tc.names)]; strings.Join(vs, ",") != strings.Join(want, ",") {
			t.Errorf("Only(%v): variants %v, want %v (file order)", tc.names, vs, want)
		}
		if len(o.Expect) != len(tc.claims) {
			var got []string
			for _, e := range o.Expect {
				got = append(got, e.Claim)
			}
			t.Errorf("Only(%v): %d claims kept, want %d:\n%s", tc.names, len(o.Expect), len(tc.claims), strings.Join(got, "\n"))
			continue
		}
		for _, frag := range tc.claims {
			found := false
			for _, e := range o.Expect {
				found = found || strings.Contains(e.Claim, frag)
			}
			if !found {
				t.Errorf("Only(%v): no claim %q kept", tc.names, frag)
			}
		}
	}
	if len(s.Variants) != 8 {
		t.Errorf("Only changed the scenario it was called on: %d variants", len(s.Variants))
	}
	if _, err := s.Only([]string{"mrc-2qp"}); err == nil || !strings.Contains(err.Error(), "no variant") {
		t.Errorf("unknown variant: %v", err)
	}
	plain, err := Load("../../scenarios/s01-bandwidth.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := plain.Only([]string{"x"}); err == nil {
		t.Error("a scenario without variants: no error")
	}
}

// TestFaultOpFitsTarget: an op that testbed/run refuses for its target
// (hang or restart on a link or port, loss or blackhole on a NIC port) is
// a check error, not a run that fails when the fault comes up.
func TestFaultOpFitsTarget(t *testing.T) {
	for _, tc := range []struct{ old, new, want string }{
		{"target: h0:p1, op: down", "target: h0:p1, op: hang", "x.yaml:10: faults[0].op: hang applies to a switch"},
		{"target: h0:p1, op: down", "target: h0--p0-t0-0, op: restart", "x.yaml:10: faults[0].op: restart applies to a switch"},
		{"target: h0:p1, op: down", "target: h0:p1, op: loss=5%", "x.yaml:10: faults[0].op: a NIC port takes down|up|clear only"},
		{"targets: [fabric-links, p0-t1-1]", "targets: [nic-ports]", "x.yaml:13: random_faults.targets[0]: target nic-ports with op blackhole: a NIC port takes down|up|clear only"},
	} {
		_, err := Parse("x.yaml", []byte(strings.Replace(good, tc.old, tc.new, 1)))
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want %q...", tc.new, err, tc.want)
		}
	}
	for _, ok := range []struct{ old, new string }{
		{"target: h0:p1, op: down", "target: p0-t1-1, op: hang"},
		{"target: h0:p1, op: down", "target: p0-t1-1, op: restart"},
		{"target: h0:p1, op: down", "target: h0--p0-t0-0, op: loss=5%"},
		{"targets: [fabric-links, p0-t1-1]", "targets: [host-links, t1-switches]"},
	} {
		if _, err := Parse("x.yaml", []byte(strings.Replace(good, ok.old, ok.new, 1))); err != nil {
			t.Errorf("%s: %v", ok.new, err)
		}
	}
}

// TestFaultOpKernelDataplane: kernel switches take down|up|clear only.
func TestFaultOpKernelDataplane(t *testing.T) {
	tp, err := topo.Preset("clos-2p")
	if err != nil {
		t.Fatal(err)
	}
	tp.Dataplane = topo.DataplaneKernel
	pl, err := plan.Build(tp, plan.Options{RunDir: "/run/softmrc/check"})
	if err != nil {
		t.Fatal(err)
	}
	if err := run.ValidateFault(pl, "p0-t0-0--p0-t1-1", run.Op{Kind: "blackhole"}); err == nil || !strings.Contains(err.Error(), "needs the xdp dataplane") {
		t.Errorf("kernel blackhole: %v", err)
	}
	if err := run.ValidateFault(pl, "p0-t0-0--p0-t1-1", run.Op{Kind: "down"}); err != nil {
		t.Errorf("kernel down: %v", err)
	}
}

// TestRandomFaultClassKernelDataplane: a random fault class is checked
// candidate by candidate against its ops, so a kernel topology's links
// refuse loss at check time (before, only nic-ports was checked, and the
// run failed when the first link loss was drawn).
func TestRandomFaultClassKernelDataplane(t *testing.T) {
	read := func(p string) ([]byte, error) {
		if p == "dir/k.yaml" {
			return []byte(strings.Replace(oneTopo, "mode: ecmp\n", "mode: ecmp\ndataplane: kernel\n", 1)), nil
		}
		return nil, fmt.Errorf("open %s: no such file", p)
	}
	src := strings.Replace(good, "  preset: clos-2p\n", "  file: k.yaml\n", 1)
	src = strings.Replace(src, "  - {at: 1s, target: h0:p1, op: down}\n  - {at: 2s, target: h0:p1, op: up}\n", "  - {at: 1s, target: h0:p0, op: down}\n  - {at: 2s, target: h0:p0, op: up}\n", 1)
	src = strings.Replace(src, "targets: [fabric-links, p0-t1-1]", "targets: [fabric-links]", 1)
	src = strings.Replace(src, `series: "rx:h3:p0"`, `series: "rx:h3"`, 1)
	src = strings.Replace(src, `series: "tx:p0-t0-1:d1"`, `series: "rx:h3"`, 1)
	_, err := ParseWith("dir/x.yaml", []byte(src), read)
	want := "dir/x.yaml:13: random_faults.targets[0]: target fabric-links with op blackhole"
	if err == nil || !strings.HasPrefix(err.Error(), want) || !strings.Contains(err.Error(), "needs the xdp dataplane") {
		t.Fatalf("got %v, want %q ... needs the xdp dataplane", err, want)
	}
	ok := strings.Replace(src, "ops: [blackhole, loss=5%]", "ops: [down]", 1)
	if _, err := ParseWith("dir/x.yaml", []byte(ok), read); err != nil {
		t.Errorf("down on a kernel topology's fabric links: %v", err)
	}
}
