package mrc

import (
	"sync"
	"testing"

	"github.com/softmrc/softmrc/internal/wire"
)

// TestPortClockConcurrent: occupations from several goroutines all count
// (no lost update), and one that starts later than the queued line time
// starts at its own now.
func TestPortClockConcurrent(t *testing.T) {
	var c PortClock
	const workers, each = 4, 5000
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range each {
				c.occupy(2, 0, 3)
			}
		}()
	}
	wg.Wait()
	if got := c.until(2); got != workers*each*3 {
		t.Fatalf("plane 2 busy until %d, want %d", got, workers*each*3)
	}
	if got := c.until(1); got != 0 {
		t.Fatalf("plane 1 busy until %d, want 0 (untouched)", got)
	}
	c.occupy(2, 1_000_000, 10)
	if got := c.until(2); got != 1_000_010 {
		t.Fatalf("after an idle gap: busy until %d, want 1000010", got)
	}
}

// TestSharedPortsRate: an engine whose ports' line time is shared
// (Config.SharedPorts) leaves each port what the other engines took. Here
// a second "engine" takes as much line time as this one sends, frame for
// frame, so this one's data leaves at half the port's rate; alone on the
// shared clock it gets the whole rate. With a clock of its own it would
// send at the whole rate beside the other, twice the port's.
func TestSharedPortsRate(t *testing.T) {
	for _, tc := range []struct {
		name  string
		other bool // the second engine sends as much as this one
		share float64
	}{{"alone", false, 1}, {"beside an engine as busy", true, 0.5}} {
		t.Run(tc.name, func(t *testing.T) {
			const r = 10.0 // bits per ns on every plane
			var pc PortClock
			h := newHarness(t, hopts{seed: 5, cfg: func(c *Config) {
				c.PortRate = r
				c.CC.MaxCwnd = 4 << 20
			}})
			h.eng[0].cfg.SharedPorts = &pc // the sender only: the receiver has ports of its own
			frames := logSent(h, func(port wire.Plane, f []byte) {
				if tc.other {
					pc.occupy(port, h.now, Time(float64(len(f)*8)/r))
				}
			})
			h.transfer(4<<20, 256<<10, Second)
			for p, fs := range frames {
				if len(fs) < 100 {
					t.Fatalf("plane %d carried %d frames", p, len(fs))
				}
				got := sentRate(fs)
				want := r * tc.share
				t.Logf("plane %d: %d frames at %.2f Gb/s, want %.2f", p, len(fs), got, want)
				if got < want*0.95 || got > want*1.05 {
					t.Errorf("plane %d sent at %.2f Gb/s, want %.2f (%.0f %% of the port's %.0f) within 5 %%", p, got, want, tc.share*100, r)
				}
			}
		})
	}
}
