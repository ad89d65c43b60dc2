// Package scenario reads mrc-lab scenario files: which testbed to bring up,
// what traffic to drive, which faults to inject when, how often to sample
// and what the run must show. It only parses and validates; running a
// scenario is testbed/lab's job. The format is documented in docs/lab.md.
package scenario

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/softmrc/softmrc/testbed/run"
	"github.com/softmrc/softmrc/testbed/topo"
)

// Scenario is one parsed scenario file.
type Scenario struct {
	// Source is the file it came from (in errors and reports).
	Source string
	Name   string
	// Title is the one-line claim the scenario tests; Why says why its
	// numbers are what they are (shown in the report).
	Title, Why string
	Topology   Topology
	Traffic    []Flow
	Faults     []Fault
	Random     *RandomFaults
	// Interval is the sampling interval.
	Interval time.Duration
	// Duration is how long the scenario runs from the first flow's start;
	// by default the end of the last flow.
	Duration time.Duration
	Expect   []Expect
	// Variants, when given, make the scenario several full runs (each on
	// a fresh testbed), one per variant, whose measured values claims can
	// compare (metric value with `of`, metric jain): S7 compares MRC with
	// RoCE on their own fabrics, S8 a victim flow alone and under incast.
	Variants []Variant
}

// Variant is one run of a scenario with variants: the scenario with some
// sections replaced.
type Variant struct {
	Name string
	// Topology, when SetTopology, replaces the scenario's topology.
	Topology    Topology
	SetTopology bool
	// Transport and QPs, when set, replace every flow's.
	Transport string
	QPs       int
	// Flows, when given, keeps only the flows of these names.
	Flows []string
	// Faults, when SetFaults, replace the scenario's fault list.
	Faults    []Fault
	SetFaults bool
	Line      int
}

// Apply is the scenario a variant runs: s with the variant's sections
// replaced and only the expectations that name this variant (series and
// tool metrics, which are per run). Its name is s's plus the variant's.
func (s *Scenario) Apply(v Variant) *Scenario {
	c := *s
	c.Name = s.Name + "-" + v.Name
	c.Variants = nil
	if v.SetTopology {
		c.Topology = v.Topology
	}
	if v.SetFaults {
		c.Faults = v.Faults
	}
	c.Traffic = nil
	for _, f := range s.Traffic {
		if len(v.Flows) > 0 && !slices.Contains(v.Flows, f.Name) {
			continue
		}
		if v.Transport != "" {
			f.Transport = v.Transport
		}
		if v.QPs > 0 {
			f.QPs = v.QPs
		}
		c.Traffic = append(c.Traffic, f)
	}
	c.Expect = nil
	for _, e := range s.Expect {
		if e.Variant == v.Name && !e.CrossRun() {
			e.Variant = ""
			c.Expect = append(c.Expect, e)
		}
	}
	return &c
}

// Variant returns the variant of that name (nil: none).
func (s *Scenario) Variant(name string) *Variant {
	for i := range s.Variants {
		if s.Variants[i].Name == name {
			return &s.Variants[i]
		}
	}
	return nil
}

// Topology names the testbed: a preset or a topology file, plus link models
// that replace the preset's or file's.
type Topology struct {
	Preset string
	File   string // relative paths are relative to the scenario file
	// FileData is File's content, read when the scenario was parsed (from
	// the binary for a shipped scenario's topology file).
	FileData []byte
	// DCQCNScale, when not 0, is every NIC's roce.dcqcn_scale: DCQCN's
	// periods × k and rates / k, so that it reacts to an emulated link k
	// times slower than 100 Gb/s as it would at 100 Gb/s (docs/roce.md).
	DCQCNScale float64
	// CCScale, when not 0, is every NIC's cc.scale: MRC's target queueing
	// delay × k, so that its CC sees the same queue in packets on a link k
	// times slower than 100 Gb/s as at 100 Gb/s (docs/engine.md).
	CCScale float64
	// RoCEAckTimeout, when not 0, is every NIC's roce.ack_timeout: the
	// local ACK timeout of RoCE QPs (IBTA 4.096 µs · 2^timeout; mrc-nicd's
	// default is perftest's timeout 14, 67 ms), e.g. NCCL's (docs/roce.md).
	RoCEAckTimeout time.Duration
	// DCQCNTarget, when set, is every NIC's roce.dcqcn_target: DCQCN's
	// target-rate rule on a cut, "paper" (mrc-nicd's default) or "mlx5"
	// (mlx5's default, what NICs run behind PFC; docs/roce.md).
	DCQCNTarget string
	// Fabric and Host, when set (Set*), replace the topology's link models.
	Fabric, Host       topo.LinkSpec
	SetFabric, SetHost bool
	// NICPacingBps, when not 0, is every NIC port's pacing_bps instead of
	// the host link capacity (plan.Plan.NICPacingBps says why).
	NICPacingBps uint64
}

// Collective tools: a flow naming one runs it on every host of Hosts at
// once (rank i on Hosts[i]) instead of a client/server pair.
var Collectives = []string{"mrc-allreduce-perf", "mrc-alltoall-perf"}

// Flow is one mrc-write-bw client/server pair, or one collective group.
type Flow struct {
	Name     string
	From, To string // host names, e.g. h0 (mrc-write-bw)
	// Hosts is a collective's group in rank order (mrc-allreduce-perf,
	// mrc-alltoall-perf). Collectives run one after another, in file
	// order: their length is set by Iters, not by a duration.
	Hosts []string
	// Iters is the collectives' -n (timed iterations), Warmup their -w
	// (untimed iterations before them, default 1), Check their -c 1 (every
	// element checked).
	Iters, Warmup int
	Check         bool
	// Slots and SlotBytes are the collectives' --slots and --slot_bytes
	// (0: the tool's default, 8 × 64 KiB): the receive FIFO per QP, and so
	// the piece a ring step forwards as soon as it arrives.
	Slots, SlotBytes int
	QPs              int
	Size             int // message size in bytes
	Tool             string
	Start            time.Duration
	Duration         time.Duration // whole seconds (mrc-write-bw -D)
	Verify           bool
	// TxDepth is mrc-write-bw -t: work requests in flight per QP. The
	// default 16 keeps what is queued when the duration ends small (the
	// tool waits for every posted write: its default 128 × 4 QPs × 32 KiB
	// = 16 MiB took 1.3 s to drain at 100 Mbit/s, and runs overran -D by 2 s).
	TxDepth int
	// EVs is mrc-write-bw --evs for the client: the EVs its QPs are
	// pinned to ("" = the daemon's choice).
	EVs string
	// Transport is mrc-write-bw --transport for both ends: "mrc" or "roce"
	// (the RoCEv2 RC baseline, docs/roce.md); "" is the tool's default, mrc.
	Transport string
	// RateBps, when not 0, is mrc-write-bw --rate_limit for the client
	// (bit/s): a paced flow (S8's baseline flows that carry the incast's
	// rate without converging on one receiver).
	RateBps uint64
	// Timeout bounds a collective (its --timeout).
	Timeout time.Duration
	Line    int
}

// IsCollective says whether the flow runs a collective tool on a group.
func (f *Flow) IsCollective() bool { return slices.Contains(Collectives, f.Tool) }

// Fault is one timeline entry.
type Fault struct {
	At     time.Duration
	Target string // a link, NIC port (h0:p1), switch port or switch
	Op     run.Op
	// BeforeTraffic applies the fault once the testbed is up, before any
	// client starts (At is then 0): the fabric is already broken when the
	// QPs are created, and nothing told the NICs (S9).
	BeforeTraffic bool
	Line          int
}

// RandomFaults draws faults from a seeded generator: every Gap (uniform in
// [MinGap, MaxGap]) between From and Until one target from Targets gets one
// op from Ops and is cleared Hold later.
type RandomFaults struct {
	Seed           int64
	From, Until    time.Duration
	MinGap, MaxGap time.Duration
	Hold           time.Duration
	// Targets are target classes (host-links, fabric-links, nic-ports,
	// t1-switches) or target names.
	Targets []string
	Ops     []run.Op
	// KeepPlanePath keeps, in every plane, at least one path between every
	// host pair (so no QP may fail while it holds).
	KeepPlanePath bool
	Line          int
}

// Metrics an expectation can compute.
const (
	// MetricRatio is mean(series over Window) / reference, the reference
	// being mean(series over Baseline) or, with baseline "capacity", the
	// series' emulated capacity.
	MetricRatio = "ratio"
	// MetricRecovery is the time in ms from At until the series' moving
	// average first reaches Level × mean(series over Window).
	MetricRecovery = "recovery_ms"
	// MetricDip is min(moving average over Window) / reference.
	MetricDip = "dip"
	// MetricToolErrors counts traffic processes that failed (exit status,
	// QP error, --verify mismatch).
	MetricToolErrors = "tool_errors"
	// MetricQPLossBound is, over the QPs of a host (series qp:HOST), the
	// worst ratio of the packets a QP lost (losses + timeouts) to the
	// packets it had unacknowledged on its EVs when they were declared
	// ASSUMED_BAD (inflight_at_bad), both counted over Window (S9).
	MetricQPLossBound = "qp_loss_bound"
	// MetricValue is a flow's measured value (Value: [VARIANT.]FLOW.KEY,
	// Keys), or its ratio to another (Of): the result of a tool run, not
	// a sampled series. With variants it compares runs (S7: MRC 1 QP
	// busbw over RoCE 16 QPs busbw).
	MetricValue = "value"
	// MetricJain is Jain's fairness index (Σx)² / (n·Σx²) of Values: 1
	// when every flow got the same, 1/n when one got everything (S8).
	MetricJain = "jain"
	// MetricImbalance is, for series uplinks:SWITCH (a T0's fabric ports),
	// the busiest port's mean rate over the ports' mean rate: 1 when the
	// traffic spread evenly, N when one of N uplinks carried it all (ECMP
	// collisions of RoCE's pinned QPs, S7). Its window defaults to the
	// whole run.
	MetricImbalance = "imbalance"
)

// Metrics lists the metric names.
var Metrics = []string{MetricRatio, MetricRecovery, MetricDip, MetricToolErrors, MetricQPLossBound, MetricValue, MetricJain, MetricImbalance}

// Keys are the measured values of a flow (metric value and jain):
// rate is mrc-write-bw's average goodput in Mbit/s (0 when the flow
// failed); busbw and algbw are a collective's average over its rows, in
// Mbit/s (nccl-tests' GB/s × 8000; not measured when the run failed);
// job_busbw is the bus bandwidth of all its timed operations together
// (each row half's bus bytes over their total time); wrong is its #wrong
// summed over the rows (-c 1).
var Keys = []string{"rate", "busbw", "job_busbw", "algbw", "wrong"}

// CrossRun says whether the expectation reads measured values (value,
// jain) rather than one run's series: with variants it is evaluated once
// over every variant's values.
func (e *Expect) CrossRun() bool {
	return e.Metric == MetricValue || e.Metric == MetricJain && len(e.SeriesList) == 0
}

// Window is a time range relative to the start of the traffic.
type Window struct{ From, To time.Duration }

func (w Window) String() string {
	return fmt.Sprintf("%v..%v", w.From.Round(time.Millisecond), w.To.Round(time.Millisecond))
}

// Expect is one claim and how to check it.
type Expect struct {
	Claim  string
	Metric string
	// Series names the sampled series (docs/lab.md: rx:h3, rx:h3:p1, ...).
	Series string
	Window Window
	// Baseline is the reference window; BaselineCapacity uses the emulated
	// capacity instead. Baselines, when the file gives a list, are all the
	// reference windows (Baseline is the first): the reference is the mean
	// (or median) of the samples in any of them. A baseline before and
	// after the window cancels a drift between them (S8: the victim beside
	// the paced flows before and after the incast).
	Baseline         Window
	Baselines        []Window
	BaselineCapacity bool
	// CapacityOf, with BaselineCapacity, names the series whose emulated
	// capacity is the divisor ("capacity of tx:p0-t0-0:u0"): a flow's
	// goodput against the one link it shares (S6); empty: Series' own.
	CapacityOf string
	// At is the fault time recovery is measured from; Level the fraction
	// of the settled level that counts as recovered.
	At    time.Duration
	Level float64
	// AfterFault, when set, anchors Window and At to the moment faults[i]
	// took effect (its request returned) instead of the traffic's zero: on
	// a loaded machine a fault can take effect hundreds of ms after its
	// planned time. The baseline window stays anchored to zero.
	AfterFault *int
	// Median makes ratio use the median of the window's samples (and of the
	// baseline's) instead of their mean.
	Median bool
	// Want ± Tolerance, or Min / Max bounds (nil when not set).
	Want, Tolerance *float64
	Min, Max        *float64
	// Value and Of are metric value's names ([VARIANT.]FLOW.KEY); Values
	// metric jain's. With Variant set they may leave the variant out.
	Value, Of string
	Values    []string
	// SeriesList is metric jain's other form, `series: [A, B, ...]`: the
	// index of the series' means over Window, judged per run. It measures
	// the flows while all of them run, which the tools' whole-run averages
	// do not when they start at different times (S8: one incast flow that
	// connected first read 15.9 Mbit/s against 4.9-7.6, Jain 0.815).
	SeriesList []string
	// Variant is the run a per-run expectation (series, tool_errors)
	// checks in a scenario with variants.
	Variant string
	// Report makes the claim report-only: its value is measured and
	// shown with verdict REPORTED, never judged, and it does not count
	// toward the run's pass or fail. It takes no bound (S8's RoCE numbers,
	// which the issue asks to report, not to assert).
	Report bool
	// Condition makes the claim a condition of others: bounded and
	// measured like any claim of its run, shown HOLDS or DOES NOT HOLD,
	// never counted toward the run's pass or fail. Cross-run claims name
	// it with given or given_not (S7: whether RoCE's pinned ring flows
	// collided on a T0 uplink, which depends on the hash of their QPNs).
	Condition bool
	// Given is the claim text of a condition: this cross-run claim is
	// judged only when the condition held (with GivenNot: when it did
	// not); otherwise it is N/A and does not count. A condition that could
	// not be measured leaves the claim not measured, which fails.
	Given    string
	GivenNot bool
	// Index is the expectation's place in the file's expect list (in
	// errors about a variant's run, whose list holds only its own).
	Index int
	Line  int
}

// BaselineWindows are the reference windows of a ratio or dip.
func (e *Expect) BaselineWindows() []Window {
	if len(e.Baselines) > 0 {
		return e.Baselines
	}
	return []Window{e.Baseline}
}

// Bounds says what passes, e.g. "0.75 ± 0.03", "≥ 0.96"; "reported, not
// judged" for a report-only claim.
func (e *Expect) Bounds() string {
	if e.Report {
		return "reported, not judged"
	}
	switch {
	case e.Given != "" && e.GivenNot:
		return e.bounds() + "; judged only when its condition does not hold"
	case e.Given != "":
		return e.bounds() + "; judged only when its condition holds"
	}
	return e.bounds()
}

func (e *Expect) bounds() string {
	var s []string
	if e.Want != nil {
		tol := 0.0
		if e.Tolerance != nil {
			tol = *e.Tolerance
		}
		s = append(s, fmt.Sprintf("%g ± %g", *e.Want, tol))
	}
	if e.Min != nil {
		s = append(s, fmt.Sprintf("≥ %g", *e.Min))
	}
	if e.Max != nil {
		s = append(s, fmt.Sprintf("≤ %g", *e.Max))
	}
	return strings.Join(s, ", ")
}

// End is when the scenario's traffic is over.
func (s *Scenario) End() time.Duration {
	if s.Duration > 0 {
		return s.Duration
	}
	var end time.Duration
	for _, f := range s.Traffic {
		if f.IsCollective() {
			continue // as long as its iterations take: the run's end is measured
		}
		end = max(end, f.Start+f.Duration)
	}
	return end
}

// Hosts are the hosts the traffic uses, in first-use order.
func (s *Scenario) Hosts() []string {
	var out []string
	seen := map[string]bool{}
	for _, f := range s.Traffic {
		for _, h := range append([]string{f.From, f.To}, f.Hosts...) {
			if h == "" {
				continue
			}
			if !seen[h] {
				seen[h] = true
				out = append(out, h)
			}
		}
	}
	return out
}

// Only is s with just the named variants, in file order, and the claims
// that need no other: a per-run claim of a dropped variant goes, and so do
// a claim on values one of them measured and a claim given a condition that
// went. Why: an A/B of a build on one variant of S7 (15–25 s) should not
// run the five others (5 minutes) or fail on their missing values.
func (s *Scenario) Only(names []string) (*Scenario, error) {
	if len(s.Variants) == 0 {
		return nil, fmt.Errorf("%s has no variants", s.Name)
	}
	for _, n := range names {
		if s.Variant(n) == nil {
			return nil, fmt.Errorf("%s has no variant %q (%s)", s.Name, n, variantNames(s))
		}
	}
	c := *s
	c.Variants = nil
	for _, v := range s.Variants {
		if slices.Contains(names, v.Name) {
			c.Variants = append(c.Variants, v)
		}
	}
	kept := func(e Expect) bool {
		if e.Variant != "" && !slices.Contains(names, e.Variant) {
			return false
		}
		for _, val := range append([]string{e.Value, e.Of}, e.Values...) {
			// A name without a variant is the claim's own variant's.
			if v, _, ok := strings.Cut(val, "."); ok && strings.Count(val, ".") == 2 && !slices.Contains(names, v) {
				return false
			}
		}
		return true
	}
	c.Expect = nil
	for _, e := range s.Expect {
		if !kept(e) {
			continue
		}
		if e.Given != "" && !slices.ContainsFunc(s.Expect, func(g Expect) bool { return g.Claim == e.Given && kept(g) }) {
			continue
		}
		c.Expect = append(c.Expect, e)
	}
	return &c, nil
}
