package e2e

import (
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// latRow is mrc-write-lat's table row: bytes, iterations, t_min, t_max,
// t_typical, ... (µs; perftest's one-way latency, half the round trip).
var latRow = regexp.MustCompile(`(?m)^\s*(\d+)\s+(\d+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s`)

// TestPortDelayLine: a port's `delay` (mrc-nicd's delay line) delays both
// directions of its wire. Each NIC of a veth pair delays its port by 5 ms,
// so every frame is held 5 ms by the sender's line and 5 ms by the
// receiver's: a round trip gains 2 × (5 + 5) ms, and mrc-write-lat's
// one-way latency (half a round trip) gains 10 ms. The run measures the
// latency without the delay first, then with it, on the same namespaces,
// and checks that --verify passes.
func TestPortDelayLine(t *testing.T) {
	requireNetns(t)
	const delay = 5 * time.Millisecond
	const added = 2 * delay // one way: the sender's line and the receiver's
	tp := newTopoStart(t, 1, false)
	typical := func(label string) float64 {
		t.Helper()
		out, err := tp.pairRun(t, 2*time.Minute, "mrc-write-lat", "-n", "50", "--verify")
		t.Logf("%s:\n%s", label, out)
		if err != nil {
			t.Fatalf("mrc-write-lat --verify (%s): %v", label, err)
		}
		m := latRow.FindStringSubmatch(out)
		if m == nil || strings.Contains(out, "VERIFY FAILED") {
			t.Fatalf("%s: no latency row or verify failed", label)
		}
		v, _ := strconv.ParseFloat(m[5], 64)
		return v
	}
	for _, h := range tp.h {
		h.start(t)
	}
	base := typical("no delay")
	for _, h := range tp.h {
		h.stop()
		h.cfg.Ports[0].Delay = delay
		if err := h.cfg.Write(h.path); err != nil {
			t.Fatal(err)
		}
		h.start(t)
	}
	got := typical("delay 5ms on both ports")
	addedUS := float64(added / time.Microsecond)
	t.Logf("t_typical %.1f µs without delay, %.1f µs with %v per port (one way +%.0f µs expected)", base, got, delay, addedUS)
	// At least the added delay: no frame may leave its line early. At most
	// the added delay plus a generous bound for a loaded 2-CPU machine
	// (the baseline, and 20 ms of scheduling).
	if got < addedUS || got > addedUS+base+20000 {
		t.Fatalf("one-way latency %.1f µs with the delay, %.1f µs without: want at least %.0f µs and below %.0f µs",
			got, base, addedUS, addedUS+base+20000)
	}
	for _, h := range tp.h {
		h.stop()
		if !strings.Contains(h.log.String(), "port delay line") {
			t.Errorf("%s: mrc-nicd did not report its delay line:\n%s", h.ns, h.log.String())
		}
	}
}
