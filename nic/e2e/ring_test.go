package e2e

import (
	"errors"
	"fmt"
	"math"
	"syscall"
	"testing"
	"time"
)

// TestWriteLatWakeups counts, from both daemons' counters, what one
// mrc-write-lat message (half a round trip) costs in wake-ups on real
// AF_XDP ports, on the shared-memory rings and on the socket: on the rings
// a post wakes the sleeping loop through the doorbell at most once and a
// completion wakes the waiting application through its futex at most once,
// and the loop's request eventfd (the socket path's session goroutine
// waking the loop) stays quiet.
func TestWriteLatWakeups(t *testing.T) {
	requireNetns(t)
	tp := newTopo(t, 1)
	const iters = 300
	const maxRingSwitches = 3.0
	for _, tc := range []struct {
		name string
		args []string
		ring bool
	}{
		{"ring", nil, true},
		{"socket", []string{"--no-ring"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sum := func() map[string]uint64 {
				s := map[string]uint64{}
				for _, h := range tp.h {
					for k, v := range daemonCounters(t, h) {
						s[k] += v
					}
				}
				return s
			}
			// A loaded machine (make test runs packages side by side)
			// can make the waits outlast the 1 ms hold for a whole run:
			// the rings' bound gets up to three runs and holds if one
			// of them meets it. Without the held wait every run reads
			// 4.2-5.0 (4.35-4.96 on 2026-12-05), so a broken hold still fails all three.
			var c0, c1 map[string]uint64
			best := math.Inf(1)
			for attempt := 1; ; attempt++ {
				c0 = sum()
				args := append([]string{"-n", fmt.Sprint(iters), "--verify"}, tc.args...)
				out, switches, err := tp.pairRunSwitches(t, 2*time.Minute, "mrc-write-lat", args...)
				if err != nil {
					t.Fatalf("mrc-write-lat: %v\n%s", err, out)
				}
				c1 = sum()
				// Both tools' voluntary context switches (all their
				// threads, from getrusage), the connection set-up's
				// included.
				appSwitches := float64(switches) / (2 * iters)
				best = min(best, appSwitches)
				t.Logf("run %d, per message, both applications: %.2f voluntary context switches", attempt, appSwitches)
				if !tc.ring || best <= maxRingSwitches || attempt == 3 {
					break
				}
			}
			// The bound sits between the two mechanisms as measured on
			// the 2026-12-04 machine: with the held wait 1.5-1.65 alone
			// and 2.23 under make test's parallel packages (a wait that
			// outlasts the 1 ms hold hands the P over after all); without
			// it (MRC_VERBS_HELD_WAIT=0) 4.45-4.79. It was 2 until that
			// CI run failed at 2.23; a CI run of 2026-12-05 read 3.73 in
			// its one run, hence the three.
			if tc.ring && best > maxRingSwitches {
				t.Fatalf("%.2f voluntary application context switches per message on the rings in the best of 3 runs, want at most %v (about one wake-up per completion, plus the waits a loaded machine makes longer than the held 1 ms; the Go runtime handing the waiter's P to another thread on every wait costs 4.5: verbs HeldWait)", best, maxRingSwitches)
			}
			d := func(k string) float64 { return float64(c1[k]-c0[k]) / (2 * iters) }
			t.Logf("per message (half round trip), both daemons: ring posts %.2f, doorbells %.2f, application futex wakes %.2f, loop eventfd wakes %.2f, loop sleeps %.2f",
				d("ring_posts"), d("ring_doorbells"), d("ring_app_wakes"), d("wakes"), d("sleeps"))
			if !tc.ring {
				if c1["ring_posts"] != c0["ring_posts"] {
					t.Fatalf("--no-ring: %d work requests came through rings", c1["ring_posts"]-c0["ring_posts"])
				}
				return
			}
			if d("ring_posts") < 1 {
				t.Fatalf("%.2f ring posts per message, want every ping and pong through the rings", d("ring_posts"))
			}
			// Bounds with slack for the test's own control requests
			// (mrcctl, connect), which wake the loop's eventfd too.
			if d("ring_doorbells") > 1.1 || d("ring_app_wakes") > 1.1 {
				t.Fatalf("more than one doorbell or application wake-up per message")
			}
			if d("wakes") > 0.1 {
				t.Fatalf("%.2f loop eventfd wake-ups per message on the rings, want ~0 (that is the socket path's)", d("wakes"))
			}
		})
	}
}

// pairRunSwitches is pairRun that also returns the voluntary context
// switches (a thread went to sleep; preemptions are the machine's load) of
// both tools (ip netns exec execs the tool, so the
// process's rusage is the tool's).
func (tp *topo) pairRunSwitches(t testing.TB, timeout time.Duration, name string, args ...string) (string, int64, error) {
	t.Helper()
	r := tp.pairCmds(t, timeout, name, args...)
	if r.err != nil || r.serr != nil {
		return r.out, 0, errors.Join(r.err, r.serr)
	}
	var n int64
	for _, c := range r.cmds {
		if ru, ok := c.ProcessState.SysUsage().(*syscall.Rusage); ok {
			n += ru.Nvcsw
		}
	}
	return r.out, n, nil
}
