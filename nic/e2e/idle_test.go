package e2e

import (
	"encoding/json"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/softmrc/softmrc/nic/vproto"
)

// daemonCounters reads h's run-loop counters (mrcctl -json counters).
func daemonCounters(t testing.TB, h *host) map[string]uint64 { return nicCounters(t, h).Daemon }

// nicCounters is h's `mrcctl -json counters`.
func nicCounters(t testing.TB, h *host) vproto.Counters {
	t.Helper()
	b, err := exec.Command(filepath.Join(h.bin, "mrcctl"), "-d", h.cfg.DeviceSocket, "-json", "counters").Output()
	if err != nil {
		t.Fatalf("mrcctl counters in %s: %v", h.ns, err)
	}
	var c vproto.Counters
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatalf("mrcctl -json counters in %s: %v: %s", h.ns, err, b)
	}
	return c
}

// An idle mrc-nicd (AF_XDP ports, no QP, the default busy_poll) sleeps in
// ppoll: its run loop turns about 10 times a second (the 100 ms bound on a
// sleep, so that shutdown is seen) plus once per mrcctl request, after which
// it polls for busy_poll (those turns are busy_poll_turns), and it uses well
// under 1 % of a core. make bench-nic measures the CPU over 10 s; here the
// count of the other turns is the assertion (a loop that spins without work
// makes millions) and the CPU a loose bound that a spin would break too.
func TestIdleDaemonSleeps(t *testing.T) {
	requireNetns(t)
	tp := newTopo(t, 1)
	h := tp.h[0]
	pid := h.daemon.Process.Pid
	const window = 2 * time.Second
	c0 := daemonCounters(t, h)
	cpu0, err := procCPUTicks(pid)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(window) // the window the daemon is left idle in: nothing to wait on
	cpu1, err := procCPUTicks(pid)
	if err != nil {
		t.Fatal(err)
	}
	c1 := daemonCounters(t, h)
	// The turns spent polling after the first mrcctl request's work
	// (busy_poll) are not idle turns.
	spins := c1["busy_poll_turns"] - c0["busy_poll_turns"]
	loops, sleeps := c1["loops"]-c0["loops"]-spins, c1["sleeps"]-c0["sleeps"]
	cpu := 100 * (cpu1 - cpu0) / clockTicks / window.Seconds()
	t.Logf("idle for %v: %d loops besides %d busy-poll turns, %d sleeps, %.1f %% of a core", window, loops, spins, sleeps, cpu)
	// 10/s from the 100 ms bound, a few for the two mrcctl requests.
	if max := uint64(window.Seconds()*10) + 10; loops > max {
		t.Errorf("the idle loop turned %d times in %v (want at most %d): it is not sleeping", loops, window, max)
	}
	if min := uint64(window.Seconds() * 5); sleeps < min {
		t.Errorf("the idle loop slept %d times in %v (want at least %d, one per 100 ms bound): it polls instead of sleeping", sleeps, window, min)
	}
	if loops > sleeps+5 {
		t.Errorf("%d loops but %d sleeps: the idle loop spins between sleeps", loops, sleeps)
	}
	if cpu > 5 {
		t.Errorf("the idle daemon used %.1f %% of a core over %v (want < 1 %%, bound 5 %% for accounting noise)", cpu, window)
	}
}
