package daemon

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/softmrc/softmrc/internal/telemetry"
	"github.com/softmrc/softmrc/switchd/ctl"
	"github.com/softmrc/softmrc/switchd/dataplane"
)

// TestWatch: a watch at 1 ms gets one sample per port per interval with
// strictly increasing times, counters as the data plane holds them (the
// series follows a counter that moves), a down fault as fault_down, and
// ends cleanly when the client cancels; a bad interval is refused with the
// allowed range.
func TestWatch(t *testing.T) {
	h := newHarness(t)
	cfg := testConfig(t)
	h.start(cfg)

	var mu sync.Mutex
	var got []telemetry.Sample
	seen := make(chan struct{}, 1)
	ctx, cancel := context.WithCancel(context.Background())
	c, err := ctl.Dial(ctx, cfg.Control)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	done := make(chan error, 1)
	go func() {
		done <- c.Watch(ctx, time.Millisecond, func(s telemetry.Sample) {
			mu.Lock()
			got = append(got, s)
			mu.Unlock()
			select {
			case seen <- struct{}{}:
			default:
			}
		})
	}()
	// waitFor waits for a sample of port that satisfies ok.
	waitFor := func(port string, ok func(v map[string]float64) bool) {
		t.Helper()
		deadline := time.After(10 * time.Second)
		for {
			mu.Lock()
			for i := len(got) - 1; i >= 0; i-- {
				if got[i].ID == port && ok(got[i].Values) {
					mu.Unlock()
					return
				}
			}
			mu.Unlock()
			select {
			case <-seen:
			case err := <-done:
				t.Fatalf("watch ended: %v", err)
			case <-deadline:
				t.Fatalf("no sample of %s as expected within 10 s", port)
			}
		}
	}
	setCounters := func(id dataplane.PortID, c dataplane.PortCounters) {
		h.pins.mu.Lock()
		h.pins.counters[id] = c
		h.pins.mu.Unlock()
	}
	waitFor("u0", func(v map[string]float64) bool { return v[telemetry.KeyTxBytes] == 0 })
	setCounters(1, dataplane.PortCounters{TxBytes: 5000, TxPackets: 5, ECNMarked: 2, Trimmed: 1, DropBuffer: 3, DropFault: 4})
	waitFor("u0", func(v map[string]float64) bool {
		return v[telemetry.KeyTxBytes] == 5000 && v[telemetry.KeyECNMarked] == 2 && v[telemetry.KeyTrimmed] == 1 &&
			v[telemetry.KeyDrops] == 7 && v[telemetry.KeyDropBuffer] == 3 && v[telemetry.KeyFaultDown] == 0
	})
	fc, err := ctl.Dial(context.Background(), cfg.Control)
	if err != nil {
		t.Fatal(err)
	}
	defer fc.Close()
	if err := fc.SetFault(context.Background(), ctl.Fault{Target: "u1", Action: ctl.ActDown}); err != nil {
		t.Fatal(err)
	}
	waitFor("u1", func(v map[string]float64) bool { return v[telemetry.KeyFaultDown] == 1 })
	cancel()
	if err := <-done; err != nil {
		t.Errorf("watch after cancel: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	last := map[string]int64{}
	n := map[string]int{}
	// Every port of one tick carries the tick's time; the client stops
	// after the sample during which it saw the cancel, so only the last
	// tick may lack ports.
	perTick := map[int64]int{}
	var lastTick int64
	for _, s := range got {
		perTick[s.T]++
		lastTick = max(lastTick, s.T)
		if s.Source != cfg.Name || s.Kind != telemetry.KindSwitchPort {
			t.Fatalf("sample %+v: want src %s kind %s", s, cfg.Name, telemetry.KindSwitchPort)
		}
		if s.T <= last[s.ID] {
			t.Fatalf("port %s: sample at %d not after %d", s.ID, s.T, last[s.ID])
		}
		last[s.ID] = s.T
		n[s.ID]++
	}
	if len(n) != len(cfg.Ports) {
		t.Errorf("samples per port %v: want samples of each of the %d ports", n, len(cfg.Ports))
	}
	for tick, k := range perTick {
		if tick != lastTick && k != len(cfg.Ports) {
			t.Errorf("tick %d carried %d port samples, want one per port (%d); per port %v", tick, k, len(cfg.Ports), n)
		}
	}

	// Out-of-range intervals.
	for _, iv := range []time.Duration{time.Microsecond, time.Hour} {
		c, err := ctl.Dial(context.Background(), cfg.Control)
		if err != nil {
			t.Fatal(err)
		}
		err = c.Watch(context.Background(), iv, func(telemetry.Sample) {})
		c.Close()
		if err == nil || !strings.Contains(err.Error(), "want 1ms to 10s") {
			t.Errorf("interval %v: %v, want the allowed range", iv, err)
		}
	}
}
