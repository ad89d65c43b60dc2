package daemon

import (
	"log/slog"
	"net/netip"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/softmrc/softmrc/internal/wire"
	"github.com/softmrc/softmrc/nic/config"
	"github.com/softmrc/softmrc/nic/shmring"
	"github.com/softmrc/softmrc/nic/vproto"
	"github.com/softmrc/softmrc/nic/xsk"
)

// The ring path allocates nothing per message: a work request taken from
// the SQ (drainRings), its completion written to the CQ (flushDeliveries),
// and the quiet flush after it, which once deleted the session's delivery
// slice so that the next completion grew a new one. The test goroutine
// plays the loop and the application.
func TestRingPathAllocs(t *testing.T) {
	dir := t.TempDir()
	cfg := &config.Config{Host: "h1", Mode: config.ModeECMP, EVs: 8, DeviceSocket: filepath.Join(dir, "h1.sock")}
	cfg.Ports = []config.Port{{Name: "p0", Interface: "pipe0", MAC: wire.MAC{2, 0, 0, 0, 1, 0},
		NeighborMAC: wire.MAC{2, 0, 0, 0, 2, 0}, Address: netip.MustParseAddr("fd00::1")}}
	cfg.SetDefaults()
	pa, _ := xsk.NewPipe("pa", "pb", 0)
	d, err := New(Options{Config: cfg, Ports: []xsk.Port{pa}, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.svc.Close("test over"); d.closeResources() })

	lay := shmring.Layout{SQEntries: 64, CQEntries: 64}
	mem, err := unix.Mmap(-1, 0, lay.Size(), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_ANONYMOUS)
	if err != nil {
		t.Fatal(err)
	}
	app, err := shmring.Init(mem, lay)
	if err != nil {
		t.Fatal(err)
	}
	r, err := shmring.Attach(mem)
	if err != nil {
		t.Fatal(err)
	}
	const owner = 1
	rs := &ringSession{owner: owner, r: r, mem: mem, bell: -1}
	d.rings[owner] = rs
	d.ringList = append(d.ringList, rs)

	// A WR for a QP that does not exist: it completes with an error, so
	// every round carries one completion through the CQ.
	wr := vproto.WR{ID: 5, QPN: 7, Flags: vproto.FlagSignaled}
	var cqe vproto.CQE
	round := func() {
		s := app.SQReserve()
		wr.Put(s)
		app.SQCommit()
		app.SQPublish()
		if n := d.drainRings(d.now()); n != 1 {
			t.Fatalf("drainRings took %d work requests, want 1", n)
		}
		d.flushDeliveries() // a quiet flush, as every loop turn has
		c, err := app.CQNext()
		if err != nil || c == nil {
			t.Fatalf("no completion in the CQ (%v)", err)
		}
		cqe.Get(c)
		app.CQRelease(1)
	}
	round()
	if cqe.ID != 5 || cqe.Status != vproto.StatusLocQPOpErr {
		t.Fatalf("completion %+v, want id 5 with a local QP error", cqe)
	}
	if a := testing.AllocsPerRun(200, round); a != 0 {
		t.Errorf("a work request and its completion through the rings allocate %.1f times, want 0", a)
	}
}
