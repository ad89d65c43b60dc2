package daemon

import (
	"log/slog"
	"net/netip"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/softmrc/softmrc/internal/mrc"
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
// ringDaemon builds a daemon (its loop not started: the test goroutine
// plays it) with one pipe port and a ring of session owner attached
// directly, and returns the ring's application end.
func ringDaemon(t testing.TB, owner uint32, lay shmring.Layout) (*Daemon, *shmring.App) {
	t.Helper()
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
	rs := &ringSession{owner: owner, r: r, mem: mem, bell: -1}
	d.rings[owner] = rs
	d.ringList = append(d.ringList, rs)
	return d, app
}

func TestRingPathAllocs(t *testing.T) {
	const owner = 1
	d, app := ringDaemon(t, owner, shmring.Layout{SQEntries: 64, CQEntries: 64})

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

// FuzzRingWR hands arbitrary work-request slots to the daemon through the
// ring of a session that owns a connected QP and a registered region: the
// daemon decodes each slot once and checks it like any post. Whatever the
// bytes, nothing panics, and a WR that does not name the session's QP
// completes with a local QP error; the bytes are never trusted.
func FuzzRingWR(f *testing.F) {
	good := vproto.WR{ID: 1, QPN: 0, Op: vproto.OpWrite, Flags: vproto.FlagSignaled, Len: 16, RemoteAddr: 0x1000, RKey: 5}
	var seed [shmring.SQSlot]byte
	good.Put(seed[:])
	f.Add(seed[:], true)
	f.Add(make([]byte, shmring.SQSlot), false)
	bad := good
	bad.Op, bad.Len, bad.LocalAddr = vproto.OpRead, 1<<31+5, ^uint64(0)
	bad.Put(seed[:])
	f.Add(seed[:], true)
	// One daemon for every input (building one per input made the fuzzer
	// crawl): its QP may go to error or fill up along the way, which only
	// changes which check refuses a WR.
	const owner = 3
	d, app := ringDaemon(f, owner, shmring.Layout{SQEntries: 16, CQEntries: 1024})
	qpn, err := d.eng.CreateQP(mrc.QPConfig{PD: owner, NumEVs: 8, SendQueue: 64})
	if err != nil {
		f.Fatal(err)
	}
	peer := mrc.QPInfo{QPN: 0x99, MTU: d.cfg.MTU, Window: 64, MaxWImm: 8}
	peer.Addrs[0] = wire.Addr128FromNetip(netip.MustParseAddr("fd00::2"))
	if err := d.eng.Connect(qpn, peer); err != nil {
		f.Fatal(err)
	}
	d.qps[qpn] = &qpState{owner: owner, qpn: qpn, sqDepth: 64}
	fd, err := unix.MemfdCreate("mr", unix.MFD_CLOEXEC)
	if err != nil {
		f.Fatal(err)
	}
	defer unix.Close(fd)
	_ = unix.Ftruncate(fd, 4096)
	reg, err := d.regions.Add(owner, fd, 0x10000, 4096, mrc.AccessLocalRead)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, slot []byte, ownQP bool) {
		var w vproto.WR
		var buf [shmring.SQSlot]byte
		copy(buf[:], slot)
		w.Get(buf[:])
		if ownQP {
			// Steer the fuzzer's bytes at the real QP and region, so the
			// engine's own checks (lkey, range, length, opcode) run too.
			w.QPN = uint32(qpn)
			if w.LKey&1 == 0 {
				w.LKey = reg.LKey
			}
			w.Put(buf[:])
		}
		s := app.SQReserve()
		copy(s, buf[:])
		app.SQCommit()
		app.SQPublish()
		if n := d.drainRings(d.now()); n != 1 {
			t.Fatalf("drainRings took %d slots, want 1", n)
		}
		d.transmit(d.now())
		d.completions()
		// Drain the CQ; a WR naming another QP completes at once with a
		// local QP error (after whatever the engine completed before it).
		found := false
		for {
			c, err := app.CQNext()
			if err != nil {
				t.Fatal(err)
			}
			if c == nil {
				break
			}
			var cqe vproto.CQE
			cqe.Get(c)
			app.CQRelease(1)
			if cqe.QPN == w.QPN && cqe.ID == w.ID && cqe.Status == vproto.StatusLocQPOpErr {
				found = true
			}
		}
		if w.QPN != uint32(qpn) && !found {
			t.Fatalf("WR id %d for QP %#x (not the session's) did not complete with a local QP error", w.ID, w.QPN)
		}
	})
}
