package dataplane

import (
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"
)

// TestFaultReadBack: every fault SetFault accepts reads back unchanged from
// the map (the daemon keeps no copy of its own).
func TestFaultReadBack(t *testing.T) {
	h := newHarness(t)
	for _, f := range []Fault{
		{},
		{Down: true},
		{Blackhole: true},
		{Down: true, Blackhole: true, LossPPM: 1},
		{LossPPM: 1},
		{LossPPM: 3},
		{LossPPM: 250_000},
		{LossPPM: 333_333},
		{LossPPM: 999_999},
		{LossPPM: 1_000_000},
		{FlapOn: time.Millisecond, FlapOff: 3 * time.Second},
		{Blackhole: true, LossPPM: 10_000, FlapOn: time.Hour, FlapOff: time.Nanosecond},
	} {
		must(t, h.d.SetFault(3, f))
		got, err := h.d.Fault(3)
		if err != nil {
			t.Fatal(err)
		}
		if got != f {
			t.Errorf("SetFault(%+v) reads back %+v", f, got)
		}
	}
	// Exhaustive for the loss encoding: it must invert for every ppm value.
	for ppm := uint32(0); ppm <= 1_000_000; ppm++ {
		thresh := uint32(uint64(ppm) << 32 / 1_000_000)
		if got := faultOf(SwitchSwFault{LossThresh: thresh, LossAll: b2u(ppm == 1_000_000)}).LossPPM; got != ppm {
			t.Fatalf("loss %d ppm encodes to %d and decodes to %d", ppm, thresh, got)
		}
	}
	if _, err := h.d.Fault(MaxPorts); err == nil {
		t.Error("Fault(MaxPorts) accepted")
	}

	for _, want := range []bool{true, false, true} {
		must(t, h.d.SetHang(want))
		if got, err := h.d.Hang(); err != nil || got != want {
			t.Errorf("Hang() = %v, %v after SetHang(%v)", got, err, want)
		}
	}
}

// TestFlapKeepsPhase: re-applying an unchanged flap keeps its start time;
// changing the durations (or clearing and setting again) restarts it.
func TestFlapKeepsPhase(t *testing.T) {
	h := newHarness(t)
	start := func() uint64 {
		t.Helper()
		var sf SwitchSwFault
		must(t, h.d.objs.Faults.Lookup(uint32(2), &sf))
		return sf.FlapStartNs
	}
	flap := Fault{FlapOn: time.Second, FlapOff: 2 * time.Second}
	must(t, h.d.SetFault(2, flap))
	s0 := start()
	if s0 == 0 {
		t.Fatal("flap has no start time")
	}
	// Other fault fields may change while the flap keeps running.
	again := flap
	again.LossPPM = 5
	must(t, h.d.SetFault(2, again))
	if s := start(); s != s0 {
		t.Errorf("unchanged flap re-applied: start %d, was %d (phase moved)", s, s0)
	}
	// The clock is monotonic nanoseconds: wait until it has visibly moved
	// so that a restart is distinguishable (poll, no fixed sleep).
	deadline := time.Now().Add(5 * time.Second)
	for monoNow(t) == s0 && time.Now().Before(deadline) {
	}
	must(t, h.d.SetFault(2, Fault{FlapOn: time.Second, FlapOff: 3 * time.Second}))
	s1 := start()
	if s1 <= s0 {
		t.Errorf("changed flap kept start %d (was %d), want a restart", s1, s0)
	}
	must(t, h.d.SetFault(2, Fault{}))
	for monoNow(t) == s1 && time.Now().Before(deadline) {
	}
	must(t, h.d.SetFault(2, Fault{FlapOn: time.Second, FlapOff: 3 * time.Second}))
	if s := start(); s <= s1 {
		t.Errorf("flap set after a clear kept start %d (was %d)", s, s1)
	}
}

// monoNow is the clock of flap_start_ns (bpf_ktime_get_ns).
func monoNow(t *testing.T) uint64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		t.Fatal(err)
	}
	return uint64(ts.Nano())
}

// TestPortReadBackAndDelPortClearsFault: Port returns what SetPort wrote,
// and a deleted port slot leaves no fault behind for its next user.
func TestPortReadBackAndDelPortClearsFault(t *testing.T) {
	h := newHarness(t)
	want := Port{
		Ifindex: loIfindex, NeighMAC: net.HardwareAddr{2, 1, 2, 3, 4, 5}, OwnMAC: net.HardwareAddr{2, 6, 7, 8, 9, 10},
		Role: RoleHostFacing, Model: PortModel{CapacityBps: 8e9, MarkBytes: 10, TrimBytes: 20, BufferBytes: 30, MarkMaxBytes: 25, MarkProb: 0.25},
	}
	must(t, h.d.SetPort(9, want))
	got, ok, err := h.d.Port(9)
	if err != nil || !ok || got.Ifindex != want.Ifindex || got.NeighMAC.String() != want.NeighMAC.String() ||
		got.OwnMAC.String() != want.OwnMAC.String() || got.Role != want.Role || got.Model != want.Model {
		t.Errorf("Port(9) = %+v, %v, %v; want %+v", got, ok, err, want)
	}
	must(t, h.d.SetFault(9, Fault{Down: true}))
	must(t, h.d.DelPort(9))
	if _, ok, err := h.d.Port(9); ok || err != nil {
		t.Errorf("deleted port still configured (ok %v, err %v)", ok, err)
	}
	if f, err := h.d.Fault(9); err != nil || f != (Fault{}) {
		t.Errorf("deleted port keeps fault %+v (err %v)", f, err)
	}
	if _, ok, _ := h.d.Port(10); ok {
		t.Error("unconfigured slot 10 reported as configured")
	}
}

// TestAdoptSkipsDeadLinks: links pinned on interfaces that were deleted
// while no process held the Dataplane are dropped at adoption (and their
// pins removed); the live link is adopted and the counters survive.
func TestAdoptSkipsDeadLinks(t *testing.T) {
	if testing.Short() {
		t.Skip("skipping netns test in -short mode")
	}
	c := newChain(t)
	if _, err := os.Stat("/sys/fs/bpf"); err != nil {
		t.Skip("skipping: no bpffs at /sys/fs/bpf")
	}
	pin := filepath.Join("/sys/fs/bpf", "softmrc-test-"+c.p)
	t.Cleanup(func() { os.RemoveAll(pin) })
	r0, r1, d0 := c.ifindex(c.R, c.p+"r0"), c.ifindex(c.R, c.p+"r1"), c.ifindex(c.D, c.p+"d0")

	d, err := Load(LoadOptions{PinDir: pin})
	if err != nil {
		t.Fatal(err)
	}
	c.in(c.R, func() error {
		if err := d.Attach(r0, AttachNative); err != nil {
			return err
		}
		return d.Attach(r1, AttachNative)
	})
	c.in(c.D, func() error { return d.AttachPass(d0) })
	if got := len(d.Attached()); got != 3 {
		t.Fatalf("Attached() = %v, want 3 links", d.Attached())
	}
	// Some counter state that must survive: one frame through BPF_PROG_RUN
	// (arrives on lo, an unmapped interface, and is passed: not IPv6).
	arp := make([]byte, 60)
	arp[12], arp[13] = 0x08, 0x06
	if _, err := d.SwitchProgram().Run(&ebpf.RunOptions{Data: arp}); err != nil {
		t.Fatal(err)
	}
	before, err := d.Counters(UnmappedPort)
	if err != nil || before.Pass == 0 {
		t.Fatalf("no counter state before the restart: %+v (err %v)", before, err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	// Deleting one end of the r1-d0 veth removes both ends: the pinned
	// links on r1 and d0 lose their device.
	sh(t, "ip", "-n", c.R, "link", "del", c.p+"r1")

	d2, err := Adopt(pin)
	if err != nil {
		t.Fatalf("Adopt with dead links: %v", err)
	}
	t.Cleanup(func() { d2.Destroy() })
	if got := d2.Attached(); len(got) != 1 || got[0] != (Attachment{r0, LinkSwitch}) {
		t.Errorf("Attached() after adopt = %v, want only the switch link on r0 (%d)", got, r0)
	}
	stale := d2.StaleLinks()
	wantStale := map[Attachment]bool{{r1, LinkSwitch}: true, {d0, LinkPass}: true}
	if len(stale) != 2 || !wantStale[stale[0]] || !wantStale[stale[1]] {
		t.Errorf("StaleLinks() = %v, want %v", stale, wantStale)
	}
	for _, a := range stale {
		name := linkPfx
		if a.Kind == LinkPass {
			name = passPfx
		}
		if _, err := os.Stat(filepath.Join(pin, linksDir, name+strconv.Itoa(a.Ifindex))); !os.IsNotExist(err) {
			t.Errorf("pin of dead link %v still there (stat: %v)", a, err)
		}
	}
	// (NDP/MLD of the live interfaces may add to them meanwhile.)
	if cnt, _ := d2.Counters(UnmappedPort); cnt.RxPackets < before.RxPackets || cnt.Pass < before.Pass {
		t.Errorf("counters did not survive the adoption: %+v, before %+v", cnt, before)
	}
	// The live link runs the new program.
	if p := progID(t, d2); p == 0 {
		t.Error("no program on the adopted link")
	}
}
