package daemon_test

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/softmrc/softmrc/internal/telemetry"
	"github.com/softmrc/softmrc/nic/verbs"
	"github.com/softmrc/softmrc/nic/vproto"
)

// collector gathers a watch's samples.
type collector struct {
	mu      sync.Mutex
	samples []telemetry.Sample
	first   chan struct{}
	once    sync.Once
	more    chan struct{} // signalled (cap 1) on every sample
}

func (c *collector) add(s telemetry.Sample) {
	c.mu.Lock()
	c.samples = append(c.samples, s)
	c.mu.Unlock()
	c.once.Do(func() { close(c.first) })
	select {
	case c.more <- struct{}{}:
	default:
	}
}

// waitFor waits until the newest sample of (kind, id) satisfies ok.
func (c *collector) waitFor(t *testing.T, kind, id, what string, ok func(telemetry.Sample) bool) telemetry.Sample {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		if s, found := c.last(kind, id); found && ok(s) {
			return s
		}
		select {
		case <-c.more:
		case <-deadline:
			s, _ := c.last(kind, id)
			t.Fatalf("%s %s: no sample with %s within 10 s (last %v)", kind, id, what, s.Values)
		}
	}
}

// last returns the newest sample of (kind, id), if any.
func (c *collector) last(kind, id string) (telemetry.Sample, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i := len(c.samples) - 1; i >= 0; i-- {
		if s := c.samples[i]; s.Kind == kind && s.ID == id {
			return s, true
		}
	}
	return telemetry.Sample{}, false
}

func (c *collector) series(kind, id string) []telemetry.Sample {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []telemetry.Sample
	for _, s := range c.samples {
		if s.Kind == kind && s.ID == id {
			out = append(out, s)
		}
	}
	return out
}

// watch subscribes to sock at interval until the test ends.
func watch(t *testing.T, sock string, interval time.Duration) *collector {
	t.Helper()
	c := &collector{first: make(chan struct{}), more: make(chan struct{}, 1)}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- verbs.Watch(ctx, sock, interval, c.add) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("watch: %v", err)
		}
	})
	select {
	case <-c.first:
	case err := <-done:
		t.Fatalf("watch ended before the first sample: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("no telemetry sample within 10 s")
	}
	return c
}

// TestTelemetryWatch: a subscriber at 1 ms gets one QP sample and one
// sample per NIC port every interval (count within tolerance of the span
// over the interval, timestamps strictly increasing), the QP's acked_bytes
// never decreases and ends exactly at the bytes the application saw
// complete, and the EV-state gauges add up to the QP's EV set.
func TestTelemetryWatch(t *testing.T) {
	s1, s2, _ := twoNICs(t, 2)
	const size, n = 64 << 10, 200
	a, b := open(t, s1, size), open(t, s2, size)
	connect(t, a, b)
	col := watch(t, s1, time.Millisecond)
	fill(a.mr.Buf, 5)
	var completed uint64
	for i := range n {
		if err := a.qp.PostSend(verbs.Write(uint64(i), a.mr, 0, size, b.mr.Addr, b.mr.RKey)); err != nil {
			t.Fatal(err)
		}
		if i%16 == 15 || i == n-1 {
			for range min(16, i%16+1) {
				c := waitCQE(t, a.dev)
				if c.Status != verbs.StatusSuccess {
					t.Fatalf("completion %+v", c)
				}
				completed += uint64(c.Len)
			}
		}
	}
	if completed != size*n {
		t.Fatalf("completed %d bytes, want %d", completed, size*n)
	}
	qpID := fmt.Sprintf("%#06x", a.qp.QPN)
	col.waitFor(t, telemetry.KindQP, qpID, fmt.Sprintf("acked_bytes = %d (what the application completed)", completed),
		func(s telemetry.Sample) bool { return s.Values[telemetry.KeyAckedBytes] == float64(completed) })

	qs := col.series(telemetry.KindQP, qpID)
	for i := 1; i < len(qs); i++ {
		if qs[i].T <= qs[i-1].T {
			t.Fatalf("QP sample %d at %d is not after %d", i, qs[i].T, qs[i-1].T)
		}
		if qs[i].Values[telemetry.KeyAckedBytes] < qs[i-1].Values[telemetry.KeyAckedBytes] {
			t.Fatalf("acked_bytes went down at sample %d", i)
		}
	}
	span := time.Duration(qs[len(qs)-1].T - qs[0].T)
	want := float64(span/time.Millisecond) + 1
	got := float64(len(qs))
	gaps := make([]int64, 0, len(qs))
	for i := 1; i < len(qs); i++ {
		gaps = append(gaps, qs[i].T-qs[i-1].T)
	}
	sort.Slice(gaps, func(i, j int) bool { return gaps[i] < gaps[j] })
	med := time.Duration(gaps[len(gaps)/2])
	var cs struct {
		Daemon map[string]uint64 `json:"daemon"`
	}
	if err := a.dev.Ctl(vproto.CtlRequest{Cmd: "counters"}, &cs); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d QP samples over %v at 1 ms (%.0f%% of span/interval); median gap %v; daemon: ticks %d skipped %d missed %d dropped %d",
		len(qs), span, 100*got/want, med, cs.Daemon["telemetry_ticks"], cs.Daemon["telemetry_skipped"], cs.Daemon["telemetry_missed"], cs.Daemon["telemetry_dropped"])
	// The schedule never samples twice in one interval, and every instant
	// is either sampled or counted (missed: the loop got no CPU for a whole
	// interval, as on 2 cores shared by many processes under the race
	// detector; skipped: the encoder was behind). So delivered samples are
	// at most span/interval + 1, and delivered + missed + skipped at least
	// span/interval (the counters also cover the moments before the first
	// and after the last sample). The delivered share itself depends on the
	// machine's load, and under the race detector (a loop turn with
	// traffic can take longer than the interval) much more so: CI on
	// 2026-12-05 09:47-10:00 delivered 198 of 4161 (4.8 %, median gap
	// 8.9 ms) with the other 3976 intervals counted as missed, below the
	// 5 % floor of before. Without the race detector, beside nic/e2e's
	// testbeds in one `go test ./nic/... ./testbed/...` (2026-12-05 11:09
	// and 11:17), it delivered 45 % and 28 % (median gap 2.7 ms), below
	// the 50 % floor and the 2 ms of before, with the other intervals
	// counted as missed. The floor only says the sampler delivers at all,
	// and the median gap that it samples at 1 ms, not at the 10 ms
	// default; the accounting above is the invariant.
	floor, maxMed := 0.2, 5*time.Millisecond
	if raceEnabled {
		floor, maxMed = 0.02, 20*time.Millisecond
	}
	accounted := float64(cs.Daemon["telemetry_ticks"] + cs.Daemon["telemetry_missed"] + cs.Daemon["telemetry_skipped"])
	if got > want+1 || accounted < want-1 || got < floor*want {
		t.Errorf("%v QP samples over %v: want at most %v (span/interval + 1), at least %.0f%% of it, and sampled + missed + skipped (%v) at least span/interval",
			got, span, want, 100*floor, accounted)
	}
	if med < 500*time.Microsecond || med > maxMed {
		t.Errorf("median gap between samples %v, want about 1 ms (at most %v)", med, maxMed)
	}
	last := qs[len(qs)-1].Values
	if last[telemetry.KeyTxBytes] < last[telemetry.KeyAckedBytes] || last[telemetry.KeyQPState] != 1 {
		t.Errorf("last QP sample %v: want tx_bytes >= acked_bytes and state 1 (READY)", last)
	}
	// Every QP counter of the engine is in the sample by its snake_case
	// name (qpcounters.go), not only the hand-picked keys above.
	for _, k := range []string{"tx_data", "rx_data", "send_blocked_fail", "last_ev_kept", "path_flap_holds"} {
		if _, ok := last[k]; !ok {
			t.Errorf("QP sample has no %q: %v", k, last)
		}
	}
	if last["tx_data"] == 0 {
		t.Errorf("QP sample tx_data = 0 after a transfer: %v", last)
	}
	evs := 0.0
	for k, v := range last {
		if _, _, ok := telemetry.ParseEVStateKey(k); ok {
			evs += v
		}
	}
	if evs != float64(a.dev.Info().EVs) {
		t.Errorf("EV-state gauges add up to %v, want the QP's %d EVs (%v)", evs, a.dev.Info().EVs, last)
	}
	// Destroying the QP sends its last sample, marked final, at once.
	if err := a.qp.Destroy(); err != nil {
		t.Fatal(err)
	}
	fin := col.waitFor(t, telemetry.KindQP, qpID, "final = 1 after Destroy",
		func(s telemetry.Sample) bool { return s.Values[telemetry.KeyFinal] == 1 })
	if fin.Values[telemetry.KeyAckedBytes] != float64(completed) {
		t.Errorf("final sample: acked_bytes %v, want %d", fin.Values[telemetry.KeyAckedBytes], completed)
	}
	for _, p := range a.dev.Info().Ports {
		ps := col.series(telemetry.KindNICPort, p.Name)
		if len(ps) < len(qs)/2 {
			t.Errorf("port %s: %d samples, QP %d", p.Name, len(ps), len(qs))
			continue
		}
		l := ps[len(ps)-1].Values
		if l[telemetry.KeyCarrier] != 1 || l[telemetry.KeyTxBytes] <= ps[0].Values[telemetry.KeyTxBytes] || l[telemetry.KeyPlane] != float64(p.Plane) {
			t.Errorf("port %s: first %v last %v: want carrier 1, tx_bytes rising, plane %d", p.Name, ps[0].Values, l, p.Plane)
		}
	}
}

// TestTelemetryBadInterval: intervals outside 1 ms..10 s are refused with
// the allowed range.
func TestTelemetryBadInterval(t *testing.T) {
	s1, _, _ := twoNICs(t, 1)
	for _, iv := range []time.Duration{time.Microsecond, time.Minute} {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err := verbs.Watch(ctx, s1, iv, func(telemetry.Sample) {})
		cancel()
		if err == nil || !contains(err.Error(), "want 1ms to 10s") {
			t.Errorf("interval %v: %v, want the allowed range", iv, err)
		}
	}
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }
