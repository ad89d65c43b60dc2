package daemon

import (
	"context"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/softmrc/softmrc/internal/nsthread"
	"github.com/softmrc/softmrc/internal/wire"
	"github.com/softmrc/softmrc/nic/config"
	"github.com/softmrc/softmrc/nic/service"
	"github.com/softmrc/softmrc/nic/vproto"
)

// TestThreadsInProcess builds and runs a two-thread daemon in this process
// (AF_XDP sockets on both queues of a veth in a fresh namespace), so that
// `go test -race` watches its goroutines: the carrier watchers (which
// reach every thread, and once started before the second thread existed:
// a data race), the threads' loops, and the front's merged control
// answers. A carrier change must reach both threads.
func TestThreadsInProcess(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("skipping: not root (needs netns, veth, XDP and AF_XDP)")
	}
	if fd, err := unix.Socket(unix.AF_XDP, unix.SOCK_RAW, 0); err != nil {
		t.Skipf("skipping: kernel lacks AF_XDP sockets: %v", err)
	} else {
		unix.Close(fd)
	}
	ns, id, ip := scratchNetns(t, "dt")
	a, b := "dt"+id+"a", "dt"+id+"b"
	ip("-n", ns, "link", "add", a, "numtxqueues", "2", "numrxqueues", "2", "type", "veth", "peer", "name", b, "numtxqueues", "2", "numrxqueues", "2")
	ip("-n", ns, "link", "set", a, "up")
	ip("-n", ns, "link", "set", b, "up")
	cfg := &config.Config{Host: "h1", Mode: config.ModeECMP, EVs: 8, Threads: 2, DeviceSocket: filepath.Join(t.TempDir(), "h1.sock")}
	cfg.Ports = []config.Port{{Name: "p0", Interface: a, MAC: wire.MAC{2, 0, 0, 0, 1, 0},
		NeighborMAC: wire.MAC{2, 0, 0, 0, 2, 0}, Address: netip.MustParseAddr("fd00:" + id[:4] + "::1")}}
	cfg.SetDefaults()
	// Two threads and two Ps: a loop holding its P through a sleep would
	// leave the other none (with 3 threads on 2 Ps a woken loop waited
	// up to heldPollMax for one), so neither may hold.
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(2))
	var d *Daemon
	if err := nsthread.Named(ns, func() (err error) {
		d, err = New(Options{Config: cfg, Logger: slog.New(slog.DiscardHandler)})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	if err := d.Ready(ctx); err != nil {
		t.Fatal(err)
	}
	if len(d.threads()) != 2 {
		t.Fatalf("%d engine threads, want 2", len(d.threads()))
	}
	for i, th := range d.threads() {
		if th.cfg.EnginePorts == nil || th.cfg.EnginePorts != d.cfg.EnginePorts || th.start != d.start {
			t.Errorf("thread %d: ports' clock %p, start %v; want the front's %p, %v (one pacer, one time base)", i, th.cfg.EnginePorts, th.start, d.cfg.EnginePorts, d.start)
		}
		if th.heldPoll {
			t.Errorf("thread %d holds its P while it sleeps with 2 threads on 2 Ps", i)
		}
	}
	front := &shardFront{set: d.sh}
	admin := service.Caller{Admin: true}
	portsUp := func() (up []bool) {
		for _, th := range d.threads() {
			up = append(up, th.portUp[0].Load())
		}
		return up
	}
	waitUp := func(want bool) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			up := portsUp()
			if up[0] == want && up[1] == want {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("port up on the threads %v after 10 s, want %v on both", up, want)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	waitUp(true)
	ip("-n", ns, "link", "set", b, "down") // a loses its carrier
	waitUp(false)
	ip("-n", ns, "link", "set", b, "up")
	waitUp(true)
	res, err := front.Ctl(admin, vproto.CtlRequest{Cmd: vproto.CtlCounters})
	if err != nil {
		t.Fatal(err)
	}
	if c := res.(vproto.Counters); c.Daemon["threads"] != 2 {
		t.Errorf("counters: threads %d, want 2", c.Daemon["threads"])
	}
	if res, err := front.Ctl(admin, vproto.CtlRequest{Cmd: vproto.CtlQPs}); err != nil || len(res.([]vproto.QPRow)) != 0 {
		t.Errorf("qps: %v, %v; want none", res, err)
	}
}

// TestHoldsP: a loop keeps its P through a sleep only when the program has
// a P for every engine thread and one more.
func TestHoldsP(t *testing.T) {
	for _, tc := range []struct {
		procs, threads int
		want           bool
	}{{1, 1, false}, {2, 1, true}, {2, 2, false}, {3, 2, true}, {2, 3, false}, {4, 3, true}} {
		if got := holdsP(tc.procs, tc.threads); got != tc.want {
			t.Errorf("holdsP(%d Ps, %d threads) = %v, want %v", tc.procs, tc.threads, got, tc.want)
		}
	}
}
