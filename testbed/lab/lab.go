// Package lab runs mrc-lab scenarios on the real testbed: it brings the
// fabric up with every daemon (testbed/run), drives mrc-write-bw in the host
// namespaces, applies the fault timeline at its times through the testbed's
// fault API, samples telemetry while it runs, tears everything down (also
// when ctx ends or anything fails) and computes the verdicts from the
// sampled series. Writing the outputs is testbed/lab/report's job.
package lab

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/softmrc/softmrc/internal/telemetry"
	"github.com/softmrc/softmrc/nic/collperf"
	"github.com/softmrc/softmrc/nic/perf"
	"github.com/softmrc/softmrc/testbed/lab/figure"
	"github.com/softmrc/softmrc/testbed/lab/scenario"
	"github.com/softmrc/softmrc/testbed/lab/series"
	"github.com/softmrc/softmrc/testbed/lab/verdict"
	"github.com/softmrc/softmrc/testbed/plan"
	"github.com/softmrc/softmrc/testbed/run"
	"github.com/softmrc/softmrc/testbed/topo"
)

// Options tune Run.
type Options struct {
	// BinDir holds the daemons and mrc-write-bw ("" = $MRC_BIN, then PATH).
	BinDir string
	// OutDir receives the raw samples and the tools' output.
	OutDir string
	// Progress gets a progress line while the scenario runs (nil: none).
	Progress io.Writer
	Log      *slog.Logger
	// RunID, when not 0 and the topology sets no run_id, is the <run>
	// field of the testbed's addresses instead of one derived from its
	// random prefix. The variants of one scenario run share one
	// (runVariants), so that ECMP hashes their QPs onto the same paths.
	RunID uint16
}

// Applied is a fault of the timeline as it was applied.
type Applied struct {
	scenario.Fault
	// Sent is when the request was made and T when it returned, relative
	// to the traffic start.
	Sent, T time.Duration
	Err     error
}

// FlowResult is what a flow's mrc-write-bw reported.
type FlowResult struct {
	Flow scenario.Flow
	// Average is the client's average goodput in MiB/s (0 if it failed).
	Average    float64
	Verified   bool
	Mismatches uint64
	// Collective is rank 0's report of a collective flow (nil otherwise or
	// when it failed).
	Collective *collperf.Report
	Err        error
}

// Outcome is a finished scenario.
type Outcome struct {
	// Label names the run in reports (the scenario's name, or name-runN).
	Label    string
	Scenario *scenario.Scenario
	Plan     *plan.Plan
	Faults   []Applied
	Flows    []FlowResult
	Results  []verdict.Result
	// Series are the derived series, Figures what to draw.
	Series  map[string]series.Series
	Figures []figure.Figure
	Samples int
	// RTT is the median smoothed RTT the senders' QPs reported (0: none).
	RTT  time.Duration
	Took time.Duration
	// LoadBefore and LoadAfter are the machine's 1-minute load average
	// when the run started and ended (2 vCPUs here).
	LoadBefore, LoadAfter string
	Err                   error // the run itself failed (bring-up, sampling, a fault)
	// Values are the flows' measured values (FlowValues) by FLOW.KEY, or
	// by VARIANT.FLOW.KEY in a scenario with variants.
	Values map[string]float64
	// Logs are the warnings and errors the run's daemons logged (their logs
	// are kept in the output folder's logs/).
	Logs []LogNote
	// Variants are the runs of a scenario with variants, one per variant,
	// in file order; Results then holds their per-run verdicts (claims
	// prefixed with the variant) and the cross-run ones.
	Variants []*Outcome
}

// Pass is true when the run completed and every expectation passed
// (report-only ones are not judged and do not count).
func (o *Outcome) Pass() bool {
	if o.Err != nil || len(o.Results) == 0 {
		return false
	}
	for _, r := range o.Results {
		if r.Counts() && !r.Pass {
			return false
		}
	}
	return true
}

// data implements verdict.Data.
type data struct {
	o        *Outcome
	cap      map[string]float64
	counters *series.Counters
	t0       int64
}

func (d data) Series(name string) (series.Series, error) {
	s, ok := d.o.Series[name]
	if !ok {
		return s, fmt.Errorf("series %s was not sampled in this run", name)
	}
	return s, nil
}

func (d data) Capacity(name string) (float64, error) { return d.cap[name], nil }

// SeriesGroup implements verdict.Grouper: uplinks:SWITCH is the tx series
// of the switch's fabric ports, uplinks:t0 those of every T0, one set each.
func (d data) SeriesGroup(name string) ([][]string, error) {
	sw, ok := strings.CutPrefix(name, "uplinks:")
	if !ok || d.o.Plan == nil {
		return nil, fmt.Errorf("series group %s: not uplinks:SWITCH or uplinks:t0", name)
	}
	return scenario.UplinkSets(d.o.Plan, sw)
}

func (d data) RTT() time.Duration { return d.o.RTT }

// QPGrowth implements verdict.Data from the QP samples of host.
func (d data) QPGrowth(host string, w scenario.Window, keys ...string) (map[string]map[string]float64, error) {
	return d.counters.GrowthByID(host, d.t0, w.From, w.To, keys...)
}

// FaultTime implements verdict.Data: faults[i] of the scenario file (not
// the random ones) took effect when its batch's request returned.
func (d data) FaultTime(i int) (sent, done, next time.Duration, ok bool) {
	if i < 0 || i >= len(d.o.Scenario.Faults) {
		return 0, 0, 0, false
	}
	want := d.o.Scenario.Faults[i]
	next = d.o.Scenario.End()
	for _, a := range d.o.Faults {
		if ok && a.At > want.At {
			return sent, done, a.Sent, true
		}
		if !ok && a.Line == want.Line && a.Target == want.Target && a.At == want.At && a.Err == nil {
			sent, done, ok = a.Sent, a.T, true
		}
	}
	return sent, done, next, ok
}

func (d data) Value(name string) (float64, bool) {
	v, ok := d.o.Values[name]
	return v, ok
}

func (d data) ToolErrors() []string {
	var out []string
	for _, f := range d.o.Flows {
		switch {
		case f.Err != nil:
			out = append(out, fmt.Sprintf("flow %s: %v", f.Flow.Name, f.Err))
		case FlowValues(f)["wrong"] > 0:
			out = append(out, fmt.Sprintf("flow %s: %g elements wrong (-c 1)", f.Flow.Name, FlowValues(f)["wrong"]))
		case f.Mismatches > 0:
			out = append(out, fmt.Sprintf("flow %s: %d bytes wrong (--verify)", f.Flow.Name, f.Mismatches))
		case f.Flow.Verify && !f.Verified:
			out = append(out, fmt.Sprintf("flow %s: --verify did not run", f.Flow.Name))
		}
	}
	return out
}

// buildPlan plans the testbed of one run under prefix. runID, when not 0,
// is the <run> field of its addresses unless the topology file sets its
// own run_id.
func buildPlan(tp *topo.Topology, prefix, dir string, runID uint16) (*plan.Plan, error) {
	if tp.RunID == 0 && runID != 0 {
		t := *tp
		t.RunID = runID
		tp = &t
	}
	return plan.Build(tp, plan.Options{Prefix: prefix, RunDir: dir})
}

func randPrefix() string {
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	return "lb" + hex.EncodeToString(b)
}

// Run runs one scenario. The testbed is always taken down before Run
// returns, whatever happened.
func Run(ctx context.Context, s *scenario.Scenario, o Options) *Outcome {
	start := time.Now()
	out := &Outcome{Label: s.Name, Scenario: s, Series: map[string]series.Series{}, LoadBefore: loadAvg()}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	if _, ok := o.Progress.(*lockedWriter); !ok && o.Progress != nil {
		// The collectives' goroutine reports progress beside the main
		// loop: one line at a time.
		o.Progress = &lockedWriter{w: o.Progress}
	}
	if len(s.Variants) > 0 {
		runVariants(ctx, s, o, out)
		out.Took = time.Since(start)
		out.LoadAfter = loadAvg()
		return out
	}
	out.Err = runScenario(ctx, s, o, out)
	out.Values = map[string]float64{}
	for _, f := range out.Flows {
		for k, v := range FlowValues(f) {
			out.Values[f.Flow.Name+"."+k] = v
		}
	}
	if out.Err == nil {
		out.Results = append(out.Results, verdict.CheckValues(s, data{o: out})...)
		verdict.ApplyGiven(out.Results)
	}
	out.Took = time.Since(start)
	out.LoadAfter = loadAvg()
	return out
}

// loadAvg is the 1-minute load average (/proc/loadavg), to show how busy
// the machine was; "" if unreadable.
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return ""
	}
	return f[0]
}

func runScenario(ctx context.Context, s *scenario.Scenario, o Options, out *Outcome) (err error) {
	tools := map[string]string{}
	for _, f := range s.Traffic {
		if tools[f.Tool] = run.FindBin(o.BinDir, f.Tool); tools[f.Tool] == "" {
			return fmt.Errorf("%s not found (looked in --bin, $MRC_BIN and PATH): run `make build` and pass --bin bin", f.Tool)
		}
	}
	wbw := tools["mrc-write-bw"]
	if run.FindBin(o.BinDir, "mrc-nicd") == "" {
		return errors.New("mrc-nicd not found (looked in --bin, $MRC_BIN and PATH): run `make build` and pass --bin bin")
	}
	tp, err := s.Topology.Resolve()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(o.OutDir, 0o755); err != nil {
		return err
	}
	prefix := randPrefix()
	dir := filepath.Join(os.TempDir(), "mrc-lab-"+prefix)
	pl, err := buildPlan(tp, prefix, dir, o.RunID)
	if err != nil {
		return err
	}
	pl.NICPacingBps = s.Topology.NICPacingBps
	pl.NICDCQCNScale = s.Topology.DCQCNScale
	pl.NICCCScale = s.Topology.CCScale
	pl.NICRoCEAckTimeout = s.Topology.RoCEAckTimeout
	pl.NICDCQCNTarget = s.Topology.DCQCNTarget
	out.Plan = pl
	timeline, err := s.Timeline(pl)
	if err != nil {
		return err
	}
	progress(o, "[%s] bringing up %s (%d namespaces, prefix %s)", s.Name, tp.Source, len(pl.Namespaces), prefix)
	defer func() {
		// Tear down with a fresh context: ctx may be cancelled (Ctrl-C).
		if _, serr := os.Stat(run.StatePath(dir)); serr == nil {
			logs := filepath.Join(o.OutDir, "logs")
			if derr := run.DownWith(dir, run.DownOptions{Log: o.Log, KeepLogs: logs}); derr != nil {
				err = errors.Join(err, fmt.Errorf("tear down %s: %w (run `mrc-testbed down --dir %s`)", dir, derr, dir))
			}
			out.Logs = ScanLogs(logs)
		}
	}()
	if _, err := run.Up(ctx, pl, run.Options{BinDir: o.BinDir, Log: o.Log}); err != nil {
		return fmt.Errorf("bring up the testbed: %w", err)
	}

	// Series: what the expectations and the figures need.
	specs, err := seriesSpecs(s, pl)
	if err != nil {
		return err
	}
	sockets := map[string]string{}
	for _, sp := range specs {
		for _, k := range sp.ports {
			sockets[k.sw.Name] = k.sw.CtlSock
		}
	}
	for _, f := range s.Traffic {
		for _, h := range append([]string{f.From, f.To}, f.Hosts...) {
			if h != "" {
				sockets[h] = run.NICSocket(pl.Host(h))
			}
		}
	}
	raw, err := os.Create(filepath.Join(o.OutDir, "samples.jsonl"))
	if err != nil {
		return err
	}
	defer raw.Close()
	jl := series.NewJSONL(raw)
	var counters series.Counters
	var mu sync.Mutex
	last := map[string]float64{}
	lastT := map[string]int64{}
	// The traffic's time zero is when data flows at every destination of
	// the flows that start at once (mrc-write-bw's -D counts from the end
	// of its handshake, which takes from 0.1 s to seconds on a loaded
	// machine): the first sample by which each of them received
	// StartBytes since the clients were launched.
	var t0 int64
	zero := make(chan struct{})
	var startBase map[string]float64 // nil until the clients are launched
	var waitFor []seriesSpec
	for _, sp := range specs {
		if !sp.rx || sp.plane >= 0 {
			continue
		}
		for _, f := range s.Traffic {
			if !f.IsCollective() && f.Start == 0 && "rx:"+f.To == sp.name {
				waitFor = append(waitFor, sp)
				break
			}
		}
	}
	sampledAll := make(chan struct{})
	sampledAllDone := false
	sampled := func() bool {
		for _, sp := range waitFor {
			for _, k := range sp.ports {
				if _, ok := last[k.sw.Name+":"+k.port]; !ok {
					return false
				}
			}
		}
		return true
	}
	moved := func(sp seriesSpec) float64 {
		var d float64
		for _, k := range sp.ports {
			id := k.sw.Name + ":" + k.port
			d += last[id] - startBase[id]
		}
		return d
	}
	var coverAt int64 = math.MaxInt64 // set when the traffic is over
	covered := make(chan struct{})
	sctx, stopSampling := context.WithCancel(context.Background())
	defer stopSampling()
	samplerDone := make(chan error, 1)
	sampler := Telemetry{Sockets: sockets, Interval: s.Interval}
	go func() {
		samplerDone <- sampler.Run(sctx, func(smp series.Sample) {
			mu.Lock()
			defer mu.Unlock()
			counters.Add(smp)
			_ = jl.Write(smp)
			out.Samples++
			if smp.Kind != telemetry.KindSwitchPort {
				return
			}
			id := smp.Source + ":" + smp.ID
			last[id] = smp.Values[telemetry.KeyTxBytes]
			lastT[id] = smp.T
			if !sampledAllDone && sampled() {
				sampledAllDone = true
				close(sampledAll)
			}
			if startBase != nil && t0 == 0 {
				flowing := true
				for _, sp := range waitFor {
					flowing = flowing && moved(sp) >= StartBytes
				}
				if flowing {
					t0 = smp.T
					close(zero)
				}
			}
			if smp.T >= coverAt && coverAt > 0 {
				for _, t := range lastT {
					if t < coverAt {
						return
					}
				}
				coverAt = 0
				close(covered)
			}
		})
	}()

	// The start detection compares counters with their values when the
	// clients start: wait until every port it watches has been sampled.
	select {
	case <-sampledAll:
	case err := <-samplerDone:
		return fmt.Errorf("telemetry ended before the traffic started: %v", err)
	case <-time.After(StartTimeout):
		return fmt.Errorf("telemetry did not start within %v (no sample yet from a switch the run watches)", StartTimeout)
	case <-ctx.Done():
		return fmt.Errorf("interrupted while telemetry started: %w", ctx.Err())
	}

	// Faults before the traffic (S9): the fabric is broken before any QP
	// exists, and no NIC was told. One batch, as for faults planned for
	// the same time. Their times are fixed up once time zero is known.
	pre := 0
	for pre < len(timeline) && timeline[pre].BeforeTraffic {
		pre++
	}
	var preSent, preDone int64
	if pre > 0 {
		var reqs []run.FaultReq
		for _, f := range timeline[:pre] {
			reqs = append(reqs, run.FaultReq{Target: f.Target, Op: f.Op})
		}
		progress(o, "[%s] applying %d fault(s) before the traffic", s.Name, pre)
		preSent = Monotonic()
		if err := run.Faults(ctx, dir, reqs, run.Options{BinDir: o.BinDir, Log: o.Log}); err != nil {
			return fmt.Errorf("faults before the traffic: %w", err)
		}
		preDone = Monotonic()
	}

	// Traffic: servers first (each on its own out-of-band port), then the
	// clients at their start times. t0 is the traffic start.
	end := s.End()
	limit := end + 60*time.Second
	for _, f := range s.Traffic {
		if f.IsCollective() {
			limit += f.Timeout // they run one after another
		}
	}
	tctx, cancelTraffic := context.WithTimeout(ctx, limit)
	defer cancelTraffic()
	out.Flows = make([]FlowResult, len(s.Traffic))
	srvErrs := make([]error, len(s.Traffic))
	var wg sync.WaitGroup
	for i, f := range s.Traffic {
		out.Flows[i].Flow = f
		if f.IsCollective() {
			continue
		}
		port := strconv.Itoa(perf.DefaultPort + 1 + i)
		srv, err := os.Create(filepath.Join(o.OutDir, "flow-"+f.Name+".server.txt"))
		if err != nil {
			return err
		}
		defer srv.Close()
		dst := pl.Host(f.To)
		wg.Add(1)
		go func() {
			defer wg.Done()
			argv := []string{wbw, "-d", run.NICSocket(dst), "-p", port}
			if f.Transport != "" {
				argv = append(argv, "--transport", f.Transport)
			}
			if err := run.Exec(tctx, dir, dst.Name, argv, nil, srv, srv); err != nil {
				srvErrs[i] = fmt.Errorf("server on %s: %w (see %s)", dst.Name, err, srv.Name())
			}
		}()
	}
	mu.Lock()
	startBase = maps.Clone(last)
	launched := Monotonic()
	if len(waitFor) == 0 {
		t0 = launched
		close(zero)
	}
	mu.Unlock()
	rel := func() time.Duration { return time.Duration(Monotonic() - t0) }
	// Collectives run one after another, in file order (their length is
	// their iterations'), from the start of the traffic.
	var colls []int
	for i, f := range s.Traffic {
		if f.IsCollective() {
			colls = append(colls, i)
		}
	}
	if len(colls) > 0 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for _, i := range colls {
				f := s.Traffic[i]
				if tctx.Err() != nil {
					out.Flows[i].Err = fmt.Errorf("not run: %w", tctx.Err())
					continue
				}
				if err := runCollective(tctx, dir, o.OutDir, tools[f.Tool], f, &out.Flows[i]); err != nil {
					out.Flows[i].Err = err
				}
				progress(o, "[%s] %s on %s done at t=%.1fs: %s", s.Name, f.Name, strings.Join(f.Hosts, ","), rel().Seconds(), collectiveLine(out.Flows[i]))
			}
		}()
	}
	for i, f := range s.Traffic {
		if f.IsCollective() {
			continue
		}
		src, dst := pl.Host(f.From), pl.Host(f.To)
		args := []string{wbw, "-d", run.NICSocket(src), "-p", strconv.Itoa(perf.DefaultPort + 1 + i), "-s", strconv.Itoa(f.Size),
			"-q", strconv.Itoa(f.QPs), "-t", strconv.Itoa(f.TxDepth), "-D", strconv.Itoa(int(f.Duration / time.Second)), "--json",
			// Every write signaled: the depth in flight stays what the
			// scenario names (CQ moderation would let it dip to half).
			"--cq-mod", "1"}
		if f.Verify {
			args = append(args, "--verify")
		}
		if f.EVs != "" {
			args = append(args, "--evs", f.EVs)
		}
		if f.Transport != "" {
			args = append(args, "--transport", f.Transport)
		}
		if f.RateBps > 0 {
			args = append(args, "--rate_limit", strconv.FormatFloat(float64(f.RateBps)/1e6, 'g', -1, 64), "--rate_units", "M")
		}
		args = append(args, dst.MgmtAddr.Addr().String())
		cli, err := os.Create(filepath.Join(o.OutDir, "flow-"+f.Name+".client.json"))
		if err != nil {
			return err
		}
		defer cli.Close()
		cliErr, err := os.Create(filepath.Join(o.OutDir, "flow-"+f.Name+".client.txt"))
		if err != nil {
			return err
		}
		defer cliErr.Close()
		wg.Add(1)
		go func() {
			defer wg.Done()
			if f.Start > 0 {
				select {
				case <-zero:
				case <-tctx.Done():
					return
				}
				if !sleepUntil(tctx, t0, f.Start) {
					return
				}
			}
			err := run.Exec(tctx, dir, src.Name, args, nil, cli, cliErr)
			r := &out.Flows[i]
			if err != nil {
				r.Err = fmt.Errorf("client on %s: %w (see %s)", src.Name, err, cliErr.Name())
				return
			}
			r.Average, r.Verified, r.Mismatches, r.Err = readBW(cli.Name())
		}()
	}

	if len(waitFor) > 0 {
		progress(o, "[%s] clients started; waiting for data to arrive at %d destination(s)", s.Name, len(waitFor))
	}
	select {
	case <-zero:
		if len(waitFor) > 0 {
			progress(o, "[%s] traffic flowing %v after the clients started: t=0", s.Name, time.Duration(t0-launched).Round(time.Millisecond))
		} else {
			progress(o, "[%s] %d collective(s) started, one after another: t=0", s.Name, len(colls))
		}
		mu.Lock()
		for _, f := range timeline[:pre] {
			out.Faults = append(out.Faults, Applied{Fault: f, Sent: time.Duration(preSent - t0), T: time.Duration(preDone - t0)})
		}
		mu.Unlock()
	case <-time.After(StartTimeout):
		cancelTraffic()
		<-flowsDoneAfter(&wg)
		return fmt.Errorf("no data arrived within %v of starting the clients (see the flow-*.txt files in %s)", StartTimeout, o.OutDir)
	case <-ctx.Done():
		cancelTraffic()
		<-flowsDoneAfter(&wg)
		return fmt.Errorf("interrupted while the traffic started: %w", ctx.Err())
	}

	// The fault timeline. No new batch starts once the traffic is over
	// (stopFaults), but one under way finishes: only Ctrl-C (ctx) cuts it.
	faultsDone := make(chan struct{})
	fctx, stopFaults := context.WithCancel(tctx)
	defer stopFaults()
	go func() {
		defer close(faultsDone)
		// Faults planned for the same time go in one batch (one lock, one
		// state write), so they take effect together.
		for i := pre; i < len(timeline); {
			j := i + 1
			for j < len(timeline) && timeline[j].At == timeline[i].At {
				j++
			}
			if !sleepUntil(fctx, t0, timeline[i].At) {
				return
			}
			var reqs []run.FaultReq
			for _, f := range timeline[i:j] {
				reqs = append(reqs, run.FaultReq{Target: f.Target, Op: f.Op})
			}
			sent := rel()
			ferr := run.Faults(ctx, dir, reqs, run.Options{BinDir: o.BinDir, Log: o.Log})
			mu.Lock()
			for _, f := range timeline[i:j] {
				out.Faults = append(out.Faults, Applied{Fault: f, Sent: sent, T: rel(), Err: ferr})
			}
			mu.Unlock()
			if ferr != nil {
				o.Log.Error("fault failed", "at", timeline[i].At, "err", ferr)
			}
			i = j
		}
	}()

	// Progress while the traffic runs.
	flowsDone := make(chan struct{})
	go func() { wg.Wait(); close(flowsDone) }()
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	prev, prevT := map[string]float64{}, Monotonic()
wait:
	for {
		select {
		case <-flowsDone:
			break wait
		case <-ctx.Done():
			cancelTraffic()
			<-flowsDone
			return fmt.Errorf("interrupted at %v: %w", rel().Round(time.Millisecond), ctx.Err())
		case <-tick.C:
			mu.Lock()
			now := Monotonic()
			var parts []string
			for _, sp := range specs {
				if !sp.rx || sp.plane >= 0 {
					continue
				}
				var sum float64
				for _, k := range sp.ports {
					id := k.sw.Name + ":" + k.port
					sum += last[id] - prev[id]
				}
				parts = append(parts, fmt.Sprintf("%s %.1f Mbit/s", sp.name, sum*8/(float64(now-prevT)/1e9)/1e6))
			}
			for k, v := range last {
				prev[k] = v
			}
			prevT = now
			nf, ns := len(out.Faults), out.Samples
			mu.Unlock()
			progress(o, "[%s] t=%.1fs/%v  %s  faults %d/%d  samples %d", s.Name, rel().Seconds(), end, strings.Join(parts, "  "), nf, len(timeline), ns)
		}
	}
	stopFaults()
	<-faultsDone
	cancelTraffic()
	if len(colls) > 0 {
		// Collectives end when their iterations do: the run (and every
		// series) ends then, on a whole sampling interval.
		if took := rel(); took > end {
			end = (took + s.Interval - 1).Truncate(s.Interval)
		}
	}
	for i, e := range srvErrs {
		if out.Flows[i].Err == nil {
			out.Flows[i].Err = e
		}
	}
	// Sample until every sampled object has a sample past the end, so
	// that the last step of every series is covered.
	mu.Lock()
	coverAt = t0 + int64(end) + int64(s.Interval)
	mu.Unlock()
	select {
	case <-covered:
	case <-time.After(CoverTimeout):
		return fmt.Errorf("sampling stalled: no sample after the end of the traffic within %v", CoverTimeout)
	}
	stopSampling()
	if err := <-samplerDone; err != nil {
		return fmt.Errorf("sampling: %w", err)
	}
	for _, f := range out.Faults {
		if f.Err != nil {
			return fmt.Errorf("fault %s %s at %v: %w", f.Target, f.Op, f.At, f.Err)
		}
	}
	if len(out.Faults) < len(timeline) {
		n := len(out.Faults)
		why := "the flows ran shorter than the timeline after time zero"
		if timeline[n].At < end && n > 0 {
			last := out.Faults[n-1]
			why = fmt.Sprintf("the faults fell behind: the last one applied, planned at %v, was requested at %v and returned at %v", last.At, last.Sent.Round(time.Millisecond), last.T.Round(time.Millisecond))
		}
		return fmt.Errorf("only %d of %d faults applied before the traffic ended at %v (the next was planned at %v): %s", n, len(timeline), rel().Round(time.Millisecond), timeline[n].At, why)
	}

	// Series, figures, verdicts.
	caps := map[string]float64{}
	for _, sp := range specs {
		var keys []string
		for _, k := range sp.ports {
			keys = append(keys, series.Key(k.sw.Name, k.port, telemetry.KeyTxBytes))
		}
		if sp.goodput {
			keys = counters.Keys(sp.host, telemetry.KeyAckedBytes)
			if len(keys) == 0 {
				o.Log.Warn("no QP telemetry from a sending host; no goodput series", "host", sp.host)
				continue
			}
		}
		var ser series.Series
		if sp.goodput {
			ser, err = counters.Rate(sp.name, "bit/s", keys, t0, t0+int64(end), s.Interval, 8)
		} else {
			// What the emulated links carried: the virtual queues'
			// drain, not the frames admitted (series.Drained says why).
			var ports []series.Port
			for _, k := range sp.ports {
				ports = append(ports, series.Port{Tx: series.Key(k.sw.Name, k.port, telemetry.KeyTxBytes), Queue: series.Key(k.sw.Name, k.port, telemetry.KeyQueueBytes)})
			}
			ser, err = counters.Drained(sp.name, "bit/s", ports, t0, t0+int64(end), s.Interval, 8)
		}
		if err != nil {
			return err
		}
		out.Series[sp.name] = ser
		caps[sp.name] = sp.capacity
	}
	var marks []figure.Mark
	for _, f := range out.Faults {
		marks = append(marks, figure.Mark{T: f.T, Label: f.Target + " " + f.Op.String()})
	}
	for _, sp := range specs {
		if !sp.rx || sp.plane >= 0 {
			continue
		}
		fig := figure.Figure{Title: fmt.Sprintf("%s: bandwidth arriving at %s (switch egress, %v samples)", s.Name, sp.host, s.Interval), Marks: marks}
		fig.Series = append(fig.Series, out.Series[sp.name])
		for p := 0; p < pl.Planes; p++ {
			if ps, ok := out.Series[fmt.Sprintf("%s:p%d", sp.name, p)]; ok {
				fig.Series = append(fig.Series, ps)
			}
		}
		if f, ok := out.Series["fabric:"+sp.host]; ok {
			fig.Series = append(fig.Series, f)
		}
		// The goodput of the flows into this host, when it is the only
		// destination of their sender (else the sender's goodput mixes
		// destinations).
		for _, f := range s.Traffic {
			if "rx:"+f.To != sp.name {
				continue
			}
			only := true
			for _, g := range s.Traffic {
				only = only && (g.From != f.From || g.To == f.To)
			}
			if g, ok := out.Series["goodput:"+f.From]; ok && only {
				fig.Series = append(fig.Series, g)
			}
		}
		out.Figures = append(out.Figures, fig)
	}
	// The flows' RTT: the median of the senders' QP srtt readings over
	// the run, to express recovery times in RTTs.
	var rtts []float64
	for _, f := range s.Traffic {
		for _, v := range counters.Values(counters.Keys(f.From, telemetry.KeySRTT), t0, t0+int64(end)) {
			if v > 0 {
				rtts = append(rtts, v)
			}
		}
	}
	if len(rtts) > 0 {
		slices.Sort(rtts)
		out.RTT = time.Duration(rtts[len(rtts)/2])
	}
	out.Results = verdict.CheckAll(s, data{o: out, cap: caps, counters: &counters, t0: t0})
	return nil
}

// CoverTimeout bounds the wait, after the traffic, for a sample past its
// end from every sampled object. 2 s was too short at load 20–30 on this
// 2-vCPU machine (s12-chaos, 2026-12-03 10:17: "sampling stalled").
const CoverTimeout = 5 * time.Second

// StartBytes is how much must have arrived at a destination for its flow
// to count as started; StartTimeout bounds the wait.
const (
	StartBytes   = 64 << 10
	StartTimeout = 30 * time.Second
)

func flowsDoneAfter(wg *sync.WaitGroup) chan struct{} {
	c := make(chan struct{})
	go func() { wg.Wait(); close(c) }()
	return c
}

// sleepUntil waits until t0+at; false if ctx ended first.
func sleepUntil(ctx context.Context, t0 int64, at time.Duration) bool {
	d := time.Duration(t0 + int64(at) - Monotonic())
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

func readBW(path string) (avg float64, verified bool, mismatches uint64, err error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, false, 0, err
	}
	var doc struct {
		Results []perf.BWResult `json:"results"`
	}
	if err := json.Unmarshal(b, &doc); err != nil || len(doc.Results) == 0 {
		return 0, false, 0, fmt.Errorf("mrc-write-bw --json output %s unreadable: %v", path, err)
	}
	r := doc.Results[len(doc.Results)-1]
	return r.Average, r.Verified, r.Mismatches, nil
}

type portRef struct {
	sw   *plan.Switch
	port string
}

type seriesSpec struct {
	name     string
	rx       bool
	goodput  bool // from the QPs' acked_bytes of host
	host     string
	plane    int // -1: every plane
	ports    []portRef
	capacity float64 // bit/s, 0 = unmodelled
}

// seriesSpecs lists the series of a run: rx:H and rx:H:pP for every flow
// destination, plus every series an expectation names.
func seriesSpecs(s *scenario.Scenario, pl *plan.Plan) ([]seriesSpec, error) {
	crossT1 := map[string]bool{}
	for _, f := range s.Traffic {
		if f.IsCollective() {
			for _, h := range f.Hosts {
				for _, g := range f.Hosts {
					crossT1[h] = crossT1[h] || pl.Host(h).T0 != pl.Host(g).T0
				}
			}
			continue
		}
		if pl.Host(f.From).T0 != pl.Host(f.To).T0 {
			crossT1[f.To] = true
		}
	}
	var names []string
	for _, f := range s.Traffic {
		for _, h := range f.Hosts {
			// What arrives at each member of a collective group, in
			// total and per plane (its figure draws both).
			if !slices.Contains(names, "rx:"+h) {
				names = append(names, "rx:"+h)
				for p := 0; p < pl.Planes; p++ {
					names = append(names, fmt.Sprintf("rx:%s:p%d", h, p))
				}
			}
		}
		if f.IsCollective() {
			continue
		}
		if !slices.Contains(names, "rx:"+f.To) {
			names = append(names, "rx:"+f.To)
			for p := 0; p < pl.Planes; p++ {
				names = append(names, fmt.Sprintf("rx:%s:p%d", f.To, p))
			}
		}
	}
	for _, f := range s.Traffic {
		if !f.IsCollective() && !slices.Contains(names, "goodput:"+f.From) {
			names = append(names, "goodput:"+f.From)
		}
	}
	for _, e := range s.Expect {
		if strings.HasPrefix(e.Series, "qp:") {
			continue // per-QP counters, not a rate series (qp_loss_bound)
		}
		if sw, ok := strings.CutPrefix(e.Series, "uplinks:"); ok {
			sets, err := scenario.UplinkSets(pl, sw)
			if err != nil {
				return nil, err
			}
			for _, set := range sets {
				for _, n := range set {
					if !slices.Contains(names, n) {
						names = append(names, n)
					}
				}
			}
			continue
		}
		if e.Series != "" && !slices.Contains(names, e.Series) {
			names = append(names, e.Series)
		}
		for _, n := range e.SeriesList {
			if !slices.Contains(names, n) {
				names = append(names, n)
			}
		}
		if e.CapacityOf != "" && !slices.Contains(names, e.CapacityOf) {
			names = append(names, e.CapacityOf)
		}
	}
	var out []seriesSpec
	for _, n := range names {
		sp, err := specFor(pl, n, crossT1[strings.Split(n, ":")[1]])
		if err != nil {
			return nil, err
		}
		out = append(out, sp)
	}
	return out, nil
}

// downlink is the T0 port facing host h in plane p.
func downlink(pl *plan.Plan, h string, p int) (portRef, *plan.Port, error) {
	peer := fmt.Sprintf("%s:p%d", h, p)
	for i := range pl.Switches {
		sw := &pl.Switches[i]
		if sw.Role != plan.KindT0 || sw.Plane != p {
			continue
		}
		for j := range sw.Ports {
			if sw.Ports[j].Peer == peer {
				return portRef{sw, sw.Ports[j].Ifname}, &sw.Ports[j], nil
			}
		}
	}
	return portRef{}, nil, fmt.Errorf("no T0 port faces %s", peer)
}

// specFor derives a series' ports and emulated capacity. crossT1 says
// whether traffic into a host crosses a T1: then a plane into it carries at
// most the smaller of its downlink and its T0's fabric ports (the T1 → T0
// links, same model) when those are modelled.
func specFor(pl *plan.Plan, name string, crossT1 bool) (seriesSpec, error) {
	if err := scenario.CheckSeries(pl, name); err != nil {
		return seriesSpec{}, err
	}
	parts := strings.Split(name, ":")
	sp := seriesSpec{name: name, plane: -1}
	switch parts[0] {
	case "rx":
		sp.rx, sp.host = true, parts[1]
		planes := make([]int, 0, pl.Planes)
		if len(parts) == 3 {
			p, _ := strconv.Atoi(strings.TrimPrefix(parts[2], "p"))
			sp.plane = p
			planes = append(planes, p)
		} else {
			for p := 0; p < pl.Planes; p++ {
				planes = append(planes, p)
			}
		}
		for _, p := range planes {
			ref, port, err := downlink(pl, sp.host, p)
			if err != nil {
				return sp, err
			}
			sp.ports = append(sp.ports, ref)
			c := float64(port.Model.CapacityBps)
			if crossT1 {
				var fab float64
				for _, fp := range ref.sw.Ports {
					if fp.Role == "fabric" {
						if fp.Model.CapacityBps == 0 {
							fab = 0
							break
						}
						fab += float64(fp.Model.CapacityBps)
					}
				}
				if fab > 0 && (c == 0 || fab < c) {
					c = fab
				}
			}
			sp.capacity += c
		}
	case "fabric":
		// The T1 ports facing the host's T0, in every plane or one: what
		// the fabric delivered towards the host (S4, S5, S10 are bound
		// there, by the T1 → T0 links).
		sp.host = parts[1]
		planes := []int{}
		if len(parts) == 3 {
			p, _ := strconv.Atoi(strings.TrimPrefix(parts[2], "p"))
			sp.plane = p
			planes = append(planes, p)
		} else {
			for p := 0; p < pl.Planes; p++ {
				planes = append(planes, p)
			}
		}
		unmodelled := false
		for _, p := range planes {
			t0, _, err := downlink(pl, sp.host, p)
			if err != nil {
				return sp, err
			}
			for i := range pl.Switches {
				sw := &pl.Switches[i]
				if sw.Role != plan.KindT1 || sw.Plane != p {
					continue
				}
				for j := range sw.Ports {
					if strings.HasPrefix(sw.Ports[j].Peer, t0.sw.Name+":") {
						sp.ports = append(sp.ports, portRef{sw, sw.Ports[j].Ifname})
						sp.capacity += float64(sw.Ports[j].Model.CapacityBps)
						unmodelled = unmodelled || sw.Ports[j].Model.CapacityBps == 0
					}
				}
			}
		}
		if len(sp.ports) == 0 {
			return sp, fmt.Errorf("series %s: no T1 port faces %s's T0 (a T0-local topology?)", name, sp.host)
		}
		if unmodelled {
			sp.capacity = 0
		}
	case "goodput":
		sp.goodput, sp.host = true, parts[1]
		sp.capacity = float64(pl.HostCapacityBps) * float64(pl.Planes)
	case "tx":
		sw := pl.Switch(parts[1])
		port := sw.Port(parts[2])
		sp.ports = []portRef{{sw, port.Ifname}}
		sp.capacity = float64(port.Model.CapacityBps)
	}
	return sp, nil
}

// lockedWriter serializes the writes of the goroutines that report
// progress.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}

func progress(o Options, format string, args ...any) {
	if o.Progress != nil {
		fmt.Fprintf(o.Progress, format+"\n", args...)
	}
}
