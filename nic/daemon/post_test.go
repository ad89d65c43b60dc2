package daemon

import (
	"log/slog"
	"net/netip"
	"path/filepath"
	"testing"

	"github.com/softmrc/softmrc/internal/wire"
	"github.com/softmrc/softmrc/nic/config"
	"github.com/softmrc/softmrc/nic/vproto"
	"github.com/softmrc/softmrc/nic/xsk"
)

// Posting is allocation-free once the queue has grown: the session
// goroutine copies work requests into the queue (Post), the loop swaps it out
// and runs them (drainPosts). Both are the daemon's own functions on a daemon
// built by New; the test goroutine plays the loop (Run is not started). The
// work requests name a QP that does not exist, so each one completes with an
// error on the way: the completions' delivery (flushDeliveries) is measured
// too.
func TestPostQueueAllocs(t *testing.T) {
	dir := t.TempDir()
	cfg := &config.Config{Host: "h1", Mode: config.ModeECMP, EVs: 8, DeviceSocket: filepath.Join(dir, "h1.sock")}
	cfg.Ports = []config.Port{{Name: "p0", Interface: "pipe0", MAC: wire.MAC{2, 0, 0, 0, 1, 0},
		NeighborMAC: wire.MAC{2, 0, 0, 0, 2, 0}, Address: netip.MustParseAddr("fd00::1")}}
	cfg.SetDefaults()
	a, _ := xsk.NewPipe("pa", "pb", 0)
	d, err := New(Options{Config: cfg, Ports: []xsk.Port{a}, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.svc.Close("test over"); d.closeResources() })

	const owner, qpn = 1, 7
	wrs := make([]vproto.WR, 64)
	for i := range wrs {
		wrs[i] = vproto.WR{ID: uint64(i), QPN: qpn}
	}
	round := func() int {
		d.Post(owner, wrs)
		return d.drainPosts(d.now())
	}
	if n := round(); n != len(wrs) {
		t.Fatalf("drainPosts ran %d work requests, want %d", n, len(wrs))
	}
	if got := d.c.cqes.Load(); got != uint64(len(wrs)) {
		t.Fatalf("%d completions delivered for %d posts to a missing QP, want one each", got, len(wrs))
	}
	round() // grow the second buffer too
	if a := testing.AllocsPerRun(100, func() { round() }); a != 0 {
		t.Errorf("Post + drainPosts allocate %.1f times per batch of %d, want 0", a, len(wrs))
	}
	d.closePosts()
	d.Post(owner, wrs)
	if n := d.drainPosts(d.now()); n != 0 {
		t.Errorf("Post queued %d work requests after the loop stopped", n)
	}
}
