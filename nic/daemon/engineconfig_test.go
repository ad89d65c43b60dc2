package daemon_test

import (
	"bytes"
	"testing"

	"github.com/softmrc/softmrc/internal/mrc"
	"github.com/softmrc/softmrc/nic/config"
	"github.com/softmrc/softmrc/nic/daemon"
	"github.com/softmrc/softmrc/nic/daemon/daemontest"
	"github.com/softmrc/softmrc/nic/verbs"
	"github.com/softmrc/softmrc/nic/vproto"
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

// With engine threads each engine paces a port at its whole rate against
// the clock the threads share (EnginePorts); without one, at 1/threads.
func TestEngineConfigThreadsPacing(t *testing.T) {
	var clock mrc.PortClock
	for _, tc := range []struct {
		name   string
		shared *mrc.PortClock
		want   float64
	}{{"shared clock", &clock, 0.4}, {"static split", nil, 0.2}} {
		cfg := daemontest.Config(t.TempDir(), 1, 2)
		cfg.Threads, cfg.EngineThread, cfg.EnginePorts = 2, 1, tc.shared
		for i := range cfg.Ports {
			cfg.Ports[i].PacingBps = 400e6
		}
		ec, err := daemon.EngineConfig(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if ec.SharedPorts != tc.shared || ec.QPNShards != 2 || ec.QPNShard != 1 {
			t.Errorf("%s: SharedPorts %p, QP shard %d of %d; want %p, 1 of 2", tc.name, ec.SharedPorts, ec.QPNShard, ec.QPNShards, tc.shared)
		}
		for p := range cfg.Ports {
			if got := ec.PortRates[p]; got != tc.want {
				t.Errorf("%s: plane %d rate %v bits/ns, want %v", tc.name, p, got, tc.want)
			}
		}
	}
}

// cc.scale reaches the engine as CCConfig.Scaled: the target queueing
// delay k times the default; without it the engine's default stays.
func TestEngineConfigCCScale(t *testing.T) {
	for _, tc := range []struct {
		scale float64
		want  mrc.Time
	}{
		{0, 0},
		{1250, 1250 * mrc.DefaultTargetQDelay},
	} {
		cfg := daemontest.Config(t.TempDir(), 1, 2)
		cfg.CC.Scale = tc.scale
		ec, err := daemon.EngineConfig(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if ec.CC.TargetQDelay != tc.want {
			t.Errorf("cc.scale %v: engine TargetQDelay %v ns, want %v", tc.scale, ec.CC.TargetQDelay, tc.want)
		}
	}
}

// TestEngineConfigMaxWindow: without cc.max_window the engine's ceiling is
// config.DefaultMaxWindow whatever the MTU (its own default, the QP's window
// in packets, is 4 MiB at MTU 4096), raised to an initial window above it;
// a max_window given is the ceiling.
func TestEngineConfigMaxWindow(t *testing.T) {
	for _, tc := range []struct {
		name         string
		mtu, initial int
		max, wantMax int
	}{
		{"default, MTU 2048", 2048, 0, 0, config.DefaultMaxWindow},
		{"default, MTU 4096", 4096, 0, 0, config.DefaultMaxWindow},
		{"initial above the default", 2048, 2 << 20, 0, 2 << 20},
		{"given", 4096, 0, 4 << 20, 4 << 20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := daemontest.Config(t.TempDir(), 1, 2)
			cfg.MTU, cfg.CC.InitialWindow, cfg.CC.MaxWindow = tc.mtu, tc.initial, tc.max
			ec, err := daemon.EngineConfig(cfg)
			if err != nil {
				t.Fatal(err)
			}
			if ec.CC.MaxCwnd != tc.wantMax || ec.CC.InitCwnd != tc.initial {
				t.Errorf("engine MaxCwnd %d InitCwnd %d, want %d and %d", ec.CC.MaxCwnd, ec.CC.InitCwnd, tc.wantMax, tc.initial)
			}
		})
	}
}

// TestBulkWriteCoalescesSACKs: under a bulk write the receiving daemon
// sends fewer than one control frame (SACK) per 4 data packets, the
// engine's hardware default; the data still lands exactly. Each SACK costs
// a copy-mode transmit on a veth (docs/performance.md).
func TestBulkWriteCoalescesSACKs(t *testing.T) {
	s1, s2, _ := twoNICs(t, 1)
	const size = 4 << 20 // 2048 data packets at MTU 2048
	a, b := open(t, s1, size), open(t, s2, size)
	connect(t, a, b)
	fill(a.mr.Buf, 7)
	var before vproto.Counters
	if err := ctl(t, s2, vproto.CtlRequest{Cmd: vproto.CtlCounters}, &before); err != nil {
		t.Fatal(err)
	}
	if err := a.qp.PostSend(verbs.WriteImm(1, a.mr, 0, size, b.mr.Addr, b.mr.RKey, 9)); err != nil {
		t.Fatal(err)
	}
	if c := waitCQE(t, a.dev); c.Status != verbs.StatusSuccess || c.ID != 1 {
		t.Fatalf("sender completion %+v: %v", c, c.Status)
	}
	if c := waitCQE(t, b.dev); c.Op != verbs.CQRecvImm || c.Imm != 9 {
		t.Fatalf("receiver completion %+v", c)
	}
	if !bytes.Equal(a.mr.Buf, b.mr.Buf) {
		t.Fatal("receiver memory differs from the sender's")
	}
	var after vproto.Counters
	if err := ctl(t, s2, vproto.CtlRequest{Cmd: vproto.CtlCounters}, &after); err != nil {
		t.Fatal(err)
	}
	const key = "TxCtrlByPlane.plane0"
	ctrl := after.Engine[key] - before.Engine[key]
	data := qpRow(t, b).RxData
	t.Logf("receiver: %d control frames for %d data packets (%.3f per packet)", ctrl, data, float64(ctrl)/float64(data))
	if data < size/2048 {
		t.Fatalf("receiver counted %d data packets, want at least %d", data, size/2048)
	}
	if 4*ctrl >= data {
		t.Errorf("receiver sent %d control frames for %d data packets: want fewer than one per 4 (SACK coalescing AckEvery %d, AckDelay %v ns)",
			ctrl, data, daemon.AckEvery, daemon.AckDelay)
	}
}
