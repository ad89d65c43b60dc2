package dataplane

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"github.com/softmrc/softmrc/internal/nsthread"
	"net"
	"os/exec"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// chain is a three-namespace veth chain made for one test:
//
//	<p>s: <p>s0  ---  <p>r0 :<p>r  <p>r1  ---  <p>d0 :<p>d
//	  fd00:1::1/64   fd00:1::2/64  fd00:2::1/64   fd00:2::2/64
//
// Everything is named with a random prefix and removed in t.Cleanup.
type chain struct {
	t       testing.TB
	p       string
	S, R, D string // namespace names
	macR0   net.HardwareAddr
	macR1   net.HardwareAddr
	macD0   net.HardwareAddr
	macS0   net.HardwareAddr
}

func sh(t testing.TB, args ...string) string {
	t.Helper()
	out, err := exec.Command(args[0], args[1:]...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v: %s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// kernelUN installs the kernel oracle's uN in namespace ns: seg6local End
// with the NEXT-C-SID flavour (F3216). A kernel built without SRv6 routes
// (CONFIG_IPV6_SEG6_LWTUNNEL) has no oracle: the test is skipped, saying so.
func kernelUN(t testing.TB, ns, prefix, dev string) {
	t.Helper()
	args := []string{"ip", "-n", ns, "-6", "route", "add", prefix, "encap", "seg6local", "action", "End",
		"flavors", "next-csid", "lblen", "32", "nflen", "16", "dev", dev}
	out, err := exec.Command(args[0], args[1:]...).CombinedOutput()
	if err != nil && strings.Contains(string(out), "encapsulation type not supported") {
		t.Skipf("skipping: the kernel lacks seg6local routes (CONFIG_IPV6_SEG6_LWTUNNEL), the oracle this compares with: %s", strings.TrimSpace(string(out)))
	}
	if err != nil {
		t.Fatalf("%s: %v: %s", strings.Join(args, " "), err, out)
	}
}

func newChain(t testing.TB) *chain {
	t.Helper()
	requireRoot(t)
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("skipping: iproute2 'ip' not found")
	}
	b := make([]byte, 2)
	rand.Read(b)
	p := "m" + hex.EncodeToString(b)
	c := &chain{t: t, p: p, S: p + "s", R: p + "r", D: p + "d"}
	for _, n := range []string{c.S, c.R, c.D} {
		sh(t, "ip", "netns", "add", n)
		n := n
		t.Cleanup(func() { exec.Command("ip", "netns", "del", n).Run() })
		sh(t, "ip", "-n", n, "link", "set", "lo", "up")
	}
	sh(t, "ip", "link", "add", p+"s0", "netns", c.S, "type", "veth", "peer", "name", p+"r0", "netns", c.R)
	sh(t, "ip", "link", "add", p+"r1", "netns", c.R, "type", "veth", "peer", "name", p+"d0", "netns", c.D)
	for _, x := range [][3]string{{c.S, p + "s0", "fd00:1::1/64"}, {c.R, p + "r0", "fd00:1::2/64"}, {c.R, p + "r1", "fd00:2::1/64"}, {c.D, p + "d0", "fd00:2::2/64"}} {
		sh(t, "ip", "-n", x[0], "addr", "add", x[2], "dev", x[1], "nodad")
		sh(t, "ip", "-n", x[0], "link", "set", x[1], "up")
	}
	sh(t, "ip", "netns", "exec", c.R, "sysctl", "-qw", "net.ipv6.conf.all.forwarding=1")
	c.macS0 = c.mac(c.S, p+"s0")
	c.macR0 = c.mac(c.R, p+"r0")
	c.macR1 = c.mac(c.R, p+"r1")
	c.macD0 = c.mac(c.D, p+"d0")
	// No NDP in the way of the kernel path.
	sh(t, "ip", "-n", c.R, "neigh", "replace", "fd00:2::2", "lladdr", c.macD0.String(), "dev", p+"r1", "nud", "permanent")
	return c
}

func (c *chain) mac(ns, dev string) net.HardwareAddr {
	var hw net.HardwareAddr
	c.in(ns, func() error {
		ifc, err := net.InterfaceByName(dev)
		if err != nil {
			return err
		}
		hw = ifc.HardwareAddr
		return nil
	})
	return hw
}

func (c *chain) ifindex(ns, dev string) int {
	var idx int
	c.in(ns, func() error {
		ifc, err := net.InterfaceByName(dev)
		if err != nil {
			return err
		}
		idx = ifc.Index
		return nil
	})
	return idx
}

// in runs f on an OS thread switched into namespace ns (ifindexes, devmap
// updates, XDP attach and sockets all resolve in the caller's namespace).
func (c *chain) in(ns string, f func() error) {
	c.t.Helper()
	if err := inNetns(ns, f); err != nil {
		c.t.Fatalf("in netns %s: %v", ns, err)
	}
}

func inNetns(ns string, f func() error) error { return nsthread.Named(ns, f) }

// packetSocket is an AF_PACKET socket bound to one interface.
type packetSocket struct {
	fd      int
	ifindex int
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

func (c *chain) openPacket(ns, dev string) *packetSocket {
	var ps *packetSocket
	c.in(ns, func() error {
		ifc, err := net.InterfaceByName(dev)
		if err != nil {
			return err
		}
		fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, int(htons(unix.ETH_P_ALL)))
		if err != nil {
			return fmt.Errorf("AF_PACKET socket: %w", err)
		}
		if err := unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ALL), Ifindex: ifc.Index}); err != nil {
			unix.Close(fd)
			return fmt.Errorf("bind AF_PACKET to %s: %w", dev, err)
		}
		tv := unix.Timeval{Usec: 20_000}
		unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
		unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF, 4<<20)
		ps = &packetSocket{fd: fd, ifindex: ifc.Index}
		return nil
	})
	c.t.Cleanup(func() { unix.Close(ps.fd) })
	return ps
}

func (ps *packetSocket) send(frame []byte) error {
	return unix.Sendto(ps.fd, frame, 0, &unix.SockaddrLinklayer{Ifindex: ps.ifindex, Halen: 6, Addr: [8]byte(append(append([]byte{}, frame[:6]...), 0, 0))})
}

// recv returns the next incoming frame, or nil after the socket timeout.
func (ps *packetSocket) recv(buf []byte) []byte {
	for {
		n, from, err := unix.Recvfrom(ps.fd, buf, 0)
		if err != nil {
			return nil
		}
		if ll, ok := from.(*unix.SockaddrLinklayer); ok && ll.Pkttype == unix.PACKET_OUTGOING {
			continue
		}
		return buf[:n]
	}
}

// collect reads frames, handing each to keep, until a frame for which
// isSentinel holds arrives (re-sending the sentinel every 20 ms), or the
// deadline passes.
func collect(t testing.TB, rx, tx *packetSocket, sentinel []byte, isSentinel func([]byte) bool, keep func([]byte)) {
	t.Helper()
	buf := make([]byte, 4096)
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if err := tx.send(sentinel); err != nil {
			t.Fatalf("send sentinel: %v", err)
		}
		for f := rx.recv(buf); f != nil; f = rx.recv(buf) {
			if isSentinel(f) {
				return
			}
			keep(f)
		}
	}
	t.Fatal("sentinel frame never arrived: the path is broken")
}
