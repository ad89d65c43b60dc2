package dataplane

import (
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestAdoptWithoutGap keeps frames flowing through a switch on a real veth
// chain while the Dataplane is closed (as when mrc-switchd exits) and adopted
// again from its pins: the switch counts no drop, everything it received was
// forwarded and arrived, routes and counters survive, and the pinned link now
// runs the newly loaded program.
func TestAdoptWithoutGap(t *testing.T) {
	if testing.Short() {
		t.Skip("skipping netns test in -short mode")
	}
	c := newChain(t)
	if _, err := os.Stat("/sys/fs/bpf"); err != nil {
		t.Skip("skipping: no bpffs at /sys/fs/bpf")
	}
	pin := filepath.Join("/sys/fs/bpf", "softmrc-test-"+c.p)
	t.Cleanup(func() { os.RemoveAll(pin) })
	r0idx, r1idx, d0idx := c.ifindex(c.R, c.p+"r0"), c.ifindex(c.R, c.p+"r1"), c.ifindex(c.D, c.p+"d0")

	d, err := Load(LoadOptions{PinDir: pin})
	if err != nil {
		t.Fatal(err)
	}
	c.in(c.R, func() error {
		if err := d.SetSwitchConfig(SwitchConfig{Block: testBlock, OwnUSIDs: []uint16{ownUSID}}); err != nil {
			return err
		}
		if err := d.SetPort(0, Port{Ifindex: r1idx, NeighMAC: c.macD0, OwnMAC: c.macR1}); err != nil {
			return err
		}
		if err := d.AddRoute(netip.MustParsePrefix("5f00:1:200::/48"), NextHop{Port: 0}); err != nil {
			return err
		}
		return d.Attach(r0idx, AttachNative)
	})
	c.in(c.D, func() error { return d.AttachPass(d0idx) })
	routesBefore, _ := d.Routes()

	tx := c.openPacket(c.S, c.p+"s0")
	rx := c.openPacket(c.D, c.p+"d0")
	frame := c.probeFrame(netip.MustParseAddr("5f00:1:100:200::"), 64, 1)
	const n = 20000
	var sent atomic.Int64
	done := make(chan error, 1)
	go func() {
		// Paced (one frame per 25 µs) so the veth rings never overflow:
		// any loss would then be the switch's.
		start := time.Now()
		for i := 0; i < n; i++ {
			for time.Since(start) < time.Duration(i)*25*time.Microsecond {
			}
			if err := tx.send(frame); err != nil {
				done <- err
				return
			}
			sent.Add(1)
		}
		done <- nil
	}()
	var received int
	recvDone := make(chan struct{})
	go func() {
		defer close(recvDone)
		buf := make([]byte, 4096)
		idle := 0
		for idle < 25 { // 25 consecutive 20 ms timeouts after the sender stops
			if f := rx.recv(buf); f != nil {
				if id, ok := probeID(f); ok && id == 1 {
					received++
				}
				idle = 0
			} else if sent.Load() == n {
				idle++
			}
		}
	}()

	// Restart in the middle of the stream.
	deadline := time.Now().Add(10 * time.Second)
	for sent.Load() < n/4 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	oldProgID := progID(t, d)
	if err := d.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	d2, err := Adopt(pin)
	if err != nil {
		t.Fatalf("Adopt: %v", err)
	}
	t.Cleanup(func() { d2.Destroy() })
	if err := <-done; err != nil {
		t.Fatalf("sender: %v", err)
	}
	<-recvDone

	routesAfter, err := d2.Routes()
	if err != nil || len(routesAfter) != len(routesBefore) || routesAfter[0] != routesBefore[0] {
		t.Errorf("routes after adopt %v (err %v), before %v", routesAfter, err, routesBefore)
	}
	if got, want := d2.Attached(), map[Attachment]bool{{r0idx, LinkSwitch}: true, {d0idx, LinkPass}: true}; len(got) != 2 || !want[got[0]] || !want[got[1]] {
		t.Errorf("attached after adopt: %v, want %v", got, want)
	}
	if newID := progID(t, d2); newID == oldProgID {
		t.Errorf("pinned link still runs the old program %d", oldProgID)
	}
	in, _ := d2.Counters(UnmappedPort) // r0 is not a configured port
	out, _ := d2.Counters(0)
	t.Logf("sent %d, switch rx %d, forwarded %d, received %d", n, in.RxPackets, out.Forwarded, received)
	if in.Dropped()+out.Dropped() != 0 {
		t.Errorf("switch dropped frames across the restart: in %+v out %+v", in, out)
	}
	// Rx also counts the sender's own NDP/MLD frames, which pass to the kernel.
	if in.RxPackets-in.Pass != n || out.Forwarded != n || received != n {
		t.Errorf("sent %d, switch rx %d, forwarded %d, received %d: frames lost across the restart", n, in.RxPackets, out.Forwarded, received)
	}

	// Destroy removes the links and pins.
	if err := d2.Destroy(); err != nil {
		t.Fatalf("Destroy: %v", err)
	}
	if _, err := os.Stat(pin); !os.IsNotExist(err) {
		t.Errorf("pin dir %s still exists after Destroy", pin)
	}
	out2, _ := exec.Command("ip", "-n", c.R, "link", "show", c.p+"r0").CombinedOutput()
	if strings.Contains(string(out2), "xdp") {
		t.Errorf("XDP still attached after Destroy: %s", out2)
	}
}

// progID is the ID of the program behind the switch link of d.
func progID(t *testing.T, d *Dataplane) uint32 {
	t.Helper()
	d.mu.Lock()
	defer d.mu.Unlock()
	for name, l := range d.links {
		if strings.HasPrefix(name, linkPfx) {
			info, err := l.Info()
			if err != nil {
				t.Fatalf("link info: %v", err)
			}
			return uint32(info.Program)
		}
	}
	t.Fatal("no switch link")
	return 0
}
