package xsk

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"github.com/softmrc/softmrc/internal/nsthread"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// requireXDP skips the test unless it runs as root on a kernel with AF_XDP.
func requireXDP(tb testing.TB) {
	tb.Helper()
	if os.Geteuid() != 0 {
		tb.Skip("skipping: not root (needs netns, veth, XDP and AF_XDP)")
	}
	fd, err := unix.Socket(unix.AF_XDP, unix.SOCK_RAW, 0)
	if err != nil {
		tb.Skipf("skipping: kernel lacks AF_XDP sockets: socket(AF_XDP): %v", err)
	}
	unix.Close(fd)
	if _, err := exec.LookPath("ip"); err != nil {
		tb.Skip("skipping: iproute2 'ip' not found")
	}
}

// vethNet is two fresh network namespaces joined by one veth pair, removed
// again by the test's cleanup.
type vethNet struct {
	nsA, nsB     netns.NsHandle
	nsNameA      string
	nsNameB      string
	ifA, ifB     string
	macA, macB   net.HardwareAddr
	addrA, addrB netip.Addr
	prefix       string // fd00:xxxx:xxxx:: /64 of the pair
	mtu          int
}

func sh(tb testing.TB, args ...string) {
	tb.Helper()
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		tb.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out)
	}
}

// newVethNet creates the namespaces xk<rand>a/b with veths xk<rand>a/b,
// addresses fd00:<rand>::1/64 and ::2/64 (no DAD) and the given MTU.
func newVethNet(tb testing.TB, mtu int) *vethNet {
	tb.Helper()
	var r [4]byte
	if _, err := rand.Read(r[:]); err != nil {
		tb.Fatal(err)
	}
	id := hex.EncodeToString(r[:])
	n := &vethNet{
		nsNameA: "xk" + id + "a", nsNameB: "xk" + id + "b",
		ifA: "xk" + id + "a", ifB: "xk" + id + "b",
		macA:   net.HardwareAddr{0x02, 0, r[0], r[1], r[2], 0x0a},
		macB:   net.HardwareAddr{0x02, 0, r[0], r[1], r[2], 0x0b},
		prefix: fmt.Sprintf("fd00:%x:%x::", binary.BigEndian.Uint16(r[0:2]), binary.BigEndian.Uint16(r[2:4])),
		mtu:    mtu,
	}
	n.addrA = netip.MustParseAddr(n.prefix + "1")
	n.addrB = netip.MustParseAddr(n.prefix + "2")
	sh(tb, "netns", "add", n.nsNameA)
	tb.Cleanup(func() { _ = exec.Command("ip", "netns", "del", n.nsNameA).Run() })
	sh(tb, "netns", "add", n.nsNameB)
	tb.Cleanup(func() { _ = exec.Command("ip", "netns", "del", n.nsNameB).Run() })
	sh(tb, "link", "add", n.ifA, "netns", n.nsNameA, "type", "veth", "peer", "name", n.ifB, "netns", n.nsNameB)
	for _, s := range []struct {
		ns, ifn string
		mac     net.HardwareAddr
		addr    netip.Addr
	}{{n.nsNameA, n.ifA, n.macA, n.addrA}, {n.nsNameB, n.ifB, n.macB, n.addrB}} {
		sh(tb, "-n", s.ns, "link", "set", s.ifn, "address", s.mac.String(), "mtu", fmt.Sprint(mtu))
		sh(tb, "-n", s.ns, "addr", "add", s.addr.String()+"/64", "dev", s.ifn, "nodad")
		sh(tb, "-n", s.ns, "link", "set", "lo", "up")
		sh(tb, "-n", s.ns, "link", "set", s.ifn, "up")
	}
	var err error
	if n.nsA, err = netns.GetFromName(n.nsNameA); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { n.nsA.Close() })
	if n.nsB, err = netns.GetFromName(n.nsNameB); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { n.nsB.Close() })
	return n
}

// inNS runs fn on a fresh OS thread switched into ns. The thread is never
// unlocked, so Go discards it when fn returns instead of reusing a thread in
// the wrong namespace.
func inNS(ns netns.NsHandle, fn func() error) error { return nsthread.In(ns, fn) }

// openIn opens a port in ns and closes it at cleanup.
func openIn(tb testing.TB, ns netns.NsHandle, cfg Config) *XDPPort {
	tb.Helper()
	var p *XDPPort
	err := inNS(ns, func() (err error) { p, err = Open(cfg); return err })
	if err != nil {
		tb.Fatalf("Open(%s): %v", cfg.Ifname, err)
	}
	tb.Cleanup(func() { p.Close() })
	return p
}

// udpFrame builds Eth | IPv6 | UDP | payload, UDP checksum 0 (as MRC sends).
func udpFrame(dst, src net.HardwareAddr, sip, dip netip.Addr, sport, dport uint16, payload []byte) []byte {
	f := make([]byte, 14+40+8+len(payload))
	copy(f[0:6], dst)
	copy(f[6:12], src)
	binary.BigEndian.PutUint16(f[12:14], 0x86dd)
	ip6(f[14:54], 17, 8+len(payload), sip, dip)
	u := f[54:]
	binary.BigEndian.PutUint16(u[0:2], sport)
	binary.BigEndian.PutUint16(u[2:4], dport)
	binary.BigEndian.PutUint16(u[4:6], uint16(8+len(payload)))
	copy(u[8:], payload)
	return f
}

// ip6in6Frame wraps the IPv6 packet of inner (an Ethernet frame) in an outer
// IPv6 header with next header 41.
func ip6in6Frame(inner []byte, osrc, odst netip.Addr) []byte {
	pkt := inner[14:]
	f := make([]byte, 14+40+len(pkt))
	copy(f, inner[:14])
	ip6(f[14:54], 41, len(pkt), osrc, odst)
	copy(f[54:], pkt)
	return f
}

func ip6(h []byte, next byte, plen int, src, dst netip.Addr) {
	h[0] = 0x60
	binary.BigEndian.PutUint16(h[4:6], uint16(plen))
	h[6] = next
	h[7] = 64
	s, d := src.As16(), dst.As16()
	copy(h[8:24], s[:])
	copy(h[24:40], d[:])
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(tb testing.TB, what string, timeout time.Duration, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(time.Millisecond) // polling a condition with a deadline
	}
}

var errTimeout = errors.New("timeout")

// recvN receives frames from p until want frames arrived or timeout passed.
func recvN(p Port, want int, timeout time.Duration) ([][]byte, error) {
	var got [][]byte
	bufs := make([][]byte, 64)
	for i := range bufs {
		bufs[i] = make([]byte, MaxFrameLen)
	}
	deadline := time.Now().Add(timeout)
	for len(got) < want {
		if time.Now().After(deadline) {
			return got, fmt.Errorf("%w: got %d of %d frames", errTimeout, len(got), want)
		}
		n, err := p.Recv(bufs)
		if err != nil {
			return got, err
		}
		for _, b := range bufs[:n] {
			got = append(got, append([]byte(nil), b...))
		}
		if n == 0 {
			if err := p.Wait(10 * time.Millisecond); err != nil {
				return got, err
			}
		}
	}
	return got, nil
}

// sendAll sends every frame, retrying while the port is full, within timeout.
func sendAll(p Port, frames [][]byte, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for len(frames) > 0 {
		n, err := p.Send(frames)
		if err != nil {
			return err
		}
		frames = frames[n:]
		if n == 0 {
			if time.Now().After(deadline) {
				return fmt.Errorf("%w: %d frames not sent", errTimeout, len(frames))
			}
			_ = p.Wait(time.Millisecond)
		}
	}
	return nil
}
