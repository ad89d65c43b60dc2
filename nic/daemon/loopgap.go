package daemon

import (
	"bytes"
	"os"
	"runtime/metrics"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/softmrc/softmrc/internal/mrc"
)

// The gap watch. A run-loop turn that starts long after the previous one,
// the loop's own sleep not counted, is a time nobody answered the NIC's
// ports: a RoCE peer with perftest's 67 ms ACK timeout and 7 retries gives
// up after about half a second of it (S8's RoCE QP errors of 2026-12-05
// followed one such gap of its receiver, whose cause nothing recorded).
// The watch logs each gap of gapWarn or more with where the time went, from
// the loop thread's scheduler statistics (/proc/thread-self/schedstat): on
// a CPU (a long turn: the daemon's own work), waiting for one (descheduled:
// the host is short of CPU), or neither (blocked: the Go runtime stopping
// the world, a page fault, a blocking call). It costs one monotonic clock
// read a turn, and one read of the statistics every gapCheckEvery.

// gapWarn is the shortest gap between two turns that is logged and
// counted: a tenth of the 0.5 s a perftest RoCE peer survives.
const gapWarn = 50 * mrc.Millisecond

// gapCheckEvery is how often the watch takes the thread's statistics as
// the base a gap's are compared with: a logged gap's window holds at most
// this much besides the gap.
const gapCheckEvery = 100 * mrc.Millisecond

// schedStat is a thread's cumulative time on a CPU and waiting for one,
// and the Go runtime's garbage collections so far.
type schedStat struct {
	run, wait mrc.Time
	gcs       uint64
}

// loopGap is one gap the watch found.
type loopGap struct {
	gap    mrc.Time // from the previous turn's start, less the loop's sleep
	window mrc.Time // what run, wait and gcs cover: the gap and what came just before it
	run    mrc.Time // on a CPU in the window
	wait   mrc.Time // runnable, waiting for a CPU
	gcs    uint64   // garbage collections that started in the window
	stats  bool     // run, wait and gcs were read
}

// cause names where most of the gap went.
func (g loopGap) cause() string {
	switch {
	case !g.stats:
		return "unknown (no scheduler statistics)"
	case g.wait*2 >= g.gap:
		return "descheduled: waiting for a CPU"
	case g.run*2 >= g.gap:
		return "busy: the daemon's own work in one turn"
	default:
		return "blocked: off the CPU, not waiting for one"
	}
}

// gapWatch is the loop's watch; loop only.
type gapWatch struct {
	turnAt  mrc.Time // wall time of the last turn's start
	slept   mrc.Time // loopClock.slept then
	checkAt mrc.Time // wall time of base
	base    schedStat
	ok      bool // base was read
	started bool
	max     mrc.Time
	maxNs   *atomic.Uint64 // where max is published (metrics), or nil
	// read returns the loop thread's statistics (tests replace it).
	read func() (schedStat, bool)
}

// turn is called at each turn's start with the wall time and the loop's
// total sleep so far. It reports a gap of gapWarn or more.
func (w *gapWatch) turn(now, slept mrc.Time) (loopGap, bool) {
	if !w.started {
		w.started = true
		w.turnAt, w.slept = now, slept
		w.check(now)
		return loopGap{}, false
	}
	gap := now - w.turnAt - (slept - w.slept)
	w.turnAt, w.slept = now, slept
	if gap > w.max {
		w.max = gap
		if w.maxNs != nil {
			w.maxNs.Store(uint64(gap))
		}
	}
	if gap < gapWarn {
		if now-w.checkAt >= gapCheckEvery {
			w.check(now)
		}
		return loopGap{}, false
	}
	g := loopGap{gap: gap, window: now - w.checkAt}
	if w.ok {
		if s, ok := w.read(); ok {
			g.stats = true
			g.run, g.wait, g.gcs = s.run-w.base.run, s.wait-w.base.wait, s.gcs-w.base.gcs
		}
	}
	w.check(now)
	return g, true
}

func (w *gapWatch) check(now mrc.Time) {
	w.checkAt = now
	w.base, w.ok = w.read()
}

// threadStats reads the calling thread's statistics; the loop keeps its
// locked thread, so the file opened once stays its own.
type threadStats struct {
	f      *os.File
	buf    [128]byte
	sample [1]metrics.Sample
}

func openThreadStats() *threadStats {
	ts := &threadStats{}
	ts.sample[0].Name = "/gc/cycles/total:gc-cycles"
	// Without schedstat (a kernel without CONFIG_SCHED_INFO) gaps are
	// still counted and logged, with an unknown cause.
	ts.f, _ = os.Open("/proc/thread-self/schedstat")
	return ts
}

func (ts *threadStats) read() (schedStat, bool) {
	if ts.f == nil {
		return schedStat{}, false
	}
	n, err := ts.f.ReadAt(ts.buf[:], 0)
	if n == 0 && err != nil {
		return schedStat{}, false
	}
	s, ok := parseSchedStat(ts.buf[:n])
	metrics.Read(ts.sample[:])
	if ts.sample[0].Value.Kind() == metrics.KindUint64 {
		s.gcs = ts.sample[0].Value.Uint64()
	}
	return s, ok
}

func (ts *threadStats) close() {
	if ts.f != nil {
		ts.f.Close()
	}
}

// parseSchedStat reads "run_ns wait_ns timeslices".
func parseSchedStat(b []byte) (schedStat, bool) {
	f := bytes.Fields(b)
	if len(f) < 2 {
		return schedStat{}, false
	}
	run, err1 := strconv.ParseInt(string(f[0]), 10, 64)
	wait, err2 := strconv.ParseInt(string(f[1]), 10, 64)
	if err1 != nil || err2 != nil {
		return schedStat{}, false
	}
	return schedStat{run: mrc.Time(run), wait: mrc.Time(wait)}, true
}

// logGap logs and counts one gap.
func (d *Daemon) logGap(g loopGap) {
	args := []any{"gap", time.Duration(g.gap).Round(time.Microsecond), "cause", g.cause()}
	if g.stats {
		args = append(args, "window", time.Duration(g.window).Round(time.Microsecond),
			"on_cpu", time.Duration(g.run).Round(time.Microsecond),
			"waiting_for_cpu", time.Duration(g.wait).Round(time.Microsecond),
			"gc_cycles", g.gcs)
	}
	d.log.Warn("run loop stalled: no port was served", args...)
	// Counted after the line is written: whoever sees the counter move
	// (mrcctl, a test) finds the line in the log.
	d.c.gaps.Add(1)
}
