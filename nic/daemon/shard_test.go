package daemon_test

import (
	"log/slog"
	"net/netip"
	"path/filepath"
	"strings"
	"testing"

	"github.com/softmrc/softmrc/internal/wire"
	"github.com/softmrc/softmrc/nic/config"
	"github.com/softmrc/softmrc/nic/daemon"
	"github.com/softmrc/softmrc/nic/xsk"
)

// What threads > 1 does not support (injected ports) is refused with what
// to do instead, before any socket is opened (TestThreadsVerified in nic/e2e runs the
// threads themselves, which need AF_XDP ports with several queues).
func TestThreadsRefused(t *testing.T) {
	cfg := func(mod func(*config.Config)) *config.Config {
		c := &config.Config{Host: "h1", Mode: config.ModeECMP, EVs: 8, Threads: 2, DeviceSocket: filepath.Join(t.TempDir(), "h1.sock")}
		c.Ports = []config.Port{{Name: "p0", Interface: "lo", MAC: wire.MAC{2, 0, 0, 0, 1, 0},
			NeighborMAC: wire.MAC{2, 0, 0, 0, 2, 0}, Address: netip.MustParseAddr("fd00::1")}}
		if mod != nil {
			mod(c)
		}
		c.SetDefaults()
		return c
	}
	// A port whose interface does not exist fails on the first thread,
	// where the queues are not what is missing: no queue advice then.
	if _, err := daemon.New(daemon.Options{Config: cfg(func(c *config.Config) { c.Ports[0].Interface = "nosuch0" }),
		Logger: slog.New(slog.DiscardHandler)}); err == nil || !strings.Contains(err.Error(), `"nosuch0"`) || strings.Contains(err.Error(), "numrxqueues") {
		t.Errorf("threads 2 on a missing interface: %v; want the interface named and no queue advice", err)
	}
	a, _ := xsk.NewPipe("pa", "pb", 0)
	for _, tc := range []struct {
		name string
		opts daemon.Options
		want string
	}{
		{"injected ports", daemon.Options{Config: cfg(nil), Ports: []xsk.Port{a}}, "needs AF_XDP ports"},
	} {
		tc.opts.Logger = slog.New(slog.DiscardHandler)
		if _, err := daemon.New(tc.opts); err == nil {
			t.Fatalf("%s: accepted with threads 2", tc.name) // its sockets stay open until the test exits
		} else if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want it to say %q", tc.name, err, tc.want)
		}
	}
}
