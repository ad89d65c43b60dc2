package daemon

import (
	"context"
	"io"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/softmrc/softmrc/internal/lockedbuf"
	"github.com/softmrc/softmrc/internal/mrc"
	"github.com/softmrc/softmrc/internal/wire"
	"github.com/softmrc/softmrc/nic/config"
	"github.com/softmrc/softmrc/nic/xsk"
)

const ms = mrc.Millisecond

// TestGapWatch feeds turn times, the loop's sleep and the thread's
// statistics, and checks which turns are gaps and what they are said to be.
func TestGapWatch(t *testing.T) {
	type step struct {
		at, slept mrc.Time  // the turn's wall time and the loop's total sleep
		stat      schedStat // what the statistics read at that time
		gap       mrc.Time  // the gap the turn reports (0: none)
		cause     string    // its cause's first word
	}
	for _, tc := range []struct {
		name    string
		noStats bool
		steps   []step
		max     mrc.Time
	}{
		{name: "turns close together", steps: []step{{at: 0}, {at: 1 * ms}, {at: 40 * ms}, {at: 89 * ms}}, max: 49 * ms},
		{name: "the loop's own sleep is no gap", steps: []step{
			{at: 0}, {at: 500 * ms, slept: 495 * ms}, {at: 700 * ms, slept: 690 * ms},
		}, max: 5 * ms},
		{name: "descheduled", steps: []step{
			{at: 0},
			{at: 300 * ms, slept: 10 * ms, stat: schedStat{run: 5 * ms, wait: 280 * ms}, gap: 290 * ms, cause: "descheduled"},
		}, max: 290 * ms},
		{name: "a long turn", steps: []step{
			{at: 0, stat: schedStat{run: 100 * ms}},
			{at: 120 * ms, stat: schedStat{run: 215 * ms, wait: 10 * ms}, gap: 120 * ms, cause: "busy"},
		}, max: 120 * ms},
		{name: "blocked, with a garbage collection", steps: []step{
			{at: 0, stat: schedStat{gcs: 3}},
			{at: 60 * ms, stat: schedStat{run: 2 * ms, wait: 1 * ms, gcs: 4}, gap: 60 * ms, cause: "blocked"},
		}, max: 60 * ms},
		{name: "a sleep that overran its timeout", steps: []step{
			// The loop counts a sleep only up to the timeout it asked
			// for (idle): 100 ms of a 700 ms wait.
			{at: 0}, {at: 700 * ms, slept: 100 * ms, stat: schedStat{wait: 590 * ms}, gap: 600 * ms, cause: "descheduled"},
		}, max: 600 * ms},
		{name: "the base is refreshed between gaps", steps: []step{
			{at: 0, stat: schedStat{wait: 1000 * ms}},
			{at: 40 * ms, stat: schedStat{wait: 1000 * ms}},
			{at: 80 * ms, stat: schedStat{wait: 1000 * ms}},
			{at: 120 * ms, stat: schedStat{run: 10 * ms, wait: 1000 * ms}}, // checked: 120 ms since the first
			// Only the run since the last check counts: 60 ms of 70.
			{at: 190 * ms, stat: schedStat{run: 70 * ms, wait: 1005 * ms}, gap: 70 * ms, cause: "busy"},
		}, max: 70 * ms},
		{name: "no statistics", noStats: true, steps: []step{
			{at: 0}, {at: 100 * ms, gap: 100 * ms, cause: "unknown"},
		}, max: 100 * ms},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var cur schedStat
			w := gapWatch{read: func() (schedStat, bool) { return cur, !tc.noStats }}
			for i, s := range tc.steps {
				cur = s.stat
				g, ok := w.turn(s.at, s.slept)
				if ok != (s.gap > 0) || g.gap != s.gap {
					t.Fatalf("turn %d at %v: gap %v (reported %v), want %v", i, time.Duration(s.at), time.Duration(g.gap), ok, time.Duration(s.gap))
				}
				if !ok {
					continue
				}
				if c := g.cause(); !strings.HasPrefix(c, s.cause) {
					t.Errorf("turn %d: cause %q, want %s…", i, c, s.cause)
				}
			}
			if w.max != tc.max {
				t.Errorf("longest gap %v, want %v", time.Duration(w.max), time.Duration(tc.max))
			}
		})
	}
}

func TestParseSchedStat(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want schedStat
		ok   bool
	}{
		{"5993680 24867 2\n", schedStat{run: 5993680, wait: 24867}, true},
		{"1 2", schedStat{run: 1, wait: 2}, true},
		{"", schedStat{}, false},
		{"12\n", schedStat{}, false},
		{"x 2 3\n", schedStat{}, false},
	} {
		got, ok := parseSchedStat([]byte(tc.in))
		if got != tc.want || ok != tc.ok {
			t.Errorf("parseSchedStat(%q) = %+v, %v; want %+v, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}

// TestThreadStats reads this thread's statistics twice around some work:
// the CPU time grows by at least the work.
func TestThreadStats(t *testing.T) {
	if _, err := os.Stat("/proc/thread-self/schedstat"); err != nil {
		t.Skipf("no /proc/thread-self/schedstat (kernel without CONFIG_SCHED_INFO): %v", err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		// The file names the thread that opened it: keep to one.
		runtime.LockOSThread()
		ts := openThreadStats()
		defer ts.close()
		a, ok := ts.read()
		if !ok {
			t.Error("no statistics read")
			return
		}
		spinCPU(20 * time.Millisecond)
		b, _ := ts.read()
		if d := time.Duration(b.run - a.run); d < 20*time.Millisecond {
			t.Errorf("the thread ran %v over 20 ms of its own CPU time", d)
		}
	}()
	<-done
}

// spinCPU burns d of the calling thread's CPU time.
func spinCPU(d time.Duration) {
	var ts unix.Timespec
	cpu := func() time.Duration {
		_ = unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts)
		return time.Duration(ts.Nano())
	}
	end := cpu() + d
	for cpu() < end {
	}
}

// syncBuf is a log sink the test reads while the daemon writes.
type syncBuf = lockedbuf.Buffer

// slowWriter delays every write by d before passing it to w.
type slowWriter struct {
	w io.Writer
	d time.Duration
}

func (s slowWriter) Write(p []byte) (int, error) {
	time.Sleep(s.d)
	return s.w.Write(p)
}

// TestLoopGapLogged holds a running daemon's loop for one turn, first
// asleep, then on the CPU, and checks that each hold is counted, logged
// with what it was, and is the longest gap.
func TestLoopGapLogged(t *testing.T) {
	if _, err := os.Stat("/proc/thread-self/schedstat"); err != nil {
		t.Skipf("no /proc/thread-self/schedstat (kernel without CONFIG_SCHED_INFO): %v", err)
	}
	var logs syncBuf
	// A slow log sink (a loaded machine's): the test waits for the
	// counter, so the line must be written before the counter moves.
	d := runPipeDaemon(t, nil, slowWriter{&logs, 30 * time.Millisecond})

	const hold = 120 * time.Millisecond
	for i, tc := range []struct {
		name string
		hold func()
		// check judges the logged line's on-CPU time.
		check func(onCPU time.Duration) bool
		want  string
	}{
		{"asleep", func() { time.Sleep(hold) }, func(c time.Duration) bool { return c < hold/2 }, "less than half the hold on a CPU"},
		{"on the CPU", func() { spinCPU(hold) }, func(c time.Duration) bool { return c >= hold }, "at least the hold on a CPU"},
	} {
		held := make(chan struct{})
		if err := d.exec(func() {
			d.turnHook = func() { d.turnHook = nil; tc.hold(); close(held) }
		}); err != nil {
			t.Fatal(err)
		}
		<-held
		// The next turn finds the gap; wait for its counter.
		deadline := time.Now().Add(10 * time.Second)
		for d.c.gaps.Load() < uint64(i+1) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: loop_gaps %d after a %v hold, want %d", tc.name, d.c.gaps.Load(), hold, i+1)
			}
			time.Sleep(time.Millisecond)
		}
		lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
		var line string
		for _, l := range lines {
			if strings.Contains(l, "run loop stalled") {
				line = l // the latest
			}
		}
		if line == "" {
			t.Fatalf("%s: no \"run loop stalled\" line in the log:\n%s", tc.name, logs.String())
		}
		gap, onCPU := logDuration(t, line, "gap"), logDuration(t, line, "on_cpu")
		if gap < hold {
			t.Errorf("%s: logged gap %v, held %v: %s", tc.name, gap, hold, line)
		}
		if !tc.check(onCPU) {
			t.Errorf("%s: on_cpu %v, want %s: %s", tc.name, onCPU, tc.want, line)
		}
		if max := time.Duration(d.c.gapMaxNs.Load()).Round(time.Microsecond); max < gap { // the log rounds to µs
			t.Errorf("%s: loop_gap_max %v below the logged gap %v", tc.name, max, gap)
		}
	}
}

// logDuration is key's duration in a slog text line.
func logDuration(t *testing.T, line, key string) time.Duration {
	t.Helper()
	for _, f := range strings.Fields(line) {
		if v, ok := strings.CutPrefix(f, key+"="); ok {
			d, err := time.ParseDuration(v)
			if err != nil {
				t.Fatalf("%s=%q: %v", key, v, err)
			}
			return d
		}
	}
	t.Fatalf("no %s= in %q", key, line)
	return 0
}

// runPipeDaemon runs a daemon with one in-memory port until the test ends,
// its log into logs; set changes its config first.
func runPipeDaemon(t *testing.T, set func(*config.Config), logs io.Writer) *Daemon {
	t.Helper()
	dir := t.TempDir()
	cfg := &config.Config{Host: "h1", Mode: config.ModeECMP, EVs: 8, DeviceSocket: filepath.Join(dir, "h1.sock")}
	cfg.Ports = []config.Port{{Name: "p0", Interface: "pipe0", MAC: wire.MAC{2, 0, 0, 0, 1, 0},
		NeighborMAC: wire.MAC{2, 0, 0, 0, 2, 0}, Address: netip.MustParseAddr("fd00::1")}}
	if set != nil {
		set(cfg)
	}
	cfg.SetDefaults()
	pa, _ := xsk.NewPipe("pa", "pb", 0)
	d, err := New(Options{Config: cfg, Ports: []xsk.Port{pa}, Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	return d
}
