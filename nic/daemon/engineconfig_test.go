package daemon_test

import (
	"testing"

	"github.com/softmrc/softmrc/internal/mrc"
	"github.com/softmrc/softmrc/nic/daemon"
	"github.com/softmrc/softmrc/nic/daemon/daemontest"
)

// Each port's pacing_bps becomes its own plane's rate in the engine (the
// one pacer), not the slowest port's rate for all; PortQueue, the burst, is
// 32 KiB of line time at the slowest paced port.
func TestEngineConfigPerPlaneRates(t *testing.T) {
	for _, tc := range []struct {
		name      string
		bps       []uint64
		wantRates []float64 // bits per ns, per plane
		wantQueue mrc.Time
	}{
		{"unpaced", []uint64{0, 0}, []float64{0, 0}, 0},
		{"equal", []uint64{400e6, 400e6}, []float64{0.4, 0.4}, mrc.Time(32 << 10 * 8 / 0.4)},
		{"different", []uint64{200e6, 1e9}, []float64{0.2, 1}, mrc.Time(32 << 10 * 8 / 0.2)},
		{"one paced", []uint64{0, 1e9}, []float64{0, 1}, mrc.Time(32 << 10 * 8 / 1.0)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := daemontest.Config(t.TempDir(), 1, len(tc.bps))
			for i, b := range tc.bps {
				cfg.Ports[i].PacingBps = b
			}
			ec, err := daemon.EngineConfig(cfg)
			if err != nil {
				t.Fatal(err)
			}
			if ec.PortRate != 0 {
				t.Errorf("PortRate %v: want 0, each plane's rate in PortRates", ec.PortRate)
			}
			for i, p := range cfg.Ports {
				if got := ec.PortRates[p.Plane]; got != tc.wantRates[i] {
					t.Errorf("plane %d rate %v bits/ns, want %v (pacing_bps %d)", p.Plane, got, tc.wantRates[i], tc.bps[i])
				}
			}
			if ec.PortQueue != tc.wantQueue {
				t.Errorf("PortQueue %v ns, want %v", ec.PortQueue, tc.wantQueue)
			}
		})
	}
}
