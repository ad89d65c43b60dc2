package xsk

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

var (
	usidBlock = netip.MustParsePrefix("5f00:1::/32")
	outerSrc  = netip.MustParseAddr("5f00:1:4000::")
)

func mustUSID(t testing.TB, usid uint16) netip.Prefix {
	p, err := USIDPrefix(usidBlock, usid)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// openPair opens a port on each end of n: A owns downlink uSID 0xc000 and
// addrA, B owns 0xc100 and addrB.
func openPair(t *testing.T, n *vethNet, ring int) (a, b *XDPPort) {
	return openPairKick(t, n, ring, false)
}

// openPairKick is openPair with A's kicks on a kick thread when kick is set.
func openPairKick(t *testing.T, n *vethNet, ring int, kick bool) (a, b *XDPPort) {
	a = openIn(t, n.nsA, Config{Ifname: n.ifA, RingSize: ring, Attach: AttachNative,
		USIDPrefixes: []netip.Prefix{mustUSID(t, 0xc000)}, Addrs: []netip.Addr{n.addrA}, KickThread: kick})
	b = openIn(t, n.nsB, Config{Ifname: n.ifB, RingSize: ring, Attach: AttachNative,
		USIDPrefixes: []netip.Prefix{mustUSID(t, 0xc100)}, Addrs: []netip.Addr{n.addrB}})
	return a, b
}

func payload(n int, seed byte) []byte {
	p := make([]byte, n)
	for i := range p {
		p[i] = seed + byte(i*7)
	}
	return p
}

// TestVethSteering sends a mix of frames from A's AF_XDP socket: the ones
// addressed to B's port arrive byte-exact and in order on B's socket, the
// others go to B's kernel, and the counters add up exactly.
func TestVethSteering(t *testing.T) {
	requireXDP(t)
	const mtu = 3000 // <= 3506, the veth native-XDP limit for 4 KiB pages
	n := newVethNet(t, mtu)
	a, b := openPair(t, n, 0)
	if m := b.Steer().Mode(); m != AttachNative {
		t.Fatalf("steering mode %v, want native", m)
	}
	other := netip.MustParseAddr(n.prefix + "99")
	maxPayload := mtu - 40 - 8
	udp := func(dst netip.Addr, dport uint16, size int, seed byte) []byte {
		return udpFrame(n.macB, n.macA, n.addrA, dst, 49152, dport, payload(size, seed))
	}
	tests := []struct {
		name  string
		frame []byte
		ours  bool
	}{
		{"udp4791 min", udp(n.addrB, 4791, 2, 1), true},
		{"udp4791 1000", udp(n.addrB, 4791, 1000, 2), true},
		{"udp4791 2100-byte frame", udp(n.addrB, 4791, 2038, 3), true},
		{"udp4791 mtu-sized", udp(n.addrB, 4791, maxPayload, 4), true},
		{"udp4971 alias", udp(n.addrB, 4971, 100, 5), true},
		{"ip6in6 to B's downlink uSID", ip6in6Frame(udp(n.addrB, 4791, 2038-40, 6), outerSrc, netip.MustParseAddr("5f00:1:c100::")), true},
		{"ip6in6 to B's uSID, later uSIDs", ip6in6Frame(udp(n.addrB, 4791, 64, 7), outerSrc, netip.MustParseAddr("5f00:1:c100:1234::")), true},
		{"ip6in6 to another uSID", ip6in6Frame(udp(n.addrB, 4791, 64, 8), outerSrc, netip.MustParseAddr("5f00:1:c101::")), false},
		{"udp4791 to another address", udp(other, 4791, 64, 9), false},
		{"udp other port to B", udp(n.addrB, 4792, 64, 10), false},
	}
	var frames, want [][]byte
	for _, tc := range tests {
		frames = append(frames, tc.frame)
		if tc.ours {
			want = append(want, tc.frame)
		}
	}
	before, err := b.Steer().Counters()
	if err != nil {
		t.Fatal(err)
	}
	const rounds = 50
	for r := range rounds {
		if err := sendAll(a, frames, 5*time.Second); err != nil {
			t.Fatalf("round %d: send: %v", r, err)
		}
		got, err := recvN(b, len(want), 5*time.Second)
		if err != nil {
			t.Fatalf("round %d: %v; stats %+v", r, err, b.Stats())
		}
		for i := range want {
			if !bytes.Equal(got[i], want[i]) {
				t.Fatalf("round %d frame %d: got %d bytes % x..., want %d bytes % x...", r, i, len(got[i]), head(got[i]), len(want[i]), head(want[i]))
			}
		}
	}
	// Nothing beyond what was sent arrives: wait for the completions of the
	// sender, which happen after the receiver's program has run.
	waitFor(t, "tx completions", 5*time.Second, func() bool {
		_ = a.Wait(0)
		return a.Stats().TxCompleted == uint64(rounds*len(frames))
	})
	if k, err := b.Recv(make([][]byte, 8)); k != 0 || err != nil {
		t.Errorf("extra frames after the test traffic: %d, %v", k, err)
	}
	after, err := b.Steer().Counters()
	if err != nil {
		t.Fatal(err)
	}
	if d := after.USID - before.USID; d != 2*rounds {
		t.Errorf("steered by uSID: %d, want %d", d, 2*rounds)
	}
	if d := after.UDP - before.UDP; d != 5*rounds {
		t.Errorf("steered by UDP: %d, want %d", d, 5*rounds)
	}
	if d := after.Pass - before.Pass; d < 3*rounds {
		t.Errorf("passed: %d, want >= %d", d, 3*rounds)
	}
	if after.NoSocket != 0 {
		t.Errorf("steered without a socket: %d", after.NoSocket)
	}
	sa, sb := a.Stats(), b.Stats()
	if sa.TxFrames != uint64(rounds*len(frames)) || sb.RxFrames != uint64(rounds*len(want)) {
		t.Errorf("A tx %d (want %d), B rx %d (want %d)", sa.TxFrames, rounds*len(frames), sb.RxFrames, rounds*len(want))
	}
	if sb.RxDropped != 0 || sa.TxInvalid != 0 {
		t.Errorf("kernel drops: B rx_dropped %d, A tx_invalid %d", sb.RxDropped, sa.TxInvalid)
	}
	t.Logf("A %+v", sa)
	t.Logf("B %+v", sb)
}

func head(b []byte) []byte { return b[:min(len(b), 64)] }

// TestVethSequence pushes many numbered frames through small rings (so every
// ring wraps many times) and checks order, content and exact counts. The
// sender keeps at most half a ring in flight so nothing is dropped for lack
// of fill-ring chunks.
func TestVethSequence(t *testing.T) {
	requireXDP(t)
	for _, tc := range []struct {
		name string
		kick bool
	}{{"caller kicks", false}, {"kick thread", true}} {
		t.Run(tc.name, func(t *testing.T) {
			n := newVethNet(t, 3000)
			a, b := openPairKick(t, n, 64, tc.kick)
			vethSequence(t, a, b, n)
			if st := a.Stats(); tc.kick && (st.Kicks == 0 || st.KickerWakes == 0) {
				t.Errorf("kick thread made %d kicks after %d wakes, want both > 0", st.Kicks, st.KickerWakes)
			}
		})
	}
}

func vethSequence(t *testing.T, a, b *XDPPort, n *vethNet) {
	const total = 20000
	var frames [][]byte
	for i := range total {
		p := payload(16+i%2000, byte(i))
		binary.BigEndian.PutUint32(p, uint32(i))
		frames = append(frames, udpFrame(n.macB, n.macA, n.addrA, n.addrB, 1000, 4791, p))
	}
	errc := make(chan error, 1)
	recvd := make(chan int, 1)
	go func() {
		next := 0
		bufs := make([][]byte, 32)
		for i := range bufs {
			bufs[i] = make([]byte, MaxFrameLen)
		}
		deadline := time.Now().Add(30 * time.Second)
		for next < total && time.Now().Before(deadline) {
			k, err := b.Recv(bufs)
			if err != nil {
				errc <- err
				return
			}
			for _, f := range bufs[:k] {
				if !bytes.Equal(f, frames[next]) {
					errc <- fmt.Errorf("frame %d: got seq %d, %d bytes; want %d bytes", next, binary.BigEndian.Uint32(f[62:]), len(f), len(frames[next]))
					return
				}
				next++
			}
			if k > 0 {
				select {
				case <-recvd:
				default:
				}
				recvd <- next
			} else {
				_ = b.Wait(5 * time.Millisecond)
			}
		}
		if next < total {
			errc <- fmt.Errorf("received %d of %d frames; B %+v", next, total, b.Stats())
			return
		}
		errc <- nil
	}()
	sent, acked := 0, 0
	deadline := time.Now().Add(30 * time.Second)
	for sent < total && time.Now().Before(deadline) {
		select {
		case acked = <-recvd:
		case err := <-errc:
			t.Fatal(err)
		default:
		}
		if sent-acked >= 32 {
			_ = a.Wait(time.Millisecond)
			continue
		}
		k, err := a.Send(frames[sent:min(total, acked+32)])
		if err != nil {
			t.Fatal(err)
		}
		sent += k
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	sb := b.Stats()
	if sb.RxFrames != total || sb.RxDropped != 0 || sb.FillEmpty != 0 {
		t.Errorf("B: rx %d (want %d), rx_dropped %d, fill_empty %d", sb.RxFrames, total, sb.RxDropped, sb.FillEmpty)
	}
	t.Logf("A %+v", a.Stats())
	t.Logf("B %+v", sb)
}

// TestKernelTrafficPasses checks that, with both ports open, the kernels
// still talk: NDP resolves, ICMPv6 echo is answered, UDP to other ports
// reaches a kernel socket; and that kernel-built UDP 4791 lands in the port.
func TestKernelTrafficPasses(t *testing.T) {
	requireXDP(t)
	n := newVethNet(t, 3000)
	_, b := openPair(t, n, 0)

	// A kernel UDP socket in B, on a port the program does not steer.
	var kconn *net.UDPConn
	if err := inNS(n.nsB, func() (err error) {
		kconn, err = net.ListenUDP("udp6", &net.UDPAddr{IP: n.addrB.AsSlice(), Port: 9999})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer kconn.Close()

	var echoed bool
	err := inNS(n.nsA, func() error {
		c, err := net.DialUDP("udp6", nil, &net.UDPAddr{IP: n.addrB.AsSlice(), Port: 9999})
		if err != nil {
			return err
		}
		defer c.Close()
		// Needs NDP through B's program first.
		if _, err := c.Write([]byte("kernel path")); err != nil {
			return err
		}
		m, err := net.DialUDP("udp6", nil, &net.UDPAddr{IP: n.addrB.AsSlice(), Port: 4791})
		if err != nil {
			return err
		}
		defer m.Close()
		if _, err := m.Write([]byte("to the port")); err != nil {
			return err
		}
		echoed, err = ping6(n.addrB, 3*time.Second)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if !echoed {
		t.Error("no ICMPv6 echo reply from B while its port is open")
	}
	kconn.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 100)
	k, err := kconn.Read(buf)
	if err != nil || string(buf[:k]) != "kernel path" {
		t.Errorf("kernel socket in B: %q, %v", buf[:k], err)
	}
	got, err := recvN(b, 1, 5*time.Second)
	if err != nil {
		t.Fatalf("port B: %v", err)
	}
	if p := got[0][14+40+8:]; string(p) != "to the port" {
		t.Errorf("port B got payload %q", p)
	}
}

// ping6 sends one ICMPv6 echo request to dst from the calling thread's
// namespace and waits for the reply.
func ping6(dst netip.Addr, timeout time.Duration) (bool, error) {
	fd, err := unix.Socket(unix.AF_INET6, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.IPPROTO_ICMPV6)
	if err != nil {
		return false, fmt.Errorf("raw ICMPv6 socket: %w", err)
	}
	defer unix.Close(fd)
	tv := unix.NsecToTimeval(timeout.Nanoseconds())
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		return false, err
	}
	req := []byte{128, 0, 0, 0, 0x4b, 0x58, 0, 1, 'x', 's', 'k'} // the kernel fills the checksum
	if err := unix.Sendto(fd, req, 0, &unix.SockaddrInet6{Addr: dst.As16()}); err != nil {
		return false, fmt.Errorf("send echo request: %w", err)
	}
	buf := make([]byte, 1500)
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		k, _, err := unix.Recvfrom(fd, buf, 0)
		if err != nil {
			return false, fmt.Errorf("wait for echo reply: %w", err)
		}
		if k >= 8 && buf[0] == 129 && buf[4] == 0x4b && buf[5] == 0x58 {
			return true, nil
		}
	}
	return false, nil
}

// TestCloseReopen closes and re-opens the port on the same queue in the
// same process several times; each time it works and the program is detached
// after Close.
func TestCloseReopen(t *testing.T) {
	requireXDP(t)
	n := newVethNet(t, 3000)
	a := openIn(t, n.nsA, Config{Ifname: n.ifA, NoSteer: true})
	frame := udpFrame(n.macB, n.macA, n.addrA, n.addrB, 1, 4791, payload(500, 1))
	for i := range 3 {
		var b *XDPPort
		start := time.Now()
		err := inNS(n.nsB, func() (err error) {
			// The kernel frees the queue of a closed socket in deferred work
			// (xp_release_deferred), so an immediate re-bind can see EBUSY
			// for a moment; Open retries within BindTimeout.
			b, err = Open(Config{Ifname: n.ifB, Addrs: []netip.Addr{n.addrB}, BindTimeout: 3 * time.Second})
			return err
		})
		if err != nil {
			t.Fatalf("open %d: %v", i, err)
		}
		t.Logf("open %d took %v", i, time.Since(start))
		if err := sendAll(a, [][]byte{frame}, time.Second); err != nil {
			t.Fatal(err)
		}
		got, err := recvN(b, 1, 5*time.Second)
		if err != nil || !bytes.Equal(got[0], frame) {
			t.Fatalf("open %d: receive: %v", i, err)
		}
		if err := b.Close(); err != nil {
			t.Fatalf("close %d: %v", i, err)
		}
		if _, err := b.Send([][]byte{frame}); err != ErrClosed {
			t.Errorf("Send after Close: %v, want ErrClosed", err)
		}
		if attached := xdpAttached(t, n, n.ifB); attached {
			t.Errorf("close %d: XDP program still attached to %s", i, n.ifB)
		}
	}
}

func xdpAttached(t *testing.T, n *vethNet, ifname string) bool {
	h, err := netlink.NewHandleAt(n.nsB)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	l, err := h.LinkByName(ifname)
	if err != nil {
		t.Fatal(err)
	}
	return l.Attrs().Xdp != nil && l.Attrs().Xdp.Attached
}

// TestCarrier follows B's veth going down and up from A's side.
func TestCarrier(t *testing.T) {
	requireXDP(t)
	n := newVethNet(t, 1500)
	ifi := 0
	if err := inNS(n.nsA, func() error {
		i, err := net.InterfaceByName(n.ifA)
		if i != nil {
			ifi = i.Index
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	c, err := WatchCarrier(ifi, &n.nsA)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	next := func(want bool) {
		t.Helper()
		select {
		case ev := <-c.Events():
			if ev.Up != want || ev.Ifindex != ifi || ev.Name != n.ifA {
				t.Fatalf("event %+v, want up=%v on %s/%d", ev, want, n.ifA, ifi)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("no carrier event (want up=%v)", want)
		}
	}
	// The veth's carrier comes up asynchronously after "link set up".
	select {
	case ev := <-c.Events():
		if !ev.Up {
			next(true)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no initial carrier event")
	}
	sh(t, "-n", n.nsNameB, "link", "set", n.ifB, "down")
	next(false)
	sh(t, "-n", n.nsNameB, "link", "set", n.ifB, "up")
	next(true)
	if !c.Up() {
		t.Error("Up() false after the up event")
	}
}

// TestOpenErrors checks that bad configurations fail with a message.
func TestOpenErrors(t *testing.T) {
	tests := []struct {
		name string
		cfg  SocketConfig
	}{
		{"ring not a power of two", SocketConfig{Ifindex: 1, RingSize: 100}},
		{"ring too small", SocketConfig{Ifindex: 1, RingSize: 32}},
		{"no interface", SocketConfig{Ifindex: 0}},
		{"negative queue", SocketConfig{Ifindex: 1, Queue: -1}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if s, err := NewSocket(tc.cfg); err == nil {
				s.Close()
				t.Fatal("NewSocket succeeded")
			}
		})
	}
	if _, err := Open(Config{Ifname: "xk-no-such-if"}); err == nil {
		t.Error("Open of a missing interface succeeded")
	}
}

func TestUSIDPrefix(t *testing.T) {
	tests := []struct {
		block string
		usid  uint16
		want  string
	}{
		{"5f00:1::/32", 0xc000, "5f00:1:c000::/48"},
		{"5f00:1::/32", 0xc103, "5f00:1:c103::/48"},
		{"5f00:1:ffff::/32", 0x4001, "5f00:1:4001::/48"},
		{"5f00::/16", 0x0101, "5f00:101::/32"},
	}
	for _, tc := range tests {
		got, err := USIDPrefix(netip.MustParsePrefix(tc.block), tc.usid)
		if err != nil || got.String() != tc.want {
			t.Errorf("USIDPrefix(%s, %#x) = %v, %v; want %s", tc.block, tc.usid, got, err, tc.want)
		}
	}
	for _, bad := range []string{"10.0.0.0/8", "5f00:1::/33", "5f00::/128"} {
		if _, err := USIDPrefix(netip.MustParsePrefix(bad), 1); err == nil {
			t.Errorf("USIDPrefix(%s) succeeded", bad)
		}
	}
}

// TestWake checks that Wake ends a Wait that has no frame and no timeout.
func TestWake(t *testing.T) {
	requireXDP(t)
	n := newVethNet(t, 1500)
	b := openIn(t, n.nsB, Config{Ifname: n.ifB, NoSteer: true})
	for i := range 3 {
		done := make(chan error, 1)
		go func() { done <- b.Wait(-1) }()
		b.Wake()
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("round %d: Wait did not return after Wake", i)
		}
	}
}

// TestHighMTU: with an MTU above 3506 (the veth limit for a non-frags native
// XDP program) the xdp.frags steering program attaches in native mode, the
// socket is bound multi-buffer on its own (the interface MTU asks for it),
// and frames up to the MTU arrive byte-exact, in native and in generic mode.
// Before the steering program was frags-aware, native attach failed here
// (ERANGE) and only generic mode worked.
func TestHighMTU(t *testing.T) {
	requireXDP(t)
	const mtu = 3800 // frames of mtu+14 = 3814 bytes: more than veth keeps linear
	for _, mode := range []AttachMode{AttachNative, AttachGeneric} {
		t.Run(mode.String(), func(t *testing.T) {
			n := newVethNet(t, mtu)
			a := openIn(t, n.nsA, Config{Ifname: n.ifA, NoSteer: true})
			b := openIn(t, n.nsB, Config{Ifname: n.ifB, Attach: mode, Addrs: []netip.Addr{n.addrB}})
			if m := b.Steer().Mode(); m != mode {
				t.Fatalf("mode %v, want %v", m, mode)
			}
			if !a.MultiBuffer() || !b.MultiBuffer() {
				t.Fatalf("MultiBuffer a=%v b=%v at MTU %d, want both on", a.MultiBuffer(), b.MultiBuffer(), mtu)
			}
			var frames [][]byte
			for _, size := range []int{2, 2038, mtu - 48} {
				frames = append(frames, udpFrame(n.macB, n.macA, n.addrA, n.addrB, 7, 4791, payload(size, byte(size))))
			}
			if err := sendAll(a, frames, 5*time.Second); err != nil {
				t.Fatal(err)
			}
			got, err := recvN(b, len(frames), 5*time.Second)
			if err != nil {
				t.Fatalf("%v; B %+v", err, b.Stats())
			}
			for i := range frames {
				if !bytes.Equal(got[i], frames[i]) {
					t.Errorf("frame %d (%d bytes) differs", i, len(frames[i]))
				}
			}
		})
	}
}

// TestOverMTUFrameDoesNotJam: a frame longer than the MTU is dropped by the
// driver (counted in TxKickErrors), and the frames behind it still go out.
func TestOverMTUFrameDoesNotJam(t *testing.T) {
	requireXDP(t)
	n := newVethNet(t, 3000)
	a, b := openPair(t, n, 0)
	big := udpFrame(n.macB, n.macA, n.addrA, n.addrB, 1, 4791, payload(3100, 1))
	small := udpFrame(n.macB, n.macA, n.addrA, n.addrB, 1, 4791, payload(100, 2))
	if err := sendAll(a, [][]byte{big, small, big, small}, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	got, err := recvN(b, 2, 5*time.Second)
	if err != nil {
		t.Fatalf("%v; A %+v", err, a.Stats())
	}
	if !bytes.Equal(got[0], small) || !bytes.Equal(got[1], small) {
		t.Error("the frames behind the oversize ones differ")
	}
	if e := a.Stats().TxKickErrors; e == 0 {
		t.Errorf("TxKickErrors = 0 after two over-MTU frames; A %+v", a.Stats())
	}
}

// TestWaitZeroNoPoll: Wait(0) still pushes out committed frames (they
// arrive at the peer) but makes no poll syscall (Stats.Polls stays put);
// a blocking Wait still polls. Before the change every Wait(0) was a
// poll(2) with a zero timeout: mrc-nicd's idle path made one per sleep.
func TestWaitZeroNoPoll(t *testing.T) {
	requireXDP(t)
	n := newVethNet(t, 1500)
	a, b := openPair(t, n, 64)
	const frames = 8
	for i := range frames {
		slot := a.TxSlot()
		if slot == nil {
			t.Fatalf("frame %d: no transmit slot", i)
		}
		f := udpFrame(n.macB, n.macA, n.addrA, n.addrB, 1000, 4791, payload(100, byte(i)))
		if err := a.TxCommit(copy(slot, f)); err != nil {
			t.Fatal(err)
		}
	}
	polls := a.Stats().Polls
	for range 100 {
		if err := a.Wait(0); err != nil {
			t.Fatal(err)
		}
	}
	if got := a.Stats().Polls - polls; got != 0 {
		t.Errorf("100 × Wait(0) made %d poll syscalls, want 0", got)
	}
	// The first Wait(0) published and kicked the committed frames.
	if got, err := recvN(b, frames, 5*time.Second); err != nil {
		t.Fatalf("after Wait(0): %v (frames committed but not sent?)", err)
	} else if len(got) != frames {
		t.Fatalf("received %d frames, want %d", len(got), frames)
	}
	polls = a.Stats().Polls
	if err := a.Wait(time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if got := a.Stats().Polls - polls; got != 1 {
		t.Errorf("Wait(1ms) with nothing to receive made %d poll syscalls, want 1", got)
	}
}

// TestRxPending: the RX ring's backlog is what arrived and was not read,
// counted exactly as frames are sent and taken out (the daemon's stall
// clock asks it after the loop did not run).
func TestRxPending(t *testing.T) {
	requireXDP(t)
	n := newVethNet(t, 3000)
	a, b := openPair(t, n, 64)
	if got := b.RxPending(); got != 0 {
		t.Fatalf("RxPending %d before anything was sent", got)
	}
	const sent = 40
	var frames [][]byte
	for i := range sent {
		frames = append(frames, udpFrame(n.macB, n.macA, n.addrA, n.addrB, 1000, 4791, payload(100, byte(i))))
	}
	if k, err := a.Send(frames); k != sent || err != nil {
		t.Fatalf("Send = %d, %v", k, err)
	}
	for deadline := time.Now().Add(5 * time.Second); b.RxPending() < sent && time.Now().Before(deadline); {
		_ = a.Wait(0) // kick the transmission
		_ = b.Wait(10 * time.Millisecond)
	}
	for _, step := range []struct{ take, want int }{{0, sent}, {15, sent - 15}, {64, 0}} {
		// RecvFunc returns up to what the ring's cached producer index
		// showed when it was last read (as libxdp's consumer does: it
		// reads the shared index again only when the cache is empty), so
		// under load one call can return fewer than are pending: read
		// until step.take are taken.
		for left := step.take; left > 0; {
			k, err := b.RecvFunc(left, func([]byte) {})
			if err != nil {
				t.Fatal(err)
			}
			if k == 0 {
				break // nothing more: the check below reports it
			}
			left -= k
		}
		if got := b.RxPending(); got != step.want {
			t.Fatalf("after reading %d: RxPending %d, want %d (B %+v)", step.take, got, step.want, b.Stats())
		}
	}
}

// TestKickThreadNoLostWakeup: with the kick thread, one Send is the only
// poke a frame gets; the test never calls Send or Wait on A again until B
// has the frame. A poke lost between the kick thread's last look at the ring
// and its sleep would leave the frame on the ring and fail the round.
func TestKickThreadNoLostWakeup(t *testing.T) {
	requireXDP(t)
	n := newVethNet(t, 3000)
	a, b := openPairKick(t, n, 64, true)
	buf := [][]byte{make([]byte, MaxFrameLen)}
	const rounds = 2000
	for i := range rounds {
		p := payload(64, byte(i))
		binary.BigEndian.PutUint32(p, uint32(i))
		f := udpFrame(n.macB, n.macA, n.addrA, n.addrB, 1000, 4791, p)
		if k, err := a.Send([][]byte{f}); k != 1 || err != nil {
			t.Fatalf("round %d: sent %d: %v", i, k, err)
		}
		deadline := time.Now().Add(2 * time.Second)
		for {
			k, err := b.Recv(buf)
			if err != nil {
				t.Fatal(err)
			}
			if k == 1 {
				if !bytes.Equal(buf[0], f) {
					t.Fatalf("round %d: got another frame", i)
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("round %d: the frame never left A (lost wakeup?); A %+v", i, a.Stats())
			}
			_ = b.Wait(time.Millisecond)
		}
	}
	t.Logf("A %+v", a.Stats())
}
