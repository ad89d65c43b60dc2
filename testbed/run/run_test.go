package run

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/softmrc/softmrc/testbed/netns"
	"github.com/softmrc/softmrc/testbed/plan"
	"github.com/softmrc/softmrc/testbed/probe"
	"github.com/softmrc/softmrc/testbed/topo"
)

// meshCheck sends every path of the plan and fails the test for any probe that
// is lost or arrives wrong; skip lists paths expected to be lost.
func meshCheck(t *testing.T, pr *probe.Prober, paths []probe.Path, lost func(probe.Path) bool) {
	t.Helper()
	res, err := pr.Mesh(paths, 500*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	arrived, dropped := 0, 0
	for _, r := range res {
		want := !lost(r.Path)
		switch {
		case r.Arrived && r.Wrong != "":
			t.Errorf("%s: arrived wrong: %s", r.Path, r.Wrong)
		case want && !r.Arrived:
			t.Errorf("%s (links %v): lost", r.Path, r.Path.Links)
		case !want && r.Arrived:
			t.Errorf("%s (links %v): arrived although a fault is on its path", r.Path, r.Path.Links)
		}
		if r.Arrived {
			arrived++
		} else {
			dropped++
		}
	}
	t.Logf("%d probes: %d arrived, %d lost", len(res), arrived, dropped)
}

func none(probe.Path) bool { return false }

func crosses(link string) func(probe.Path) bool {
	return func(pa probe.Path) bool {
		for _, l := range pa.Links {
			if l == link {
				return true
			}
		}
		return false
	}
}

// TestSRv6EveryPath: on clos-2p with real mrc-switchd processes, a probe
// from every host to every other host through every (plane, T1) arrives at
// the right port with the right outer and inner destination, hop limit and
// MACs.
func TestSRv6EveryPath(t *testing.T) {
	r := upRun(t, "clos-2p", topo.ModeSRv6, topo.DataplaneXDP)
	paths, err := probe.Paths(r.p)
	if err != nil {
		t.Fatal(err)
	}
	// Per host: (hosts_per_t0-1) T0-local peers × planes, and the others ×
	// planes × T1s.
	h, hpt, pl, t1 := len(r.p.Hosts), r.p.HostsPerT0, r.p.Planes, r.p.T1PerPlane
	if want := h*(hpt-1)*pl + h*(h-hpt)*pl*t1; len(paths) != want {
		t.Fatalf("%d paths, want %d", len(paths), want)
	}
	meshCheck(t, r.pr, paths, none)
}

// TestSRv6KernelOracle runs the same mesh through the Linux kernel's
// seg6local End next-csid (dataplane: kernel): the plan's FIB is right
// independently of the XDP switch.
func TestSRv6KernelOracle(t *testing.T) {
	r := upRun(t, "clos-2p", topo.ModeSRv6, topo.DataplaneKernel)
	paths, err := probe.Paths(r.p)
	if err != nil {
		t.Fatal(err)
	}
	meshCheck(t, r.pr, paths, none)
}

// TestECMP: plain IPv6 from every host reaches every other host on every
// plane, as raw probes and as kernel UDP between the hosts' stacks.
func TestECMP(t *testing.T) {
	for _, dp := range []topo.Dataplane{topo.DataplaneXDP, topo.DataplaneKernel} {
		t.Run(string(dp), func(t *testing.T) {
			r := upRun(t, "clos-2p", topo.ModeECMP, dp)
			paths, err := probe.Paths(r.p)
			if err != nil {
				t.Fatal(err)
			}
			meshCheck(t, r.pr, paths, none)
			for _, src := range r.p.Hosts {
				for _, dst := range r.p.Hosts {
					if src.Name != dst.Name {
						udpOnce(t, src.NS, dst.NS, dst.Ports[len(dst.Ports)-1].Addr.Addr())
					}
				}
			}
		})
	}
}

// udpOnce sends a datagram from one namespace's kernel to an address in
// another and waits for it.
func udpOnce(t *testing.T, srcNS, dstNS string, to netip.Addr) {
	t.Helper()
	var ln *net.UDPConn
	err := netns.Do(dstNS, func() (err error) {
		ln, err = net.ListenUDP("udp6", &net.UDPAddr{IP: to.AsSlice(), Port: 18516})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	msg := []byte(fmt.Sprintf("%s->%s", srcNS, to))
	var c *net.UDPConn
	if err := netns.Do(srcNS, func() (err error) {
		c, err = net.DialUDP("udp6", nil, &net.UDPAddr{IP: to.AsSlice(), Port: 18516})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	buf := make([]byte, 256)
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) {
		// Resend: the very first datagram may wait for nothing (static
		// neighbours), but a lost one must not fail the test by itself.
		if _, err := c.Write(msg); err != nil {
			t.Fatal(err)
		}
		ln.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
		n, _, err := ln.ReadFromUDP(buf)
		if err == nil && string(buf[:n]) == string(msg) {
			return
		}
	}
	t.Errorf("UDP %s -> %s never arrived", srcNS, to)
}

// TestFaults: each fault kind takes effect on exactly the paths that cross
// its target, shows in status, and reverts. The time from asking for the
// fault to the first probe it drops is logged (the 100 ms goal; no
// timing assertion).
func TestFaults(t *testing.T) {
	r := upRun(t, "clos-2p", topo.ModeSRv6, topo.DataplaneXDP)
	paths, err := probe.Paths(r.p)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	o := Options{BinDir: r.bin, Log: quietLog()}
	fabric := "p0-t0-0--p0-t1-1"
	for _, tc := range []struct {
		target, op string
		lost       func(probe.Path) bool
		probePath  func(probe.Path) bool // a path the fault must break, for timing
	}{
		{fabric, "down", crosses(fabric), crosses(fabric)},
		{fabric, "blackhole", crosses(fabric), crosses(fabric)},
		{fabric, "loss=1", crosses(fabric), crosses(fabric)},
		{"h0:p1", "down", func(pa probe.Path) bool { return pa.Plane == 1 && (pa.Src == "h0" || pa.Dst == "h0") }, func(pa probe.Path) bool { return pa.Plane == 1 && pa.Src == "h0" }},
		{"h3--p0-t0-1", "blackhole", crosses("h3--p0-t0-1"), func(pa probe.Path) bool { return pa.Plane == 0 && pa.Dst == "h3" }},
		{"p1-t1-0", "hang", func(pa probe.Path) bool { return pa.Plane == 1 && pa.T1 == 0 }, func(pa probe.Path) bool { return pa.Plane == 1 && pa.T1 == 0 }},
		{"p0-t1-1", "down", func(pa probe.Path) bool { return pa.Plane == 0 && pa.T1 == 1 }, func(pa probe.Path) bool { return pa.Plane == 0 && pa.T1 == 1 }},
	} {
		t.Run(strings.ReplaceAll(tc.target+"_"+tc.op, "=", ""), func(t *testing.T) {
			op, err := ParseOp(tc.op)
			if err != nil {
				t.Fatal(err)
			}
			var victim probe.Path
			for _, pa := range paths {
				if tc.probePath(pa) {
					victim = pa
					break
				}
			}
			start := time.Now()
			if err := Fault(ctx, r.dir, tc.target, op, o); err != nil {
				t.Fatal(err)
			}
			faultTook := time.Since(start)
			took := firstLoss(t, r.pr, victim, 2*time.Second)
			t.Logf("fault %s %s: Fault returned after %v; first dropped probe sent %v later", tc.target, tc.op, faultTook, took)
			st, err := GetStatus(r.dir)
			if err != nil {
				t.Fatal(err)
			}
			if len(st.Faults) != 1 || st.Faults[0].Target != tc.target || st.Faults[0].Op != op.String() {
				t.Errorf("status faults %+v, want %s %s", st.Faults, tc.target, op)
			}
			// The switches (or the NIC port's link state) report it too.
			if len(st.Live) == 0 {
				t.Errorf("status: no switch reports fault %s %s", tc.target, tc.op)
			}
			var sb strings.Builder
			st.Print(&sb)
			t.Logf("status:\n%s", sb.String())
			meshCheck(t, r.pr, paths, tc.lost)
			if err := Fault(ctx, r.dir, tc.target, Op{Kind: "clear"}, o); err != nil {
				t.Fatal(err)
			}
			if st, _ := GetStatus(r.dir); len(st.Faults) != 0 || len(st.Live) != 0 {
				t.Errorf("faults after clear: %+v, switches report %+v", st.Faults, st.Live)
			}
			waitArrives(t, r.pr, victim, 2*time.Second)
			meshCheck(t, r.pr, paths, none)
		})
	}
}

// TestFlap: a flapping link both passes and drops probes over a few cycles,
// then clears.
func TestFlap(t *testing.T) {
	r := upRun(t, "clos-2p", topo.ModeSRv6, topo.DataplaneXDP)
	paths, _ := probe.Paths(r.p)
	link := "p1-t0-1--p1-t1-1"
	var victim probe.Path
	for _, pa := range paths {
		if crosses(link)(pa) {
			victim = pa
			break
		}
	}
	ctx, o := context.Background(), Options{BinDir: r.bin, Log: quietLog()}
	op, _ := ParseOp("flap=40ms/40ms")
	if err := Fault(ctx, r.dir, link, op, o); err != nil {
		t.Fatal(err)
	}
	arrived, lost := 0, 0
	for i := 0; i < 200 && (arrived == 0 || lost == 0 || i < 20); i++ {
		res, err := r.pr.Mesh([]probe.Path{victim}, 15*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		if res[0].Arrived {
			arrived++
		} else {
			lost++
		}
	}
	t.Logf("flap %s: %d probes arrived, %d lost", link, arrived, lost)
	if arrived == 0 || lost == 0 {
		t.Errorf("flapping link: %d arrived, %d lost; want both", arrived, lost)
	}
	if err := Fault(ctx, r.dir, link, Op{Kind: "clear"}, o); err != nil {
		t.Fatal(err)
	}
	meshCheck(t, r.pr, paths, none)
}

// TestRestart: the restart op SIGKILLs a switch's mrc-switchd and starts it
// again (S10's "reboot with no coordination"). The new daemon adopts the
// pinned program and maps: every path forwards after it, and a hang applied
// before the restart is still in force (it lives in the pinned faults map)
// until cleared. A NIC port or link cannot be restarted.
func TestRestart(t *testing.T) {
	r := upRun(t, "clos-2p", topo.ModeSRv6, topo.DataplaneXDP)
	paths, _ := probe.Paths(r.p)
	ctx, o := context.Background(), Options{BinDir: r.bin, Log: quietLog()}
	sw := "p1-t1-0"
	pidOf := func() int {
		st, err := LoadState(r.dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, pr := range st.Processes {
			if pr.Role == "mrc-switchd" && pr.Name == sw {
				return pr.PID
			}
		}
		t.Fatalf("no mrc-switchd recorded for %s", sw)
		return 0
	}
	hung := func(pa probe.Path) bool { return pa.Plane == 1 && pa.T1 == 0 }
	for _, tc := range []struct {
		name   string
		before string // op applied before the restart ("" none)
		lost   func(probe.Path) bool
	}{
		{"plain", "", none},
		{"hang survives", "hang", hung},
	} {
		t.Run(strings.ReplaceAll(tc.name, " ", "_"), func(t *testing.T) {
			if tc.before != "" {
				op, _ := ParseOp(tc.before)
				if err := Fault(ctx, r.dir, sw, op, o); err != nil {
					t.Fatal(err)
				}
			}
			old := pidOf()
			if err := Fault(ctx, r.dir, sw, Op{Kind: "restart"}, o); err != nil {
				t.Fatal(err)
			}
			if now := pidOf(); now == old || syscall.Kill(old, 0) == nil {
				t.Errorf("mrc-switchd of %s: pid %d before, %d after; the old one must be gone", sw, old, now)
			}
			st, err := GetStatus(r.dir)
			if err != nil {
				t.Fatal(err)
			}
			if !st.Healthy {
				t.Errorf("status after restart: not healthy: %+v", st.Processes)
			}
			if hang := len(st.Live) == 1 && st.Live[0].Node == sw && st.Live[0].State == "hang"; hang != (tc.before == "hang") {
				t.Errorf("the restarted daemon reports %+v; hang before the restart: %v", st.Live, tc.before == "hang")
			}
			meshCheck(t, r.pr, paths, tc.lost)
			if err := Fault(ctx, r.dir, sw, Op{Kind: "clear"}, o); err != nil {
				t.Fatal(err)
			}
			meshCheck(t, r.pr, paths, none)
		})
	}
	if err := Fault(ctx, r.dir, "h0:p0", Op{Kind: "restart"}, o); err == nil || !strings.Contains(err.Error(), "applies to a switch") {
		t.Errorf("restart of a NIC port: %v, want a clear refusal", err)
	}
}

// firstLoss sends the path's probe until one is lost; it returns when the
// first lost one was sent, relative to the call.
func firstLoss(t *testing.T, pr *probe.Prober, pa probe.Path, limit time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	for time.Since(start) < limit {
		sent := time.Since(start)
		res, err := pr.Mesh([]probe.Path{pa}, 30*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		if !res[0].Arrived {
			return sent
		}
	}
	t.Fatalf("%s: the fault never took effect within %v", pa, limit)
	return 0
}

func waitArrives(t *testing.T, pr *probe.Prober, pa probe.Path, limit time.Duration) {
	t.Helper()
	start := time.Now()
	for time.Since(start) < limit {
		res, err := pr.Mesh([]probe.Path{pa}, 50*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		if res[0].Arrived {
			return
		}
	}
	t.Fatalf("%s: still lost %v after clearing the fault", pa, limit)
}

// TestKernelLinkFault: the kernel dataplane takes down/up, refuses the rest.
func TestKernelLinkFault(t *testing.T) {
	r := upRun(t, "clos-2p", topo.ModeSRv6, topo.DataplaneKernel)
	paths, _ := probe.Paths(r.p)
	ctx, o := context.Background(), Options{Log: quietLog()}
	link := "p1-t0-1--p1-t1-0"
	if err := Fault(ctx, r.dir, link, Op{Kind: "down"}, o); err != nil {
		t.Fatal(err)
	}
	meshCheck(t, r.pr, paths, crosses(link))
	if err := Fault(ctx, r.dir, link, Op{Kind: "up"}, o); err != nil {
		t.Fatal(err)
	}
	meshCheck(t, r.pr, paths, none)
	if err := Fault(ctx, r.dir, link, Op{Kind: "blackhole"}, o); err == nil || !strings.Contains(err.Error(), "xdp dataplane") {
		t.Errorf("blackhole on the kernel dataplane: %v, want a clear refusal", err)
	}
	for _, tc := range []struct{ target, op, msg string }{
		{"h0:p0", "loss=0.5", "NIC port takes down|up|clear"},
		{link, "hang", "applies to a switch"},
		{"p0-t1-0", "hang", "xdp dataplane"},
		{link, "restart", "applies to a switch"},
		{"p0-t1-0", "restart", "xdp dataplane"},
		{"nope", "down", "unknown fault target"},
		{"h0--mgmt", "down", "management network"},
	} {
		op, _ := ParseOp(tc.op)
		if err := Fault(ctx, r.dir, tc.target, op, o); err == nil || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("fault %s %s: %v, want an error containing %q", tc.target, tc.op, err, tc.msg)
		}
	}
}

// TestUpIdempotentAndRecovers: up twice is a no-op; after a daemon is
// killed, up notices and rebuilds; down leaves nothing (checked by Cleanup).
func TestUpIdempotentAndRecovers(t *testing.T) {
	r := upRun(t, "clos-2p", topo.ModeSRv6, topo.DataplaneXDP)
	ctx := context.Background()
	st2, err := Up(ctx, r.p, Options{BinDir: r.bin, Log: quietLog()})
	if err != nil {
		t.Fatal(err)
	}
	if st2.Processes[0].PID != r.st.Processes[0].PID {
		t.Errorf("second up restarted the daemons (pid %d -> %d)", r.st.Processes[0].PID, st2.Processes[0].PID)
	}
	victim := r.st.Processes[3]
	syscall.Kill(victim.PID, syscall.SIGKILL)
	for victim.Alive() {
		time.Sleep(5 * time.Millisecond)
	}
	if st, _ := GetStatus(r.dir); st.Healthy {
		t.Error("status says healthy with a dead mrc-switchd")
	}
	// The rebuild replaces every namespace: sockets in the old ones would
	// keep them alive.
	r.pr.Close()
	st3, err := Up(ctx, r.p, Options{BinDir: r.bin, Log: quietLog()})
	if err != nil {
		t.Fatal(err)
	}
	r.st = st3
	if r.pr, err = probe.NewProber(r.p); err != nil {
		t.Fatal(err)
	}
	if st, _ := GetStatus(r.dir); !st.Healthy {
		t.Errorf("not healthy after recovering up: %+v", st)
	}
	paths, _ := probe.Paths(r.p)
	meshCheck(t, r.pr, paths, none)
	// Down here (not only in Cleanup) so that the old processes are
	// checked too.
	if err := Down(r.dir, quietLog()); err != nil {
		t.Fatal(err)
	}
	checkGone(t, r.p, r.st)
	for _, pr := range append(r.st.Processes, victim) {
		if pr.Alive() {
			t.Errorf("%s %s survives down", pr.Role, pr.Name)
		}
	}
	if left := procsOf(r.dir); len(left) > 0 {
		t.Errorf("processes mentioning %s survive down: %v", r.dir, left)
	}
}

// TestUpAfterKill kills a real `up` (a child process) with SIGKILL at each
// stage; a following up must recover and down must leave nothing.
func TestUpAfterKill(t *testing.T) {
	needRoot(t)
	bin := switchdBin(t)
	for _, at := range []string{"listed", "applied", "launched"} {
		t.Run(at, func(t *testing.T) {
			dir := t.TempDir() + "/run"
			prefix := randPrefix(t)
			self, err := os.Executable()
			if err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command(self, "-test.run=^$")
			cmd.Env = append(os.Environ(), crashEnv+"="+at, "MRC_CRASH_DIR="+dir, "MRC_CRASH_PREFIX="+prefix, "MRC_BIN="+bin)
			out, err := cmd.CombinedOutput()
			if ee, ok := err.(*exec.ExitError); !ok || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
				t.Fatalf("child did not die by SIGKILL: %v\n%s", err, out)
			}
			st, err := LoadState(dir)
			if err != nil {
				t.Fatal(err)
			}
			if st.Phase != PhaseApplying {
				t.Errorf("killed run has phase %q", st.Phase)
			}
			p := crashPlan(t, dir, prefix)
			st2, err := Up(context.Background(), p, Options{BinDir: bin, Log: quietLog()})
			if err != nil {
				t.Fatalf("up after a killed up: %v", err)
			}
			paths, _ := probe.Paths(p)
			pr, err := probe.NewProber(p)
			if err != nil {
				t.Fatal(err)
			}
			meshCheck(t, pr, paths, none)
			pr.Close()
			if err := Down(dir, quietLog()); err != nil {
				t.Fatal(err)
			}
			checkGone(t, p, st2)
			for _, pr := range st.Processes {
				if pr.Alive() {
					t.Errorf("%s %s of the killed run survives", pr.Role, pr.Name)
				}
			}
		})
	}
}

func crashPlan(t testing.TB, dir, prefix string) *plan.Plan {
	top, _ := topo.Preset("clos-2p")
	p, err := plan.Build(top, plan.Options{Prefix: prefix, RunDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// crashChild is the child side of TestUpAfterKill.
func crashChild(at string) int {
	dir, prefix := os.Getenv("MRC_CRASH_DIR"), os.Getenv("MRC_CRASH_PREFIX")
	p := crashPlan(&testing.T{}, dir, prefix)
	testHook = func(stage string) {
		if stage == at {
			syscall.Kill(os.Getpid(), syscall.SIGKILL)
			select {}
		}
	}
	_, err := Up(context.Background(), p, Options{Log: quietLog()})
	fmt.Fprintln(os.Stderr, "child: up returned", err)
	return 3
}

// TestPlanConflicts: a second run with the same prefix in another directory
// is refused instead of touching the first run's namespaces.
func TestPrefixConflict(t *testing.T) {
	// ecmp: the check is the mode's business of neither, and ecmp needs no
	// seg6local in the kernel.
	r := upRun(t, "pair", topo.ModeECMP, topo.DataplaneKernel)
	top, _ := topo.Preset("pair")
	top.Mode, top.Dataplane = topo.ModeECMP, topo.DataplaneKernel
	p2, err := plan.Build(top, plan.Options{Prefix: r.p.Prefix, RunDir: t.TempDir() + "/other"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = Up(context.Background(), p2, Options{Log: quietLog()})
	if err == nil || !strings.Contains(err.Error(), "another run uses prefix") {
		t.Fatalf("second run with the same prefix: %v", err)
	}
	os.RemoveAll(p2.RunDir)
}

// TestNICHookExecMgmt: with nics: true and an mrc-nicd binary present, one
// runs in every host namespace with its config and down stops it; exec runs
// in the host's namespace; the management network carries TCP between hosts.
func TestNICHookExecMgmt(t *testing.T) {
	needRoot(t)
	bin := t.TempDir()
	// A stand-in mrc-nicd: this test binary serving the device socket.
	self, serr := os.Executable()
	if serr != nil {
		t.Fatal(serr)
	}
	script := fmt.Sprintf("#!/bin/sh\n%s=1 exec %q \"$@\"\n", fakeNICdEnv, self)
	if err := os.WriteFile(bin+"/mrc-nicd", []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	top, _ := topo.Preset("clos-2p")
	top.Dataplane, top.NICs = topo.DataplaneKernel, true
	var (
		p   *plan.Plan
		st  *State
		dir string
	)
	up := func() error {
		dir = t.TempDir() + "/run"
		var err error
		if p, err = plan.Build(top, plan.Options{Prefix: randPrefix(t), RunDir: dir}); err != nil {
			t.Fatal(err)
		}
		st, err = Up(context.Background(), p, Options{BinDir: bin, Log: quietLog()})
		p, st, dir := p, st, dir
		t.Cleanup(func() {
			Down(dir, quietLog())
			checkGone(t, p, st)
		})
		return err
	}
	err := up()
	if errors.Is(err, netns.ErrNoSRv6) {
		// What is tested here is the NIC hook, not the switches' routes:
		// on a kernel without seg6local, ecmp mode's plain routes do.
		t.Logf("%v: ecmp mode instead", err)
		top.Mode = topo.ModeECMP
		err = up()
	}
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Processes) != len(p.Hosts) {
		t.Fatalf("%d processes, want one mrc-nicd per host (%d)", len(st.Processes), len(p.Hosts))
	}
	for i, h := range p.Hosts {
		pr := st.Processes[i]
		if pr.Role != "mrc-nicd" || pr.NS != h.NS || !pr.Alive() {
			t.Errorf("process %d: %+v", i, pr)
		}
		// The process really runs in the host's namespace.
		link, _ := os.Readlink(fmt.Sprintf("/proc/%d/ns/net", pr.PID))
		var fi syscall.Stat_t
		syscall.Stat(netns.Path(h.NS), &fi)
		if link != fmt.Sprintf("net:[%d]", fi.Ino) {
			t.Errorf("mrc-nicd of %s runs in %s, want net:[%d]", h.Name, link, fi.Ino)
		}
	}
	// exec: the host namespace has the host's address.
	out, err := os.CreateTemp(t.TempDir(), "exec")
	if err != nil {
		t.Fatal(err)
	}
	if err := Exec(context.Background(), dir, "h2", []string{"cat", "/proc/net/if_inet6"}, nil, out, out); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(out.Name())
	a := p.Hosts[2].Ports[0].Addr.Addr().As16()
	if !strings.Contains(string(b), hex.EncodeToString(a[:])) {
		t.Errorf("exec h2: /proc/net/if_inet6 lacks %s:\n%s", p.Hosts[2].Ports[0].Addr, b)
	}
	// exec on a host names its NIC's device socket (MRC_DEVICE), as a
	// group does, over whatever the caller had: the verbs tools then find
	// the host's mrc-nicd without -d.
	t.Setenv("MRC_DEVICE", "/nonexistent/outside.sock")
	envOut, err := os.CreateTemp(t.TempDir(), "env")
	if err != nil {
		t.Fatal(err)
	}
	if err := Exec(context.Background(), dir, "h2", []string{"sh", "-c", "echo dev=$MRC_DEVICE nic=$MRC_NIC_CONFIG host=$MRC_HOST hosts=$MRC_HOSTS"}, nil, envOut, envOut); err != nil {
		t.Fatal(err)
	}
	b, _ = os.ReadFile(envOut.Name())
	// Every host's management address by name: `mrc-write-bw h0` in h2
	// dials h0's (hostmap).
	var hosts []string
	for _, h := range p.Hosts {
		hosts = append(hosts, h.Name+"="+h.MgmtAddr.Addr().String())
	}
	slices.Sort(hosts)
	if want := fmt.Sprintf("dev=%s nic=%s host=h2 hosts=%s\n", NICSocket(&p.Hosts[2]), p.Hosts[2].NICConfig, strings.Join(hosts, ",")); string(b) != want {
		t.Errorf("exec h2 environment: %q, want %q", b, want)
	}
	if err := Exec(context.Background(), dir, "nope", []string{"true"}, nil, out, out); err == nil {
		t.Error("exec on an unknown node succeeded")
	}
	// Cancelling exec (mrc-testbed exec got SIGTERM) stops the command.
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	tag := fmt.Sprintf("%d", 600000+os.Getpid()%100000) // a sleep length nobody else uses
	go func() { done <- Exec(ctx, dir, "h1", []string{"sleep", tag}, nil, out, out) }()
	for deadline := time.Now().Add(5 * time.Second); len(procsOf("sleep\x00"+tag)) == 0 && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	select {
	case err := <-done:
		if err == nil {
			t.Error("a cancelled exec reported success")
		}
	case <-time.After(10 * time.Second):
		t.Error("cancelled exec did not stop its command")
	}
	if left := procsOf("sleep\x00" + tag); len(left) > 0 {
		t.Errorf("the exec'd command survives: %v", left)
	}
	// Out-of-band TCP over the management bridge, h0 -> h3.
	var ln net.Listener
	to := p.Hosts[3].MgmtAddr.Addr()
	if err := netns.Do(p.Hosts[3].NS, func() (err error) {
		ln, err = net.Listen("tcp6", net.JoinHostPort(to.String(), "18515"))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err == nil {
			c.Write([]byte("hello"))
			c.Close()
		}
	}()
	var c net.Conn
	if err := netns.Do(p.Hosts[0].NS, func() (err error) {
		c, err = net.DialTimeout("tcp6", net.JoinHostPort(to.String(), "18515"), 5*time.Second)
		return err
	}); err != nil {
		t.Fatalf("TCP over the management network: %v", err)
	}
	buf := make([]byte, 5)
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err = io.ReadFull(c, buf)
	c.Close()
	if err != nil || string(buf) != "hello" {
		t.Errorf("mgmt TCP read %q, %v", buf, err)
	}
	// A process started by hand in a host namespace (not in the state) is
	// stopped by down too, or it would keep the namespace alive.
	stray := make(chan error, 1)
	go func() { stray <- Exec(context.Background(), dir, "h3", []string{"sleep", tag + "1"}, nil, out, out) }()
	for deadline := time.Now().Add(5 * time.Second); len(procsOf("sleep\x00"+tag+"1")) == 0 && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
	}
	if err := Down(dir, quietLog()); err != nil {
		t.Fatal(err)
	}
	for _, pr := range st.Processes {
		if pr.Alive() {
			t.Errorf("mrc-nicd %s survives down", pr.Name)
		}
	}
	select {
	case <-stray:
	case <-time.After(10 * time.Second):
		t.Error("a process started with exec survives down")
	}
}

// TestUpReplacesOtherPlan: up with a changed topology in the same run
// directory tears the old run down and builds the new one.
func TestUpReplacesOtherPlan(t *testing.T) {
	r := upRun(t, "clos-2p", topo.ModeSRv6, topo.DataplaneKernel)
	r.pr.Close()
	top, _ := topo.Preset("clos-2p")
	top.Mode, top.Dataplane = topo.ModeECMP, topo.DataplaneKernel
	p2, err := plan.Build(top, plan.Options{Prefix: r.p.Prefix, RunDir: r.dir})
	if err != nil {
		t.Fatal(err)
	}
	st, err := Up(context.Background(), p2, Options{Log: quietLog()})
	if err != nil {
		t.Fatal(err)
	}
	if st.PlanHash == r.st.PlanHash {
		t.Fatal("the changed plan has the old hash")
	}
	got, err := LoadPlan(r.dir)
	if err != nil || got.Mode != topo.ModeECMP {
		t.Fatalf("plan after replacing: %v %v", got.Mode, err)
	}
	if r.pr, err = probe.NewProber(p2); err != nil {
		t.Fatal(err)
	}
	paths, _ := probe.Paths(p2)
	meshCheck(t, r.pr, paths, none)
}
