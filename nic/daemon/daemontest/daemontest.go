// Package daemontest runs mrc-nicd daemons in the calling process, joined by
// in-memory port pipes (xsk.NewPipe), for tests and examples of code above
// the device socket (nic/verbs users, the perftest tools).
package daemontest

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/softmrc/softmrc/internal/wire"
	"github.com/softmrc/softmrc/nic/config"
	"github.com/softmrc/softmrc/nic/daemon"
	"github.com/softmrc/softmrc/nic/verbs"
	"github.com/softmrc/softmrc/nic/xsk"
)

// Config is an ECMP-mode NIC config for host (1 or 2) with one port per
// plane, its device socket in dir.
func Config(dir string, host, planes int) *config.Config {
	c := &config.Config{Host: fmt.Sprintf("h%d", host), Mode: config.ModeECMP, EVs: 8,
		DeviceSocket: filepath.Join(dir, fmt.Sprintf("h%d.sock", host))}
	for p := 0; p < planes; p++ {
		c.Ports = append(c.Ports, config.Port{Name: fmt.Sprintf("p%d", p), Interface: fmt.Sprintf("pipe%d", p), Plane: p,
			MAC:         wire.MAC{2, 0, 0, 0, byte(host), byte(p)},
			NeighborMAC: wire.MAC{2, 0, 0, 0, byte(3 - host), byte(p)},
			Address:     netip.MustParseAddr(fmt.Sprintf("fd00:0:%d::%d", p, host))})
	}
	c.SetDefaults()
	return c
}

// Pair is two running daemons joined by one pipe per plane.
type Pair struct {
	Sock    [2]string
	Pipes   [2][]*xsk.PipePort
	Daemons [2]*daemon.Daemon // for tests of the daemon itself (hooks, counters)
	Configs [2]*config.Config
	// Notify are cooperative daemons' Options.Notify channels
	// (StartCooperative); open a device with CoopOptions.
	Notify [2]chan struct{}
	stop   [2]func() error
	dir    string
}

// Stop stops daemon i (0 or 1); it is safe to call twice.
func (p *Pair) Stop(i int) error { return p.stop[i]() }

// Close stops both daemons and removes the socket folder.
func (p *Pair) Close() error {
	err0, err1 := p.Stop(0), p.Stop(1)
	os.RemoveAll(p.dir)
	if err0 != nil {
		return err0
	}
	return err1
}

// Run starts two daemons with planes ports each; Close stops them.
func Run(planes int) (*Pair, error) { return RunWith(planes, nil) }

// RunWith is Run with tune applied to host 1's and host 2's config (host
// is 1 or 2) before its daemon starts: tests of mismatched settings.
func RunWith(planes int, tune func(host int, c *config.Config)) (*Pair, error) {
	return RunPorts(planes, tune, nil)
}

// RunPorts is RunWith with each host's pipe ends passed through wrap (host
// is 1 or 2; nil: unwrapped) before its daemon gets them: tests that watch
// or disturb what a daemon sends and receives.
func RunPorts(planes int, tune func(host int, c *config.Config), wrap func(host int, p *xsk.PipePort) xsk.Port) (*Pair, error) {
	return run(planes, tune, wrap, false)
}

// StartCooperative runs two cooperative daemons (daemon.Options.Cooperative:
// the loops share the program's Ps with the applications, as an in-process
// NIC's does) until the test ends; the caller sets GOMAXPROCS.
func StartCooperative(t testing.TB, planes int, tune func(host int, c *config.Config)) *Pair {
	t.Helper()
	pr, err := run(planes, tune, nil, true)
	return untilEnd(t, pr, err)
}

// untilEnd fails t on err, else stops pr when t ends.
func untilEnd(t testing.TB, pr *Pair, err error) *Pair {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := pr.Close(); err != nil {
			t.Error(err)
		}
	})
	return pr
}

func run(planes int, tune func(host int, c *config.Config), wrap func(host int, p *xsk.PipePort) xsk.Port, coop bool) (*Pair, error) {
	dir, err := os.MkdirTemp("", "mrcnic")
	if err != nil {
		return nil, err
	}
	pr := &Pair{dir: dir}
	for i := range pr.stop {
		pr.stop[i] = func() error { return nil }
	}
	for pl := 0; pl < planes; pl++ {
		a, b := xsk.NewPipe(fmt.Sprintf("h1p%d", pl), fmt.Sprintf("h2p%d", pl), 0)
		pr.Pipes[0] = append(pr.Pipes[0], a)
		pr.Pipes[1] = append(pr.Pipes[1], b)
	}
	log := slog.New(slog.DiscardHandler)
	for i := 0; i < 2; i++ {
		cfg := Config(dir, i+1, planes)
		if tune != nil {
			tune(i+1, cfg)
		}
		ports := make([]xsk.Port, planes)
		for k, p := range pr.Pipes[i] {
			ports[k] = p
			if wrap != nil {
				ports[k] = wrap(i+1, p)
			}
		}
		o := daemon.Options{Config: cfg, Ports: ports, Logger: log, Cooperative: coop}
		if coop {
			ch := make(chan struct{}, 1)
			pr.Notify[i] = ch
			o.Notify = func() {
				select {
				case ch <- struct{}{}:
				default:
				}
			}
		}
		d, err := daemon.New(o)
		if err != nil {
			pr.Close()
			return nil, err
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- d.Run(ctx) }()
		rctx, rcancel := context.WithTimeout(context.Background(), 5*time.Second)
		err = d.Ready(rctx)
		rcancel()
		stopped := false
		host := i + 1
		pr.stop[i] = func() error {
			if stopped {
				return nil
			}
			stopped = true
			cancel()
			if err := <-done; err != nil {
				return fmt.Errorf("daemon %d: %w", host, err)
			}
			return nil
		}
		if err != nil {
			pr.Close()
			return nil, err
		}
		pr.Sock[i] = cfg.DeviceSocket
		pr.Daemons[i], pr.Configs[i] = d, cfg
	}
	return pr, nil
}

// CoopOptions are the verbs options of an application of cooperative
// daemon i (0 or 1), as nic/inprocess gives them: waits park on its
// Notify channel, posts wake its loop.
func (p *Pair) CoopOptions(i int) verbs.Options {
	return verbs.Options{Cooperative: true, Notify: p.Notify[i], Kick: p.Daemons[i].Wake}
}

// Start runs two daemons until the test ends.
func Start(t testing.TB, planes int) *Pair { t.Helper(); return StartWith(t, planes, nil) }

// StartWith is RunWith until the test ends.
func StartWith(t testing.TB, planes int, tune func(host int, c *config.Config)) *Pair {
	t.Helper()
	return StartPorts(t, planes, tune, nil)
}

// StartPorts is RunPorts until the test ends.
func StartPorts(t testing.TB, planes int, tune func(host int, c *config.Config), wrap func(host int, p *xsk.PipePort) xsk.Port) *Pair {
	t.Helper()
	pr, err := RunPorts(planes, tune, wrap)
	return untilEnd(t, pr, err)
}
