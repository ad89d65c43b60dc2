package e2e

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"github.com/softmrc/softmrc/internal/nsthread"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/features"
	"golang.org/x/sys/unix"
)

// requirements skips the test when this machine cannot run it, saying why,
// and mounts bpffs at /sys/fs/bpf when it is missing (as CI does).
func requirements(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("skipping: netns integration test (-short)")
	}
	if os.Geteuid() != 0 {
		t.Skip("skipping: needs root (network namespaces, XDP, bpffs)")
	}
	for _, tool := range []string{"ip", "nsenter", "ethtool"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("skipping: %s not found", tool)
		}
	}
	if err := features.HaveProgramType(ebpf.XDP); err != nil {
		t.Skipf("skipping: kernel lacks XDP: %v", err)
	}
	var st unix.Statfs_t
	if err := unix.Statfs("/sys/fs/bpf", &st); err != nil || st.Type != unix.BPF_FS_MAGIC {
		if err := unix.Mount("bpf", "/sys/fs/bpf", "bpf", 0, "mode=0700"); err != nil {
			t.Skipf("skipping: no bpffs at /sys/fs/bpf and mounting one failed (kernel lacks bpffs?): %v", err)
		}
	}
}

func run(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command(args[0], args[1:]...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// uniquePrefix is a short random name prefix (ifnames are at most 15 bytes).
func uniquePrefix() string {
	b := make([]byte, 2)
	rand.Read(b)
	return "sw" + hex.EncodeToString(b)
}

// topo is a set of namespaces joined by veths, all removed in t.Cleanup.
type topo struct {
	t   *testing.T
	pfx string
}

func newTopo(t *testing.T) *topo { return &topo{t: t, pfx: uniquePrefix()} }

// ns creates namespace pfx+name and returns its full name.
func (tp *topo) ns(name string) string {
	n := tp.pfx + name
	run(tp.t, "ip", "netns", "add", n)
	tp.t.Cleanup(func() { exec.Command("ip", "netns", "del", n).Run() })
	run(tp.t, "ip", "-n", n, "link", "set", "lo", "up")
	return n
}

// veth joins a in namespace na with b in namespace nb; names get the prefix.
func (tp *topo) veth(na, a, nb, b string) (string, string) {
	a, b = tp.pfx+a, tp.pfx+b
	run(tp.t, "ip", "link", "add", a, "netns", na, "type", "veth", "peer", "name", b, "netns", nb)
	run(tp.t, "ip", "-n", na, "link", "set", a, "up")
	run(tp.t, "ip", "-n", nb, "link", "set", b, "up")
	return a, b
}

func mac(t *testing.T, ns, dev string) net.HardwareAddr {
	var hw net.HardwareAddr
	if err := inNetns(ns, func() error {
		ifc, err := net.InterfaceByName(dev)
		if err != nil {
			return err
		}
		hw = ifc.HardwareAddr
		return nil
	}); err != nil {
		t.Fatalf("MAC of %s in %s: %v", dev, ns, err)
	}
	return hw
}

// inNetns runs f on a locked OS thread inside namespace ns.
func inNetns(ns string, f func() error) error { return nsthread.Named(ns, f) }

// packetSock is an AF_PACKET socket bound to one interface in a namespace.
type packetSock struct {
	fd      int
	ifindex int
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

func openPacket(t *testing.T, ns, dev string) *packetSock {
	t.Helper()
	var ps *packetSock
	err := inNetns(ns, func() error {
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
			return fmt.Errorf("bind to %s: %w", dev, err)
		}
		tv := unix.Timeval{Usec: 50_000}
		unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
		unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF, 4<<20)
		ps = &packetSock{fd: fd, ifindex: ifc.Index}
		return nil
	})
	if err != nil {
		t.Fatalf("packet socket on %s in %s: %v", dev, ns, err)
	}
	t.Cleanup(func() { unix.Close(ps.fd) })
	return ps
}

func (ps *packetSock) send(frame []byte) error {
	var addr [8]byte
	copy(addr[:], frame[:6])
	return unix.Sendto(ps.fd, frame, 0, &unix.SockaddrLinklayer{Ifindex: ps.ifindex, Halen: 6, Addr: addr})
}

// capture collects the test frames (those carrying the run's magic) that
// arrive on a packet socket, by sequence number.
type capture struct {
	ps    *packetSock
	magic [8]byte
	mu    sync.Mutex
	seen  map[uint32][]byte
	dups  int
	stop  chan struct{}
	done  chan struct{}
}

func startCapture(t *testing.T, ps *packetSock, magic [8]byte) *capture {
	c := &capture{ps: ps, magic: magic, seen: map[uint32][]byte{}, stop: make(chan struct{}), done: make(chan struct{})}
	go c.loop()
	t.Cleanup(c.close)
	return c
}

func (c *capture) close() {
	select {
	case <-c.stop:
	default:
		close(c.stop)
	}
	<-c.done
}

func (c *capture) loop() {
	defer close(c.done)
	buf := make([]byte, 4096)
	for {
		select {
		case <-c.stop:
			return
		default:
		}
		n, from, err := unix.Recvfrom(c.ps.fd, buf, 0)
		if err != nil {
			continue // timeout: look at stop again
		}
		if ll, ok := from.(*unix.SockaddrLinklayer); ok && ll.Pkttype == unix.PACKET_OUTGOING {
			continue
		}
		seq, ok := parseTestFrame(buf[:n], c.magic)
		if !ok {
			continue
		}
		c.mu.Lock()
		if _, dup := c.seen[seq]; dup {
			c.dups++
		} else {
			c.seen[seq] = append([]byte(nil), buf[:n]...)
		}
		c.mu.Unlock()
	}
}

func (c *capture) frame(seq uint32) []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.seen[seq]
}

func (c *capture) duplicates() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.dups
}

func (c *capture) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.seen)
}

// waitFor polls cond every 10 ms until it holds or timeout passes.
func waitFor(timeout time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
}
