package daemon_test

import (
	"bytes"
	"encoding/json"
	"net"
	"runtime"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/softmrc/softmrc/nic/config"
	"github.com/softmrc/softmrc/nic/daemon"
	"github.com/softmrc/softmrc/nic/daemon/daemontest"
	"github.com/softmrc/softmrc/nic/shmring"
	"github.com/softmrc/softmrc/nic/verbs"
	"github.com/softmrc/softmrc/nic/vproto"
	"github.com/softmrc/softmrc/nic/xsk"
)

func openWith(t *testing.T, sock string, size int, o verbs.Options) *side {
	t.Helper()
	d, err := verbs.OpenWith(sock, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	qp, err := d.CreateQP(verbs.QPConfig{})
	if err != nil {
		t.Fatal(err)
	}
	mr, err := d.RegMR(size, verbs.AccessLocalWrite|verbs.AccessRemoteWrite)
	if err != nil {
		t.Fatal(err)
	}
	return &side{dev: d, qp: qp, mr: mr}
}

func daemonCounters(t *testing.T, d *verbs.Device) map[string]uint64 {
	t.Helper()
	var c vproto.Counters
	if err := d.Ctl(vproto.CtlRequest{Cmd: vproto.CtlCounters}, &c); err != nil {
		t.Fatal(err)
	}
	return c.Daemon
}

// pingPong runs n write-with-immediate round trips a → b → a and checks
// every byte of every ping and pong.
func pingPong(t *testing.T, a, b *side, n int) {
	t.Helper()
	const size = 100
	for i := 0; i < n; i++ {
		fill(a.mr.Buf[:size], uint32(i))
		if err := a.qp.PostSend(verbs.WriteImm(uint64(i), a.mr, 0, size, b.mr.Addr+size, b.mr.RKey, uint32(i))); err != nil {
			t.Fatal(err)
		}
		if c := waitCQE(t, a.dev); c.Status != verbs.StatusSuccess || c.ID != uint64(i) {
			t.Fatalf("ping %d: sender completion %+v", i, c)
		}
		if c := waitCQE(t, b.dev); c.Op != verbs.CQRecvImm || c.Imm != uint32(i) {
			t.Fatalf("ping %d: receiver completion %+v", i, c)
		}
		if !bytes.Equal(b.mr.Buf[size:2*size], a.mr.Buf[:size]) {
			t.Fatalf("ping %d: bytes differ", i)
		}
		fill(b.mr.Buf[:size], uint32(i)+1000)
		if err := b.qp.PostSend(verbs.WriteImm(uint64(i), b.mr, 0, size, a.mr.Addr+size, a.mr.RKey, uint32(i))); err != nil {
			t.Fatal(err)
		}
		if c := waitCQE(t, b.dev); c.Status != verbs.StatusSuccess {
			t.Fatalf("pong %d: sender completion %+v", i, c)
		}
		if c := waitCQE(t, a.dev); c.Op != verbs.CQRecvImm || c.Imm != uint32(i) {
			t.Fatalf("pong %d: receiver completion %+v", i, c)
		}
		if !bytes.Equal(a.mr.Buf[size:2*size], b.mr.Buf[:size]) {
			t.Fatalf("pong %d: bytes differ", i)
		}
	}
}

// TestRingAndSocketSessions: a client on the shared-memory rings and a
// client that stays on the socket (as one built before the rings does)
// talk to each other through the same daemons, in every combination.
func TestRingAndSocketSessions(t *testing.T) {
	p := daemontest.Start(t, 2)
	for _, tc := range []struct {
		name         string
		aRing, bRing bool
	}{
		{"ring to ring", true, true},
		{"ring to socket", true, false},
		{"socket to ring", false, true},
		{"socket to socket", false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := openWith(t, p.Sock[0], 1<<16, verbs.Options{NoRing: !tc.aRing})
			b := openWith(t, p.Sock[1], 1<<16, verbs.Options{NoRing: !tc.bRing, Spin: 20 * time.Microsecond})
			if a.dev.Ring() != tc.aRing || b.dev.Ring() != tc.bRing {
				t.Fatalf("rings in use: a %v b %v, want %v %v", a.dev.Ring(), b.dev.Ring(), tc.aRing, tc.bRing)
			}
			connect(t, a, b)
			before := daemonCounters(t, a.dev)["ring_posts"]
			pingPong(t, a, b, 20)
			got := daemonCounters(t, a.dev)["ring_posts"] - before
			if want := uint64(0); tc.aRing {
				if got < 20 {
					t.Fatalf("daemon 1 took %d work requests from rings, want >= 20 (the pings)", got)
				}
			} else if got != want {
				t.Fatalf("daemon 1 took %d work requests from rings for a socket client", got)
			}
		})
	}
}

// TestRingBadWRFails: the daemon checks what it reads from the ring like
// any post: a bad opcode and another session's QP complete with errors.
func TestRingBadWRFails(t *testing.T) {
	p := daemontest.Start(t, 1)
	a := openWith(t, p.Sock[0], 4096, verbs.Options{})
	other := openWith(t, p.Sock[0], 4096, verbs.Options{})
	if !a.dev.Ring() {
		t.Fatal("no ring")
	}
	for _, tc := range []struct {
		name string
		wr   vproto.WR
		want verbs.Status
	}{
		{"unsupported opcode", vproto.WR{QPN: a.qp.QPN, Op: vproto.OpRead, Len: 16}, verbs.StatusLocQPOpErr},
		{"another session's QP", vproto.WR{QPN: other.qp.QPN, Op: vproto.OpWrite, Len: 16}, verbs.StatusLocQPOpErr},
		{"QP not connected", vproto.WR{QPN: a.qp.QPN, Op: vproto.OpWrite, Len: 16, LKey: a.mr.LKey, LocalAddr: a.mr.Addr}, verbs.StatusLocQPOpErr},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := tc.wr
			w.ID = 42
			w.Flags = vproto.FlagSignaled
			if err := a.dev.PostRaw([]vproto.WR{w}); err != nil {
				t.Fatal(err)
			}
			if c := waitCQE(t, a.dev); c.ID != 42 || c.Status != tc.want {
				t.Fatalf("completion %+v (%v), want %v", c, c.Status, tc.want)
			}
		})
	}
}

// TestRingCQOverflow: with a 16-entry CQ and 40 completions unread, the
// daemon moves the session to socket delivery and the application still
// reads all 40, in order.
func TestRingCQOverflow(t *testing.T) {
	p := daemontest.Start(t, 1)
	lay := shmring.Layout{SQEntries: 16, CQEntries: 16}
	a := openWith(t, p.Sock[0], 1<<16, verbs.Options{Layout: lay})
	b := openWith(t, p.Sock[1], 1<<16, verbs.Options{Layout: lay})
	connect(t, a, b)
	const n = 40
	for i := 0; i < n; i++ { // 40 posts through a 16-slot SQ: waits for room
		if err := a.qp.PostSend(verbs.Write(uint64(i), a.mr, 0, 64, b.mr.Addr, b.mr.RKey)); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for daemonCounters(t, a.dev)["cqes"] < n {
		if time.Now().After(deadline) {
			t.Fatal("the daemon did not complete 40 writes in 10 s")
		}
		time.Sleep(time.Millisecond) // waiting on another process's counter
	}
	for i := 0; i < n; i++ {
		if c := waitCQE(t, a.dev); c.ID != uint64(i) || c.Status != verbs.StatusSuccess {
			t.Fatalf("completion %d: %+v", i, c)
		}
	}
	if o := daemonCounters(t, a.dev)["ring_cq_overflows"]; o != 1 {
		t.Fatalf("ring_cq_overflows %d, want 1", o)
	}
}

// TestCorruptRingFailsThatSessionOnly: a client that moves its SQ tail
// beyond the ring is closed with an error naming the ring; another
// session of the same daemon goes on working.
func TestCorruptRingFailsThatSessionOnly(t *testing.T) {
	p := daemontest.Start(t, 1)
	good := openWith(t, p.Sock[0], 4096, verbs.Options{})
	peer := openWith(t, p.Sock[1], 4096, verbs.Options{})
	connect(t, good, peer)

	c, err := net.Dial("unixpacket", p.Sock[0])
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	uc := c.(*net.UnixConn)
	send := func(typ vproto.Type, v any, fds ...int) vproto.Reply {
		t.Helper()
		msg, err := vproto.AppendJSON(nil, typ, 1, v)
		if err != nil {
			t.Fatal(err)
		}
		var oob []byte
		if len(fds) > 0 {
			oob = unix.UnixRights(fds...)
		}
		if _, _, err := uc.WriteMsgUnix(msg, oob, nil); err != nil {
			t.Fatal(err)
		}
		return readMsg(t, uc, vproto.TypeReply)
	}
	if r := send(vproto.TypeHello, vproto.Hello{Version: vproto.Version, Client: "corrupt"}); r.Error != "" {
		t.Fatal(r.Error)
	}
	lay := shmring.Layout{SQEntries: 16, CQEntries: 16}
	fd, err := unix.MemfdCreate("ring", unix.MFD_ALLOW_SEALING|unix.MFD_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	if err := unix.Ftruncate(fd, int64(lay.Size())); err != nil {
		t.Fatal(err)
	}
	bell, err := unix.Eventfd(0, unix.EFD_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(bell)
	// Unsealed first: refused with a reason.
	if r := send(vproto.TypeRing, vproto.Ring{Size: lay.Size()}, fd, bell); !strings.Contains(r.Error, "not sealed") {
		t.Fatalf("unsealed ring: reply %q, want a refusal naming the seal", r.Error)
	}
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, unix.F_SEAL_SHRINK); err != nil {
		t.Fatal(err)
	}
	mem, err := unix.Mmap(fd, 0, lay.Size(), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(mem)
	if _, err := shmring.Init(mem, lay); err != nil {
		t.Fatal(err)
	}
	if r := send(vproto.TypeRing, vproto.Ring{Size: lay.Size()}, fd, bell); r.Error != "" {
		t.Fatalf("ring refused: %s", r.Error)
	}
	// The SQ tail 1000 slots ahead of a 16-slot ring, then the doorbell.
	tailOff := 64
	mem[tailOff], mem[tailOff+1] = 0xe8, 0x03
	one := [8]byte{1}
	unix.Write(bell, one[:])
	var fatal vproto.Reply
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	fatal = readMsg(t, uc, vproto.TypeFatal)
	if !strings.Contains(fatal.Error, "ring") || !strings.Contains(fatal.Error, "SQ tail") {
		t.Fatalf("fatal message %q does not say the ring's SQ tail was bad", fatal.Error)
	}
	if mem[448]&shmring.FlagFailed == 0 {
		t.Error("the ring's failed flag is not set")
	}
	if f := daemonCounters(t, good.dev)["ring_failures"]; f != 1 {
		t.Errorf("ring_failures %d, want 1", f)
	}
	pingPong(t, good, peer, 3)
}

// readMsg reads messages until one of type want and decodes its body.
func readMsg(t *testing.T, c *net.UnixConn, want vproto.Type) vproto.Reply {
	t.Helper()
	buf := make([]byte, vproto.MaxMessage)
	for {
		n, err := c.Read(buf)
		if err != nil {
			t.Fatalf("reading a %s message: %v", want, err)
		}
		h, err := vproto.ParseHeader(buf[:n])
		if err != nil {
			t.Fatal(err)
		}
		if h.Type != want {
			continue
		}
		var r vproto.Reply
		if err := json.Unmarshal(buf[vproto.HeaderLen:n], &r); err != nil {
			t.Fatal(err)
		}
		return r
	}
}

// TestDoorbellOnlyWhenAsleep: a daemon that sleeps between messages
// needs the doorbell; one that busy-polls across the whole exchange takes
// the posts from the ring without it.
func TestDoorbellOnlyWhenAsleep(t *testing.T) {
	for _, tc := range []struct {
		name    string
		busy    time.Duration
		maxRate float64 // doorbells per post
		minRate float64
	}{
		{"daemon sleeps", 0, 1, 0.2},
		{"daemon busy-polls", time.Second, 0.1, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// busy_poll_always: on a loaded test machine the spin gate
			// could stop the spinning this case is about.
			p := daemontest.StartWith(t, 1, func(_ int, c *config.Config) { c.BusyPoll, c.BusyPollAlways = &tc.busy, true })
			a := openWith(t, p.Sock[0], 4096, verbs.Options{})
			b := openWith(t, p.Sock[1], 4096, verbs.Options{})
			connect(t, a, b)
			pingPong(t, a, b, 1) // warm up: the first post may find the loop asleep
			before := a.dev.RingStats().Doorbells
			const n = 50
			for i := 0; i < n; i++ {
				// A pause, so that a sleeping daemon is asleep at each post.
				time.Sleep(200 * time.Microsecond)
				if err := a.qp.PostSend(verbs.Write(uint64(i), a.mr, 0, 8, b.mr.Addr, b.mr.RKey)); err != nil {
					t.Fatal(err)
				}
				waitCQE(t, a.dev)
			}
			rate := float64(a.dev.RingStats().Doorbells-before) / n
			t.Logf("%s: %.2f doorbells per post", tc.name, rate)
			if rate > tc.maxRate || rate < tc.minRate {
				t.Fatalf("%.2f doorbells per post, want %.2f..%.2f", rate, tc.minRate, tc.maxRate)
			}
		})
	}
}

// BenchmarkPostPoll is one signaled 8-byte write posted and its completion
// taken, through the rings and through the socket, between two in-process
// daemons (pipe ports): allocs/op counts both daemons and the application,
// and must not grow with the ring path.
func BenchmarkPostPoll(b *testing.B) {
	for _, tc := range []struct {
		name   string
		noRing bool
	}{{"ring", false}, {"socket", true}} {
		b.Run(tc.name, func(b *testing.B) {
			p := daemontest.Start(b, 1)
			open := func(sock string) *side {
				d, err := verbs.OpenWith(sock, verbs.Options{NoRing: tc.noRing})
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { d.Close() })
				qp, err := d.CreateQP(verbs.QPConfig{})
				if err != nil {
					b.Fatal(err)
				}
				mr, err := d.RegMR(4096, verbs.AccessLocalWrite|verbs.AccessRemoteWrite)
				if err != nil {
					b.Fatal(err)
				}
				return &side{dev: d, qp: qp, mr: mr}
			}
			x, y := open(p.Sock[0]), open(p.Sock[1])
			if err := x.qp.Connect(y.qp.ConnectInfo()); err != nil {
				b.Fatal(err)
			}
			if err := y.qp.Connect(x.qp.ConnectInfo()); err != nil {
				b.Fatal(err)
			}
			wr := verbs.Write(1, x.mr, 0, 8, y.mr.Addr, y.mr.RKey)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if err := x.qp.PostSend(wr); err != nil {
					b.Fatal(err)
				}
				if c, err := x.dev.NextCompletion(10 * time.Second); err != nil || c.Status != verbs.StatusSuccess {
					b.Fatalf("completion %+v: %v", c, err)
				}
			}
		})
	}
}

// TestRingConcurrentPostersAndClose: several goroutines post through one
// small SQ (so they wait for room) while another takes the completions;
// every work request completes once. Then Close, with a goroutine asleep
// in WaitCQ, wakes it with the device's error and unmaps the ring only
// after it let go (run with -race).
func TestRingConcurrentPostersAndClose(t *testing.T) {
	p := daemontest.Start(t, 1)
	lay := shmring.Layout{SQEntries: 16, CQEntries: 1024}
	a := openWith(t, p.Sock[0], 4096, verbs.Options{Layout: lay})
	b := openWith(t, p.Sock[1], 4096, verbs.Options{Layout: lay})
	connect(t, a, b)
	const posters, each = 4, 100
	errs := make(chan error, posters+1)
	for g := 0; g < posters; g++ {
		go func() {
			for i := 0; i < each; i++ {
				id := uint64(g*each + i)
				if err := a.qp.PostSend(verbs.Write(id, a.mr, 0, 8, b.mr.Addr, b.mr.RKey)); err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	seen := make([]bool, posters*each)
	for n := 0; n < posters*each; n++ {
		c := waitCQE(t, a.dev)
		if c.Status != verbs.StatusSuccess || c.ID >= uint64(len(seen)) || seen[c.ID] {
			t.Fatalf("completion %d: %+v (duplicate or unknown)", n, c)
		}
		seen[c.ID] = true
	}
	for g := 0; g < posters; g++ {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	waited := make(chan error, 1)
	go func() {
		_, err := a.dev.WaitCQ(-1)
		waited <- err
	}()
	time.Sleep(20 * time.Millisecond) // let it reach the futex (it returns either way)
	if err := a.dev.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-waited:
		if err == nil {
			t.Fatal("WaitCQ returned no error after Close")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("WaitCQ still asleep 10 s after Close")
	}
	if a.dev.Ring() {
		t.Fatal("Ring() true after Close")
	}
}

// TestOpenControlAttachesNoRing: the control-only session of mrcctl, the
// OAM tools and mrc-mapper maps no rings (each would cost ~2.3 MB of
// shared memory it never uses) and its control requests still work; a
// session opened for work beside it gets the rings.
func TestOpenControlAttachesNoRing(t *testing.T) {
	p := daemontest.Start(t, 1)
	ctl, err := verbs.OpenControl(p.Sock[0])
	if err != nil {
		t.Fatal(err)
	}
	defer ctl.Close()
	work, err := verbs.OpenWith(p.Sock[0], verbs.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer work.Close()
	if ctl.Ring() || !work.Ring() {
		t.Fatalf("rings attached: control session %v (want false), work session %v (want true)", ctl.Ring(), work.Ring())
	}
	if c := daemonCounters(t, ctl); c["loops"] == 0 {
		t.Fatalf("control session's counters: %v, want the daemon's loop count", c)
	}
}

// TestYieldAfterAppWake: a busy-polling loop that woke an application
// asleep on its ring gives its CPU away once (app_yields), so that the
// woken thread need not wait for the spinning loop to be preempted; a loop
// that does not busy-poll sleeps anyway and never yields. Every ping and
// pong wakes an application that waits in the kernel (no spin).
func TestYieldAfterAppWake(t *testing.T) {
	for _, tc := range []struct {
		name   string
		busy   time.Duration
		yields bool
	}{{"busy polling", 200 * time.Microsecond, true}, {"busy_poll 0", 0, false}} {
		t.Run(tc.name, func(t *testing.T) {
			p := daemontest.StartWith(t, 1, func(_ int, c *config.Config) { c.BusyPoll = &tc.busy })
			a := openWith(t, p.Sock[0], 1<<16, verbs.Options{})
			b := openWith(t, p.Sock[1], 1<<16, verbs.Options{})
			connect(t, a, b)
			before := daemonCounters(t, a.dev)
			pingPong(t, a, b, 50)
			after := daemonCounters(t, a.dev)
			wakes, yields := after["ring_app_wakes"]-before["ring_app_wakes"], after["app_yields"]-before["app_yields"]
			t.Logf("daemon 1: %d application wakes, %d yields", wakes, yields)
			if wakes == 0 {
				t.Fatal("no application was woken: the test shows nothing")
			}
			if tc.yields && yields == 0 || !tc.yields && yields != 0 {
				t.Errorf("%d yields after %d application wakes, want them only with busy polling", yields, wakes)
			}
			if yields > wakes {
				t.Errorf("%d yields for %d application wakes: at most one a wake", yields, wakes)
			}
		})
	}
}

// TestCooperativePingPong runs two cooperative daemons and their
// applications on one P, as mrc-write-lat --in-process runs (a library
// NIC): every message is verified, and each goes from loop to application
// and back by yielding the P, so neither loop sleeps in the kernel for a
// doorbell to ring and no application sleeps for the loop to wake.
func TestCooperativePingPong(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts func(p *daemontest.Pair, i int) verbs.Options
	}{
		{"waits park on Notify", (*daemontest.Pair).CoopOptions},
		{"waits spin", func(*daemontest.Pair, int) verbs.Options {
			return verbs.Options{Cooperative: true, Spin: time.Second}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) { testCooperativePingPong(t, tc.opts) })
	}
}

func testCooperativePingPong(t *testing.T, opts func(p *daemontest.Pair, i int) verbs.Options) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	p := daemontest.StartCooperative(t, 2, nil)
	a := openWith(t, p.Sock[0], 1<<16, opts(p, 0))
	b := openWith(t, p.Sock[1], 1<<16, opts(p, 1))
	if !a.dev.Ring() || !b.dev.Ring() {
		t.Fatal("the sessions are not on the shared-memory rings")
	}
	connect(t, a, b)
	var before [2]map[string]uint64
	for i, s := range []*side{a, b} {
		before[i] = daemonCounters(t, s.dev)
	}
	var ru0, ru1 unix.Rusage
	_ = unix.Getrusage(unix.RUSAGE_SELF, &ru0)
	pingPong(t, a, b, 300)
	_ = unix.Getrusage(unix.RUSAGE_SELF, &ru1)
	// Every hand-off between threads would be a voluntary context switch
	// (a futex sleep) of this process: 4 a round trip at least.
	switches := ru1.Nvcsw - ru0.Nvcsw
	t.Logf("%d voluntary context switches for 300 round trips", switches)
	if switches > 150 {
		t.Errorf("%d voluntary context switches for 300 round trips: the loops and the applications did not share their thread", switches)
	}
	for i, s := range []*side{a, b} {
		c := daemonCounters(t, s.dev)
		d := func(k string) uint64 { return c[k] - before[i][k] }
		t.Logf("daemon %d: %d loops, %d naps, %d doorbells, %d application wakes, %d CQEs", i+1, d("loops"), d("sleeps"), d("ring_doorbells"), d("ring_app_wakes"), d("cqes"))
		if d("cqes") < 600 {
			t.Errorf("daemon %d delivered %d completions through the ring, want 600 (300 sends, 300 receives)", i+1, d("cqes"))
		}
		if d("ring_doorbells") != 0 || d("ring_app_wakes") != 0 || d("wakes") != 0 {
			t.Errorf("daemon %d: %d doorbells, %d application wakes, %d eventfd wakes: a cooperative loop and its applications hand the P over, none sleeps in the kernel",
				i+1, d("ring_doorbells"), d("ring_app_wakes"), d("wakes"))
		}
	}
}

func TestCooperativeOneThread(t *testing.T) {
	cfg := daemontest.Config(t.TempDir(), 1, 1)
	cfg.Threads = 2
	_, err := daemon.New(daemon.Options{Config: cfg, Ports: []xsk.Port{nil}, Cooperative: true})
	if err == nil || !strings.Contains(err.Error(), "one engine thread") {
		t.Fatalf("a cooperative NIC with 2 engine threads: %v, want an error naming one engine thread", err)
	}
}

// TestCooperativeWaitParks: a cooperative wait with no limit that lasts
// longer than its 100 ms check of the device parks all along. It used to
// measure its pauses from the wait's start, and after 100 ms spun on a
// pause that ended at once: a whole CPU until the completion came.
func TestCooperativeWaitParks(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	p := daemontest.StartCooperative(t, 1, nil)
	a := openWith(t, p.Sock[0], 1<<16, p.CoopOptions(0))
	b := openWith(t, p.Sock[1], 1<<16, p.CoopOptions(1))
	connect(t, a, b)
	pingPong(t, a, b, 1) // both loops and waits warmed up
	const after = 500 * time.Millisecond
	var ru0, ru1 unix.Rusage
	_ = unix.Getrusage(unix.RUSAGE_SELF, &ru0)
	start := time.Now()
	posted := make(chan error, 1)
	time.AfterFunc(after, func() {
		posted <- a.qp.PostSend(verbs.WriteImm(7, a.mr, 0, 8, b.mr.Addr, b.mr.RKey, 7))
	})
	ok, err := b.dev.WaitCQ(-1)
	waited := time.Since(start)
	_ = unix.Getrusage(unix.RUSAGE_SELF, &ru1)
	if err != nil || !ok {
		t.Fatalf("WaitCQ(-1): %v, %v", ok, err)
	}
	if err := <-posted; err != nil {
		t.Fatal(err)
	}
	cpu := time.Duration(ru1.Utime.Nano()+ru1.Stime.Nano()-ru0.Utime.Nano()-ru0.Stime.Nano()) * time.Nanosecond
	t.Logf("waited %v for the completion; the process used %v of CPU meanwhile", waited.Round(time.Millisecond), cpu.Round(time.Millisecond))
	if waited < after {
		t.Fatalf("the wait ended after %v, before the post at %v", waited, after)
	}
	if cpu > waited/2 {
		t.Errorf("the process used %v of CPU in a %v wait: the wait spun instead of parking", cpu, waited)
	}
}

// TestCooperativeSQWaitParks: an in-process application that waits for
// room in a full SQ parks on Notify and asks for no futex wake-up: the
// daemon wakes no application. It used to set the SQ waiting flag first,
// and the daemon made a futex call for every batch it took.
func TestCooperativeSQWaitParks(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	p := daemontest.StartCooperative(t, 1, nil)
	lay := shmring.Layout{SQEntries: 16, CQEntries: 1024}
	oa, ob := p.CoopOptions(0), p.CoopOptions(1)
	oa.Layout, ob.Layout = lay, lay
	a := openWith(t, p.Sock[0], 1<<16, oa)
	b := openWith(t, p.Sock[1], 1<<16, ob)
	connect(t, a, b)
	before := daemonCounters(t, a.dev)
	const n = 200
	for i := 0; i < n; i++ { // 200 posts through a 16-slot SQ: waits for room
		if err := a.qp.PostSend(verbs.Write(uint64(i), a.mr, 0, 64, b.mr.Addr, b.mr.RKey)); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < n; i++ {
		if c := waitCQE(t, a.dev); c.ID != uint64(i) || c.Status != verbs.StatusSuccess {
			t.Fatalf("completion %d: %+v", i, c)
		}
	}
	after := daemonCounters(t, a.dev)
	if w := after["ring_app_wakes"] - before["ring_app_wakes"]; w != 0 {
		t.Errorf("the daemon woke the application %d times: a cooperative wait for SQ room asks for no futex wake-up", w)
	}
}
