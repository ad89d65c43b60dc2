// Package scenario reads mrc-lab scenario files: which testbed to bring up,
// what traffic to drive, which faults to inject when, how often to sample
// and what the run must show. It only parses and validates; running a
// scenario is testbed/lab's job. The format is documented in docs/lab.md.
package scenario

import (
	"fmt"
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
}

// Topology names the testbed: a preset or a topology file, plus link models
// that replace the preset's or file's.
type Topology struct {
	Preset string
	File   string // relative paths are relative to the scenario file
	// Fabric and Host, when set (Set*), replace the topology's link models.
	Fabric, Host       topo.LinkSpec
	SetFabric, SetHost bool
	// NICPacingBps, when not 0, is every NIC port's pacing_bps instead of
	// the host link capacity (plan.Plan.NICPacingBps says why).
	NICPacingBps uint64
}

// Flow is one mrc-write-bw client/server pair.
type Flow struct {
	Name     string
	From, To string // host names, e.g. h0
	QPs      int
	Size     int // message size in bytes
	Tool     string
	Start    time.Duration
	Duration time.Duration // whole seconds (mrc-write-bw -D)
	Verify   bool
	// TxDepth is mrc-write-bw -t: work requests in flight per QP. The
	// default 16 keeps what is queued when the duration ends small (the
	// tool waits for every posted write: its default 128 × 4 QPs × 32 KiB
	// = 16 MiB took 1.3 s to drain at 100 Mbit/s, and runs overran -D by 2 s).
	TxDepth int
	// EVs is mrc-write-bw --evs for the client: the EVs its QPs are
	// pinned to ("" = the daemon's choice).
	EVs  string
	Line int
}

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
)

// Metrics lists the metric names.
var Metrics = []string{MetricRatio, MetricRecovery, MetricDip, MetricToolErrors, MetricQPLossBound}

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
	// capacity instead.
	Baseline         Window
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
	Line            int
}

// Bounds says what passes, e.g. "0.75 ± 0.03", "≥ 0.96".
func (e *Expect) Bounds() string {
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
		end = max(end, f.Start+f.Duration)
	}
	return end
}

// Hosts are the hosts the traffic uses, in first-use order.
func (s *Scenario) Hosts() []string {
	var out []string
	seen := map[string]bool{}
	for _, f := range s.Traffic {
		for _, h := range []string{f.From, f.To} {
			if !seen[h] {
				seen[h] = true
				out = append(out, h)
			}
		}
	}
	return out
}
