package e2e

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The latency path's stages, from the scheduler's own trace: `perf sched
// record -a` around one mrc-write-lat run, read back with `perf sched
// timehist -w`, which prints every wake-up (who woke whom, when) and every
// switch-out (with how long the task ran). A one-way X → Y is cut at the
// hand-offs the trace shows:
//
//	kick:  X's run loop wakes Y's run loop (the frame reached Y's socket)
//	loop:  Y's run loop gets a CPU
//	wake:  Y's run loop wakes Y's application (CQE written, futex woken)
//	app:   Y's application gets a CPU
//	reply: Y's run loop wakes X's run loop again (the reply kicked)
//
// A one-way whose reply finds X's loop awake has no "reply" wake-up; its
// last stage is not counted (the first three are).

// schedEvent is one line of `perf sched timehist -w`.
type schedEvent struct {
	t      float64 // seconds
	wake   bool    // a wake-up: tid woke target; else tid got a CPU at t
	tid    int
	pid    int
	target int // woken tid
	tpid   int
	run    float64 // seconds on the CPU from t (switch-ins)
}

var (
	timehistLine = regexp.MustCompile(`^\s*(\d+\.\d+)\s+\[\d+\]\s+.*?\[(\d+)(?:/(\d+))?\]\s+(.*)$`)
	timehistWake = regexp.MustCompile(`awakened: .*?\[(\d+)(?:/(\d+))?\]`)
)

// parseTimehist reads `perf sched timehist -w` output; a switch-out line
// becomes the switch-in it implies (its time minus its run time).
func parseTimehist(r io.Reader) ([]schedEvent, error) {
	var evs []schedEvent
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<16), 1<<20)
	for sc.Scan() {
		m := timehistLine.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		t, _ := strconv.ParseFloat(m[1], 64)
		tid, _ := strconv.Atoi(m[2])
		pid := tid
		if m[3] != "" {
			pid, _ = strconv.Atoi(m[3])
		}
		if w := timehistWake.FindStringSubmatch(m[4]); w != nil {
			tg, _ := strconv.Atoi(w[1])
			tp := tg
			if w[2] != "" {
				tp, _ = strconv.Atoi(w[2])
			}
			evs = append(evs, schedEvent{t: t, wake: true, tid: tid, pid: pid, target: tg, tpid: tp})
			continue
		}
		f := strings.Fields(m[4])
		if len(f) < 3 {
			continue
		}
		run, err := strconv.ParseFloat(f[2], 64)
		if err != nil {
			continue
		}
		evs = append(evs, schedEvent{t: t - run/1e3, tid: tid, pid: pid, run: run / 1e3})
	}
	slices.SortStableFunc(evs, func(a, b schedEvent) int {
		switch {
		case a.t < b.t:
			return -1
		case a.t > b.t:
			return 1
		}
		return 0
	})
	return evs, sc.Err()
}

// latRoles names the threads of one ping-pong: each side's run loop (a
// thread id) and application (a process id, any of its threads).
type latRoles struct{ loop, app [2]int }

// stageNames are latStages' stages, in order.
var stageNames = []string{
	"frame kicked → peer's loop runs",
	"peer's loop runs → its application woken (receive, place, CQE, futex wake)",
	"application woken → it runs",
	"application runs → reply kicked (post, doorbell if the loop sleeps, encode, kick)",
}

// latStages cuts the one-ways out of evs (see the comment at the top of
// the file) and returns each stage's samples in µs.
func latStages(evs []schedEvent, r latRoles) [][]float64 {
	side := func(e schedEvent, loop bool) int {
		for i := range 2 {
			if loop && e.tid == r.loop[i] || !loop && e.pid == r.app[i] {
				return i
			}
		}
		return -1
	}
	woke := func(e schedEvent, loop bool) int {
		for i := range 2 {
			if loop && e.target == r.loop[i] || !loop && e.tpid == r.app[i] {
				return i
			}
		}
		return -1
	}
	out := make([][]float64, len(stageNames))
	for i, e := range evs {
		x := side(e, true)
		if !e.wake || x < 0 || woke(e, true) != 1-x {
			continue
		}
		y := 1 - x
		var ts [4]float64 // loop in, app woken, app in, reply
		k := 0
		for _, f := range evs[i+1:] {
			if f.t-e.t > 0.05 {
				break
			}
			if f.wake && side(f, true) == x && woke(f, true) == y {
				break // the next frame X → Y: a reply that found X awake
			}
			switch {
			case k == 0 && !f.wake && f.tid == r.loop[y]:
			case k == 1 && f.wake && side(f, true) == y && woke(f, false) == y:
			case k == 2 && !f.wake && f.pid == r.app[y]:
			case k == 3 && f.wake && side(f, true) == y && woke(f, true) == x:
			default:
				continue
			}
			ts[k] = f.t
			k++
			if k == 4 {
				break
			}
		}
		prev := e.t
		for s := 0; s < k; s++ {
			out[s] = append(out[s], (ts[s]-prev)*1e6)
			prev = ts[s]
		}
	}
	return out
}

// BenchmarkLatStages runs mrc-write-lat -s 2 on a veth pair under `perf
// sched record -a` and prints where a one-way's time goes, stage by stage
// (median and mean over the run's one-ways), beside the tool's own
// t_typical. MRC_BENCH_BASE_BIN=<old bin dir> runs the same with those
// binaries after this tree's, for a before/after; MRC_BENCH_LAT_ITERS sets
// the iterations (default 2000). Needs perf(1).
func BenchmarkLatStages(b *testing.B) {
	requireNetns(b)
	if _, err := exec.LookPath("perf"); err != nil {
		b.Skip("perf(1) not installed (Debian: linux-perf): the stages come from perf sched")
	}
	iters := 2000
	if v := os.Getenv("MRC_BENCH_LAT_ITERS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 1 {
			b.Fatalf("MRC_BENCH_LAT_ITERS=%q: want an integer above 1", v)
		}
		iters = n
	}
	tp := newTopoStart(b, 1, false)
	bins := []string{tp.h[0].bin}
	if base := os.Getenv("MRC_BENCH_BASE_BIN"); base != "" {
		bins = append(bins, base)
	}
	for i := 0; i < b.N; i++ {
		for _, bin := range bins {
			for _, h := range tp.h {
				h.bin = bin
				h.start(b)
			}
			latStagesRun(b, tp, bin, iters)
			for _, h := range tp.h {
				h.stop()
			}
		}
	}
}

func latStagesRun(b *testing.B, tp *topo, bin string, iters int) {
	dir := b.TempDir()
	data := filepath.Join(dir, "sched.data")
	// perf records the whole machine for as long as the run lasts; the
	// run is bounded by its iteration count and the timeout.
	// -m: a larger ring per CPU, so that a loaded machine loses fewer
	// events (a lost switch or wake-up drops the one-way it belongs to).
	rec := exec.Command("perf", "sched", "record", "-a", "-m", "1024", "-o", data, "--", "sleep", "3600")
	rec.Stdout, rec.Stderr = io.Discard, io.Discard
	if err := rec.Start(); err != nil {
		b.Fatalf("perf sched record: %v", err)
	}
	// perf writes its file's header before it enables the tracepoints;
	// on a loaded machine that took more than 300 ms. Wait for the file,
	// then give the enabling a moment (there is no signal for it).
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if fi, err := os.Stat(data); err == nil && fi.Size() > 0 {
			break
		}
		if time.Now().After(deadline) {
			_ = rec.Process.Kill()
			b.Fatalf("perf sched record wrote nothing to %s in 10 s", data)
		}
	}
	time.Sleep(500 * time.Millisecond)
	var lat latJSON
	var pids [2]int
	runJSONPids(b, tp, "mrc-write-lat", &lat, &pids, "-s", "2", "-n", strconv.Itoa(iters))
	_ = rec.Process.Signal(os.Interrupt)
	_ = rec.Wait()
	out, err := exec.Command("perf", "sched", "timehist", "-w", "-i", data).Output()
	if err != nil {
		b.Fatalf("perf sched timehist: %v", err)
	}
	evs, err := parseTimehist(strings.NewReader(string(out)))
	if err != nil {
		b.Fatal(err)
	}
	var r latRoles
	for i, h := range tp.h {
		r.loop[i] = busiestThread(evs, h.daemon.Process.Pid)
	}
	// pids[0] is the server's (h[1]), pids[1] the client's (h[0]).
	r.app = [2]int{pids[1], pids[0]}
	st := latStages(evs, r)
	if len(st[0]) == 0 {
		// Seen under heavy load: perf's record started late or lost the
		// run's events. Say so rather than print empty stages.
		fmt.Printf("latency stages, %s: no one-way found in %d scheduler events (loops %v, applications %v): perf sched lost the run; run again\n", bin, len(evs), r.loop, r.app)
		return
	}
	typical := 0.0
	if len(lat.Results) == 1 {
		typical = lat.Results[0].Typical
	}
	fmt.Printf("latency stages, %s, %d iterations, load %s; mrc-write-lat t_typical %.1f µs\n", bin, iters, loadavg(), typical)
	// Each process's threads: how often they got a CPU and for how
	// long, per round trip (the connection set-up included).
	for _, p := range []struct {
		name string
		pid  int
	}{{"client mrc-nicd", tp.h[0].daemon.Process.Pid}, {"server mrc-nicd", tp.h[1].daemon.Process.Pid},
		{"client mrc-write-lat", pids[1]}, {"server mrc-write-lat", pids[0]}} {
		ins, cpu, threads := 0, 0.0, map[int]bool{}
		for _, e := range evs {
			if !e.wake && e.pid == p.pid {
				ins++
				cpu += e.run
				threads[e.tid] = true
			}
		}
		fmt.Printf("  %-20s %d threads ran: %.2f switch-ins and %.1f µs of CPU per round trip\n", p.name, len(threads), float64(ins)/float64(iters), cpu*1e6/float64(iters))
	}
	for i, name := range stageNames {
		med, _, _, ok := stats(st[i])
		if !ok {
			fmt.Printf("  %-82s no samples\n", name)
			continue
		}
		sum := 0.0
		for _, v := range st[i] {
			sum += v
		}
		fmt.Printf("  %-82s median %6.1f µs, mean %6.1f µs (%d one-ways)\n", name, med, sum/float64(len(st[i])), len(st[i]))
	}
}

// busiestThread is the thread of pid that got a CPU most often: a
// daemon's run loop.
func busiestThread(evs []schedEvent, pid int) int {
	n := map[int]int{}
	for _, e := range evs {
		if !e.wake && e.pid == pid {
			n[e.tid]++
		}
	}
	best, tid := 0, 0
	for t, c := range n {
		if c > best {
			best, tid = c, t
		}
	}
	return tid
}

// A few lines of real `perf sched timehist -w` output (loops 101/100 and
// 201/200, applications 300 and 400): one one-way from h0 to h1 with every
// stage, and the next one-way from h1 to h0, whose reply the trace cuts off.
const timehistSample = `           time    cpu  task name                       wait time  sch delay   run time
                        [tid/pid]                          (msec)     (msec)     (msec)
--------------- ------  ------------------------------  ---------  ---------  ---------
   100.000100 [0000]  mrc-nicd[101/100]                                            awakened: mrc-nicd[201/200]
   100.000110 [0000]  mrc-nicd[101/100]               0.004      0.000      0.003
   100.000120 [0001]  mrc-nicd[201/200]                                            awakened: mrc-write-lat[401/400]
   100.000125 [0001]  mrc-nicd[201/200]               0.050      0.001      0.020
   100.000160 [0001]  mrc-write-lat[401/400]          0.100      0.002      0.010
   100.000200 [0001]  mrc-nicd[201/200]                                            awakened: mrc-nicd[101/100]
   100.000230 [0000]  mrc-nicd[101/100]                                            awakened: mrc-write-lat[300]
   100.000240 [0000]  mrc-nicd[101/100]               0.090      0.002      0.020
   100.000260 [0000]  mrc-write-lat[300]              0.200      0.003      0.010
`

func TestLatStagesFromTimehist(t *testing.T) {
	evs, err := parseTimehist(strings.NewReader(timehistSample))
	if err != nil {
		t.Fatal(err)
	}
	st := latStages(evs, latRoles{loop: [2]int{101, 201}, app: [2]int{300, 400}})
	// h0 → h1: kick 100.000100, loop in 100.000105, app woken
	// 100.000120, app in 100.000150, reply 100.000200. h1 → h0: kick
	// 100.000200, loop in 100.000220, app woken 100.000230, app in
	// 100.000250, no reply.
	want := [][]float64{{5, 20}, {15, 10}, {30, 20}, {50}}
	for i := range want {
		if len(st[i]) != len(want[i]) {
			t.Fatalf("stage %q: %v, want %v", stageNames[i], st[i], want[i])
		}
		for j := range want[i] {
			if d := st[i][j] - want[i][j]; d > 0.01 || d < -0.01 {
				t.Fatalf("stage %q: %v µs, want %v", stageNames[i], st[i], want[i])
			}
		}
	}
}
