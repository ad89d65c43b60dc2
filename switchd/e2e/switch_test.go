package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/softmrc/softmrc/switchd/config"
	"github.com/softmrc/softmrc/switchd/ctl"

	"github.com/softmrc/softmrc/internal/wire"
)

var (
	buildOnce sync.Once
	builtBin  string
	buildErr  error
	buildOut  []byte
)

// switchBinary returns $MRC_BIN/mrc-switchd when set, else builds it once.
func switchBinary(t *testing.T) string {
	t.Helper()
	if d := os.Getenv("MRC_BIN"); d != "" {
		p := filepath.Join(d, "mrc-switchd")
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("MRC_BIN=%s: %v (run make build)", d, err)
		}
		return p
	}
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "mrc-switchd-e2e-")
		if err != nil {
			buildErr = err
			return
		}
		builtBin = filepath.Join(dir, "mrc-switchd")
		// go test puts its own go on PATH.
		gobin, err := exec.LookPath("go")
		if err != nil {
			buildErr = fmt.Errorf("no go binary to build mrc-switchd with (%v): set MRC_BIN to a directory holding mrc-switchd", err)
			return
		}
		buildOut, buildErr = exec.Command(gobin, "build", "-o", builtBin, "github.com/softmrc/softmrc/cmd/mrc-switchd").CombinedOutput()
	})
	if buildErr != nil {
		t.Fatalf("go build mrc-switchd: %v\n%s", buildErr, buildOut)
	}
	return builtBin
}

func TestMain(m *testing.M) {
	code := m.Run()
	if builtBin != "" {
		os.RemoveAll(filepath.Dir(builtBin))
	}
	os.Exit(code)
}

// switchProc is one mrc-switchd process running in a namespace.
type switchProc struct {
	t       *testing.T
	bin     string
	ns      string
	cfgPath string
	cfg     *config.Config
	logPath string
	cmd     *exec.Cmd
	exited  chan struct{} // closed when cmd has been reaped
	waitErr error         // cmd.Wait's result, set before exited closes
}

func (tp *topo) newSwitch(bin, ns string, cfg *config.Config) *switchProc {
	t := tp.t
	dir := t.TempDir()
	cfg.PinDir = "/sys/fs/bpf/" + tp.pfx + "-" + cfg.Name
	cfg.Control = filepath.Join(dir, "ctl.sock")
	s := &switchProc{t: t, bin: bin, ns: ns, cfg: cfg, cfgPath: filepath.Join(dir, cfg.Name+".yaml"), logPath: filepath.Join(dir, "log")}
	if err := config.Write(s.cfgPath, cfg); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		s.kill()
		// Removing the pins frees maps and detaches links no process holds.
		os.RemoveAll(cfg.PinDir)
		if t.Failed() || testing.Verbose() {
			b, _ := os.ReadFile(s.logPath)
			t.Logf("log of %s:\n%s", cfg.Name, b)
		}
	})
	return s
}

// start launches the daemon and waits until it answers ready. nsenter only
// switches the network namespace; `ip netns exec` would also give the
// daemon a private /sys without bpffs, where pins cannot survive it.
func (s *switchProc) start() *ctl.Ready {
	s.t.Helper()
	logf, err := os.OpenFile(s.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		s.t.Fatal(err)
	}
	defer logf.Close()
	s.cmd = exec.Command("nsenter", "--net=/run/netns/"+s.ns, s.bin, "run", "-c", s.cfgPath, "--log-level", "debug")
	s.cmd.Stdout, s.cmd.Stderr = logf, logf
	if err := s.cmd.Start(); err != nil {
		s.t.Fatal(err)
	}
	exited := make(chan struct{})
	s.exited = exited
	go func(c *exec.Cmd) { s.waitErr = c.Wait(); close(exited) }(s.cmd)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	type res struct {
		r   *ctl.Ready
		err error
	}
	rc := make(chan res, 1)
	go func() { r, err := ctl.WaitReady(ctx, s.cfg.Control); rc <- res{r, err} }()
	select {
	case r := <-rc:
		if r.err != nil {
			s.t.Fatalf("%s not ready: %v", s.cfg.Name, r.err)
		}
		// nsenter execs the daemon: the PID must be the one we started.
		if r.r.PID != s.cmd.Process.Pid {
			s.t.Fatalf("%s answers with pid %d, started %d: another daemon owns the socket", s.cfg.Name, r.r.PID, s.cmd.Process.Pid)
		}
		return r.r
	case <-s.exited:
		b, _ := os.ReadFile(s.logPath)
		s.t.Fatalf("%s exited during start: %v\n%s", s.cfg.Name, s.waitErr, b)
	}
	return nil
}

// kill sends SIGKILL (no chance to clean up) and reaps the process.
func (s *switchProc) kill() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	select {
	case <-s.exited:
		return
	default:
	}
	s.cmd.Process.Signal(syscall.SIGKILL)
	<-s.exited
}

func (s *switchProc) waitExit(timeout time.Duration) error {
	select {
	case <-s.exited:
		return s.waitErr
	case <-time.After(timeout):
		s.t.Fatalf("%s did not exit within %v", s.cfg.Name, timeout)
	}
	return nil
}

func (s *switchProc) client() (*ctl.Client, context.Context) {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	s.t.Cleanup(cancel)
	c, err := ctl.Dial(ctx, s.cfg.Control)
	if err != nil {
		s.t.Fatal(err)
	}
	s.t.Cleanup(func() { c.Close() })
	return c, ctx
}

func (s *switchProc) stats() *ctl.Stats {
	s.t.Helper()
	c, ctx := s.client()
	st, err := c.Stats(ctx)
	if err != nil {
		s.t.Fatalf("stats of %s: %v", s.cfg.Name, err)
	}
	return st
}

// cli runs an mrc-switchd control subcommand against this switch.
func (s *switchProc) cli(args ...string) (string, error) {
	a := append([]string{args[0], "--ctl", s.cfg.Control}, args[1:]...)
	out, err := exec.Command(s.bin, a...).CombinedOutput()
	return string(out), err
}

// fabric is the test network:
//
//	S [s0] --- [a0 h0] T0 [a1 up0] --- [b0 d0] T1
//	                      [a2 h1] --- [r0] R
//
// T0 owns uSID 0x4000, T1 0x0100; the receiver's downlink uSID is 0xc100.
type fabric struct {
	tp                 *topo
	S, T0ns, T1ns, R   string
	s0, r0, a0, a2     string
	a3, a3p            string
	macS0, macA0       net.HardwareAddr
	macA2, macR0       net.HardwareAddr
	macA3, macA3p      net.HardwareAddr
	T0, T1             *switchProc
	tx                 *packetSock
	cap                *capture
	magic              [8]byte
	outerSrc, innerSrc netip.Addr
	innerDst           netip.Addr
}

var block = netip.MustParsePrefix("5f00:1::/32")

func newFabric(t *testing.T) *fabric {
	requirements(t)
	bin := switchBinary(t)
	tp := newTopo(t)
	f := &fabric{tp: tp}
	f.S, f.T0ns, f.T1ns, f.R = tp.ns("s"), tp.ns("t0"), tp.ns("t1"), tp.ns("r")
	var a1, b0 string
	f.s0, f.a0 = tp.veth(f.S, "s0", f.T0ns, "a0")
	a1, b0 = tp.veth(f.T0ns, "a1", f.T1ns, "b0")
	f.a2, f.r0 = tp.veth(f.T0ns, "a2", f.R, "r0")
	// Both ends in T0's namespace: mrc-switchd must put XDP_PASS on a3p
	// itself, or frames redirected into a3 are lost silently.
	f.a3, f.a3p = tp.veth(f.T0ns, "a3", f.T0ns, "a3p")
	// The receiver runs no XDP program: without GRO its veth would drop
	// frames redirected into it (SRV6-XDP-FACTS §3).
	run(t, "ip", "netns", "exec", f.R, "ethtool", "-K", f.r0, "gro", "on")
	f.macS0, f.macA0 = mac(t, f.S, f.s0), mac(t, f.T0ns, f.a0)
	f.macA2, f.macR0 = mac(t, f.T0ns, f.a2), mac(t, f.R, f.r0)
	macA1, macB0 := mac(t, f.T0ns, a1), mac(t, f.T1ns, b0)
	f.macA3, f.macA3p = mac(t, f.T0ns, f.a3), mac(t, f.T0ns, f.a3p)

	t0 := &config.Config{
		Name: "t0", Block: block, USIDs: []wire.USID{0x4000}, Mode: config.ModeSRv6,
		Ports: []config.Port{
			{Name: "h0", Interface: f.a0, NeighbourMAC: wire.MAC(f.macS0), Role: config.RoleHost},
			{Name: "up0", Interface: a1, NeighbourMAC: wire.MAC(macB0), Role: config.RoleFabric},
			{Name: "h1", Interface: f.a2, NeighbourMAC: wire.MAC(f.macR0), Role: config.RoleHost},
			{Name: "h2", Interface: f.a3, NeighbourMAC: wire.MAC(f.macA3p), Role: config.RoleHost},
		},
		FIB: []config.Route{
			{Prefix: netip.MustParsePrefix("5f00:1:100::/48"), Port: "up0"},
			{Prefix: netip.MustParsePrefix("5f00:1:c000::/48"), Port: "h0"},
			{Prefix: netip.MustParsePrefix("5f00:1:c100::/48"), Port: "h1"},
			{Prefix: netip.MustParsePrefix("5f00:1:c200::/48"), Port: "h2"},
		},
	}
	t1 := &config.Config{
		Name: "t1", Block: block, USIDs: []wire.USID{0x0100}, Mode: config.ModeSRv6,
		Ports: []config.Port{{Name: "d0", Interface: b0, NeighbourMAC: wire.MAC(macA1), Role: config.RoleFabric}},
		FIB:   []config.Route{{Prefix: netip.MustParsePrefix("5f00:1:4000::/48"), Port: "d0"}},
	}
	f.T0 = tp.newSwitch(bin, f.T0ns, t0)
	f.T1 = tp.newSwitch(bin, f.T1ns, t1)
	f.T0.start()
	f.T1.start()

	rand.Read(f.magic[:])
	f.outerSrc = netip.MustParseAddr("fd00:99:0::1")
	f.innerSrc = netip.MustParseAddr("fd00:99:0::1")
	f.innerDst = netip.MustParseAddr("fd00:99:0::2")
	f.tx = openPacket(t, f.S, f.s0)
	f.cap = startCapture(t, openPacket(t, f.R, f.r0), f.magic)
	return f
}

// frame is a test frame from S into T0 with outer destination da.
func (f *fabric) frame(da netip.Addr, hl uint8, seq uint32) []byte {
	return buildFrame(frameSpec{
		dst: f.macA0, src: f.macS0,
		outerSrc: f.outerSrc, outerDst: da, innerSrc: f.innerSrc, innerDst: f.innerDst,
		hopLimit: hl, flowLabel: 0x2a5a5, sport: 0xa5a5, magic: f.magic, seq: seq,
	})
}

// path [T0, T1, T0, downlink 0xc100]
var pathDA = netip.MustParseAddr("5f00:1:4000:100:4000:c100::")

func (f *fabric) send(t *testing.T, frame []byte) {
	t.Helper()
	if err := f.tx.send(frame); err != nil {
		t.Fatalf("send: %v", err)
	}
}

func sumDrops(st *ctl.Stats) uint64 {
	n := st.Unmapped.Drops.Total()
	for _, p := range st.Ports {
		n += p.Counters.Drops.Total()
	}
	return n
}

func TestForwardThroughTwoSwitches(t *testing.T) {
	f := newFabric(t)

	t.Run("path", func(t *testing.T) {
		const seq = 1
		f.send(t, f.frame(pathDA, 64, seq))
		if !waitFor(5*time.Second, func() bool { return f.cap.frame(seq) != nil }) {
			t.Fatalf("frame to %s never reached the receiver; T0 %+v T1 %+v", pathDA, f.T0.stats().Ports, f.T1.stats().Ports)
		}
		got := f.cap.frame(seq)
		// Golden: the sent frame with new MACs, three uSIDs shifted out of
		// the outer destination and the hop limit down by three; nothing
		// else changes.
		want := buildFrame(frameSpec{
			dst: f.macR0, src: f.macA2,
			outerSrc: f.outerSrc, outerDst: netip.MustParseAddr("5f00:1:c100::"), innerSrc: f.innerSrc, innerDst: f.innerDst,
			hopLimit: 61, flowLabel: 0x2a5a5, sport: 0xa5a5, magic: f.magic, seq: seq,
		})
		if !bytes.Equal(got, want) {
			t.Errorf("received frame differs from golden\n got %x\nwant %x", got, want)
		}
		st0, st1 := f.T0.stats(), f.T1.stats()
		if c := st0.Ports[0].Counters; c.RxPackets < 1 {
			t.Errorf("T0 h0 rx %d", c.RxPackets)
		}
		if c := st0.Ports[2].Counters; c.Forwarded != 1 || c.TxPackets != 1 {
			t.Errorf("T0 h1: forwarded %d tx %d, want 1", c.Forwarded, c.TxPackets)
		}
		if c := st1.Ports[0].Counters; c.Forwarded != 1 {
			t.Errorf("T1 d0: forwarded %d, want 1", c.Forwarded)
		}
		if n := sumDrops(st0) + sumDrops(st1); n != 0 {
			t.Errorf("drops: %d", n)
		}
	})

	t.Run("pass program on a local veth peer", func(t *testing.T) {
		if out := run(t, "ip", "-n", f.T0ns, "link", "show", f.a3p); !strings.Contains(out, "xdp") {
			t.Fatalf("no XDP program on %s, the veth peer of port h2 in T0's namespace:\n%s", f.a3p, out)
		}
		local := startCapture(t, openPacket(t, f.T0ns, f.a3p), f.magic)
		const seq = 50
		f.send(t, f.frame(netip.MustParseAddr("5f00:1:4000:c200::"), 64, seq))
		if !waitFor(5*time.Second, func() bool { return local.frame(seq) != nil }) {
			t.Fatalf("frame redirected into %s never reached %s: %+v", f.a3, f.a3p, f.T0.stats().Ports[3])
		}
		want := buildFrame(frameSpec{
			dst: f.macA3p, src: f.macA3,
			outerSrc: f.outerSrc, outerDst: netip.MustParseAddr("5f00:1:c200::"), innerSrc: f.innerSrc, innerDst: f.innerDst,
			hopLimit: 63, flowLabel: 0x2a5a5, sport: 0xa5a5, magic: f.magic, seq: seq,
		})
		if got := local.frame(seq); !bytes.Equal(got, want) {
			t.Errorf("frame at %s\n got %x\nwant %x", f.a3p, got, want)
		}
	})

	t.Run("cli", func(t *testing.T) {
		out, err := f.T0.cli("routes")
		if err != nil {
			t.Fatalf("routes: %v\n%s", err, out)
		}
		for _, want := range []string{`5f00:1:100::/48\s+port up0\n`, `5f00:1:c100::/48\s+port h1\n`} {
			if !regexp.MustCompile(want).MatchString(out) {
				t.Errorf("routes output lacks %q:\n%s", want, out)
			}
		}
		out, err = f.T1.cli("stats", "--json")
		if err != nil {
			t.Fatalf("stats: %v\n%s", err, out)
		}
		var st ctl.Stats
		if err := json.Unmarshal([]byte(out), &st); err != nil {
			t.Fatalf("stats --json: %v\n%s", err, out)
		}
		if st.Switch != "t1" || len(st.Ports) != 1 || st.Ports[0].Counters.Forwarded < 1 {
			t.Errorf("stats --json: %+v", st)
		}
		out, err = f.T0.cli("stats")
		if err != nil || !strings.Contains(out, "switch t0 mode srv6 forwarding") || !strings.Contains(out, "NO_ROUTE") {
			t.Errorf("stats: %v\n%s", err, out)
		}
		out, err = f.T0.cli("fault", "nope", "down")
		if err == nil || !strings.Contains(out, `no port named "nope"`) {
			t.Errorf("fault on unknown port: %v\n%s", err, out)
		}
	})

	t.Run("fault blackhole", func(t *testing.T) {
		if out, err := f.T1.cli("fault", "d0", "blackhole"); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		before := f.T1.stats().Ports[0].Counters.Drops.Fault
		f.send(t, f.frame(pathDA, 64, 2))
		if !waitFor(5*time.Second, func() bool { return f.T1.stats().Ports[0].Counters.Drops.Fault > before }) {
			t.Fatal("blackholed frame not counted as a fault drop on T1 d0")
		}
		if f.cap.frame(2) != nil {
			t.Error("blackholed frame arrived")
		}
		if out, err := f.T1.cli("fault", "d0", "clear"); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		f.send(t, f.frame(pathDA, 64, 3))
		if !waitFor(5*time.Second, func() bool { return f.cap.frame(3) != nil }) {
			t.Fatal("frame after clear never arrived")
		}
	})

	t.Run("fault hang", func(t *testing.T) {
		if out, err := f.T0.cli("fault", "switch", "hang"); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		st := f.T0.stats() // the daemon still answers
		if !st.Hang {
			t.Error("stats does not show the hang")
		}
		f.send(t, f.frame(pathDA, 64, 4))
		if !waitFor(5*time.Second, func() bool { return f.T0.stats().Ports[0].Counters.Drops.Fault > st.Ports[0].Counters.Drops.Fault }) {
			t.Fatal("frame into a hung switch not counted as a fault drop")
		}
		if out, err := f.T0.cli("fault", "switch", "clear"); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		f.send(t, f.frame(pathDA, 64, 5))
		if !waitFor(5*time.Second, func() bool { return f.cap.frame(5) != nil }) {
			t.Fatal("frame after unhang never arrived")
		}
		if f.cap.frame(4) != nil {
			t.Error("frame sent into the hung switch arrived")
		}
	})

	t.Run("fault down", func(t *testing.T) {
		if out, err := f.T0.cli("fault", "h1", "down"); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		// The neighbour sees the carrier go.
		if out := run(t, "ip", "-n", f.R, "link", "show", f.r0); !strings.Contains(out, "NO-CARRIER") {
			t.Errorf("receiver still has carrier after 'fault h1 down':\n%s", out)
		}
		before := f.T0.stats().Ports[2].Counters.Drops.Fault
		f.send(t, f.frame(pathDA, 64, 8))
		if !waitFor(5*time.Second, func() bool { return f.T0.stats().Ports[2].Counters.Drops.Fault > before }) {
			t.Fatalf("frame to a down port not counted as a fault drop: %+v", f.T0.stats().Ports[2])
		}
		if out, err := f.T0.cli("fault", "h1", "up"); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		// The link comes back: poll with fresh frames until one arrives.
		seq := uint32(100)
		if !waitFor(10*time.Second, func() bool {
			seq++
			f.send(t, f.frame(pathDA, 64, seq))
			return waitFor(200*time.Millisecond, func() bool { return f.cap.frame(seq) != nil })
		}) {
			t.Fatal("no frame arrives after 'fault h1 up'")
		}
		if f.cap.frame(8) != nil {
			t.Error("frame sent to the down port arrived")
		}
		if st := f.T0.stats(); st.Ports[2].Attach == "" {
			t.Errorf("stats shows no XDP attach mode on h1: %+v", st.Ports[2])
		}
	})

	t.Run("no route", func(t *testing.T) {
		before := f.T0.stats().Ports[0].Counters.Drops.NoRoute
		f.send(t, f.frame(netip.MustParseAddr("5f00:1:4000:dead::"), 64, 6))
		if !waitFor(5*time.Second, func() bool { return f.T0.stats().Ports[0].Counters.Drops.NoRoute == before+1 }) {
			t.Fatalf("FIB miss not counted: %+v", f.T0.stats().Ports[0].Counters)
		}
	})

	t.Run("sigterm keeps forwarding", func(t *testing.T) {
		f.T0.cmd.Process.Signal(syscall.SIGTERM)
		if err := f.T0.waitExit(10 * time.Second); err != nil {
			t.Fatalf("exit status after SIGTERM: %v", err)
		}
		f.send(t, f.frame(pathDA, 64, 7))
		if !waitFor(5*time.Second, func() bool { return f.cap.frame(7) != nil }) {
			t.Fatal("no forwarding while T0's daemon is stopped: the pinned links are gone")
		}
		if r := f.T0.start(); !r.Adopted {
			t.Error("restarted T0 did not adopt its pins")
		}
	})

	t.Run("detach", func(t *testing.T) {
		out, err := f.T1.cli("detach")
		if err != nil {
			t.Fatalf("detach: %v\n%s", err, out)
		}
		if err := f.T1.waitExit(10 * time.Second); err != nil {
			t.Errorf("daemon exit after detach: %v", err)
		}
		if _, err := os.Stat(f.T1.cfg.PinDir); !os.IsNotExist(err) {
			t.Errorf("pins left in %s after detach: %v", f.T1.cfg.PinDir, err)
		}
		out = run(t, "ip", "-n", f.T1ns, "link", "show")
		if strings.Contains(out, "xdp") {
			t.Errorf("XDP still attached in T1 after detach:\n%s", out)
		}
	})
}

// TestRestartNoLoss kills T0's daemon with SIGKILL while traffic flows and
// starts a new one: the pinned program keeps forwarding, the new daemon
// adopts it, and nothing is lost.
func TestRestartNoLoss(t *testing.T) {
	f := newFabric(t)
	progBefore := xdpProgID(t, f.T0ns, f.a0)
	routesBefore, err := f.T0.cli("routes", "--json")
	if err != nil {
		t.Fatalf("routes: %v\n%s", err, routesBefore)
	}

	// Paced, bounded sender: until stopped, at most maxFrames or 30 s.
	const maxFrames = 20000
	stop := make(chan struct{})
	var sent uint32
	var sendErr error
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		deadline := time.Now().Add(30 * time.Second)
		for seq := uint32(0); seq < maxFrames && time.Now().Before(deadline); {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			for range 2 {
				if err := f.tx.send(f.frame(pathDA, 64, seq)); err != nil {
					sendErr = err
					return
				}
				seq++
				sent = seq
			}
		}
	}()
	stopSender := func() uint32 {
		select {
		case <-stop:
		default:
			close(stop)
		}
		<-done
		return sent
	}
	t.Cleanup(func() { stopSender() })

	if !waitFor(10*time.Second, func() bool { return f.cap.count() >= 200 }) {
		t.Fatalf("traffic not flowing: %d frames arrived", f.cap.count())
	}
	f.T0.kill()
	atKill := f.cap.count()
	r := f.T0.start()
	if !r.Adopted {
		t.Error("restarted daemon did not adopt the pins")
	}
	atReady := f.cap.count()
	if !waitFor(10*time.Second, func() bool { return f.cap.count() >= atReady+200 }) {
		t.Fatalf("traffic stopped after the restart: %d frames", f.cap.count())
	}
	n := stopSender()
	if sendErr != nil {
		t.Fatalf("send: %v", sendErr)
	}
	if !waitFor(5*time.Second, func() bool { return f.cap.count() >= int(n) }) {
		var missing []uint32
		for s := uint32(0); s < n && len(missing) < 20; s++ {
			if f.cap.frame(s) == nil {
				missing = append(missing, s)
			}
		}
		t.Errorf("%d of %d frames arrived; first missing %v", f.cap.count(), n, missing)
	}
	t.Logf("sent %d frames; %d had arrived at the kill, %d when the new daemon was ready", n, atKill, atReady)
	if d := f.cap.duplicates(); d != 0 {
		t.Errorf("%d duplicate frames", d)
	}
	st0 := f.T0.stats()
	if d := sumDrops(st0); d != 0 {
		t.Errorf("T0 dropped %d frames: %+v", d, st0.Ports)
	}
	// The counters live in pinned maps: they span both daemons.
	if fw := st0.Ports[2].Counters.Forwarded; fw != uint64(n) {
		t.Errorf("T0 h1 forwarded %d, want %d (counters lost across the restart?)", fw, n)
	}
	if d := sumDrops(f.T1.stats()); d != 0 {
		t.Errorf("T1 dropped %d frames", d)
	}
	routesAfter, err := f.T0.cli("routes", "--json")
	if err != nil || routesAfter != routesBefore {
		t.Errorf("routes changed across the restart (%v):\nbefore %s\nafter  %s", err, routesBefore, routesAfter)
	}
	// The same pinned link now runs the new daemon's program.
	if progAfter := xdpProgID(t, f.T0ns, f.a0); progAfter == progBefore {
		t.Errorf("XDP program id on %s still %s after the restart: the new program was not swapped in", f.a0, progAfter)
	}

	// detach -c FILE with no daemon running removes what the killed one
	// left pinned.
	f.T0.kill()
	out, err := exec.Command(f.T0.bin, "detach", "-c", f.T0.cfgPath).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "removed the pinned switch") {
		t.Fatalf("offline detach: %v\n%s", err, out)
	}
	if _, err := os.Stat(f.T0.cfg.PinDir); !os.IsNotExist(err) {
		t.Errorf("pins left in %s: %v", f.T0.cfg.PinDir, err)
	}
	if out := run(t, "ip", "-n", f.T0ns, "link", "show"); strings.Contains(out, "xdp") {
		t.Errorf("XDP still attached in T0 after offline detach:\n%s", out)
	}
}

var progIDRE = regexp.MustCompile(`prog/xdp id (\d+)`)

// xdpProgID is the id of the XDP program on dev, from ip -d link.
func xdpProgID(t *testing.T, ns, dev string) string {
	t.Helper()
	out := run(t, "ip", "-d", "-n", ns, "link", "show", dev)
	m := progIDRE.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no XDP program on %s in %s:\n%s", dev, ns, out)
	}
	return m[1]
}

// TestRestartAfterNamespaceRebuilt: the daemon is killed, its namespace and
// veths are deleted and made again under the same names (a crashed testbed
// run), and the pins are still there. The new daemon must not trust the dead
// links: it starts over and forwards.
func TestRestartAfterNamespaceRebuilt(t *testing.T) {
	requirements(t)
	bin := switchBinary(t)
	tp := newTopo(t)
	x, y := tp.ns("x"), tp.ns("y")
	x0, y0 := tp.veth(x, "x0", y, "y0")
	cfg := &config.Config{
		Name: "x", Block: block, USIDs: []wire.USID{0x4000},
		Ports: []config.Port{{Name: "p0", Interface: x0, NeighbourMAC: wire.MAC(mac(t, y, y0)), Role: config.RoleHost}},
		FIB:   []config.Route{{Prefix: netip.MustParsePrefix("5f00:1:c000::/48"), Port: "p0"}},
	}
	sw := tp.newSwitch(bin, x, cfg)
	sw.start()
	sw.kill()

	run(t, "ip", "netns", "del", x)
	// The kernel tears the namespace's devices down asynchronously; the
	// veth pair is gone once its far end leaves y.
	if !waitFor(10*time.Second, func() bool { return exec.Command("ip", "-n", y, "link", "show", y0).Run() != nil }) {
		t.Fatalf("%s still exists 10 s after deleting namespace %s", y0, x)
	}
	run(t, "ip", "netns", "add", x)
	run(t, "ip", "link", "add", x0, "netns", x, "type", "veth", "peer", "name", y0, "netns", y)
	run(t, "ip", "-n", x, "link", "set", x0, "up")
	run(t, "ip", "-n", y, "link", "set", y0, "up")
	run(t, "ip", "netns", "exec", y, "ethtool", "-K", y0, "gro", "on")
	sw.cfg.Ports[0].NeighbourMAC = wire.MAC(mac(t, y, y0))
	if err := config.Write(sw.cfgPath, sw.cfg); err != nil {
		t.Fatal(err)
	}
	sw.start()
	xdpProgID(t, x, x0)

	var magic [8]byte
	rand.Read(magic[:])
	tx := openPacket(t, y, y0)
	cp := startCapture(t, openPacket(t, y, y0), magic)
	src, dst := netip.MustParseAddr("fd00:99::1"), netip.MustParseAddr("fd00:99::2")
	// Hairpin: in on p0, shifted, out on p0 again.
	frame := buildFrame(frameSpec{dst: mac(t, x, x0), src: mac(t, y, y0), outerSrc: src, outerDst: netip.MustParseAddr("5f00:1:4000:c000::"),
		innerSrc: src, innerDst: dst, hopLimit: 9, magic: magic, seq: 1})
	if err := tx.send(frame); err != nil {
		t.Fatal(err)
	}
	if !waitFor(5*time.Second, func() bool { return cp.frame(1) != nil }) {
		t.Fatalf("no forwarding after the rebuilt namespace: %+v", sw.stats().Ports)
	}
	if got := cp.frame(1); got[offOuter+7] != 8 || netip.AddrFrom16([16]byte(got[offOuter+24:offOuter+40])) != netip.MustParseAddr("5f00:1:c000::") {
		t.Errorf("hairpinned frame: hop limit %d, DA %v", got[offOuter+7], netip.AddrFrom16([16]byte(got[offOuter+24:offOuter+40])))
	}
}
