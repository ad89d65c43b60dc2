package dataplane

import (
	"errors"
	"net"
	"net/netip"
	"os"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/rlimit"
)

// XDP return codes.
const (
	xdpAborted  = 0
	xdpDrop     = 1
	xdpPass     = 2
	xdpTX       = 3
	xdpRedirect = 4
)

// Test topology: block 5f00:1::/32, own uN 0x0100; ports 0..5 all point at lo
// (ifindex 1; BPF_PROG_RUN never really redirects, but the devmap slot must
// exist), each with a distinct neighbour MAC so the output frame tells which
// port was chosen. BPF_PROG_RUN frames arrive on lo, mapped to ingressPort.
const (
	loIfindex   = 1
	ingressPort = PortID(5)
	ownUSID     = 0x0100
)

var testBlock = netip.MustParsePrefix("5f00:1::/32")

func neighMAC(p PortID) [6]byte { return [6]byte{0x02, 0xaa, 0, 0, 0, byte(p)} }
func ownMAC(p PortID) [6]byte   { return [6]byte{0x02, 0xbb, 0, 0, 0, byte(p)} }

func requireRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("skipping: loading XDP programs and BPF_PROG_RUN need root (CAP_BPF + CAP_NET_ADMIN)")
	}
	if err := rlimit.RemoveMemlock(); err != nil {
		t.Skipf("skipping: cannot lift RLIMIT_MEMLOCK for BPF maps: %v", err)
	}
}

type harness struct {
	t testing.TB
	d *Dataplane
}

// newHarness loads a fresh switch with the test topology:
//
//	5f00:1:200::/48 -> port 1 (fabric)     5f00:1:300::/48 -> port 2 (fabric)
//	5f00:1:c001::/48 -> port 4 (host)      fd00:9::/32 -> ECMP group 7 = ports 0..3
//	fd00:4::/32 -> port 4 (host)
func newHarness(t testing.TB) *harness {
	t.Helper()
	return newHarnessOf(t, nil)
}

// newHarnessOf is newHarness for the switch object spec (nil: the embedded one).
func newHarnessOf(t testing.TB, spec *ebpf.CollectionSpec) *harness {
	t.Helper()
	requireRoot(t)
	var d *Dataplane
	var err error
	if spec == nil {
		d, err = Load(LoadOptions{})
	} else {
		d, err = loadSpec(spec, LoadOptions{})
	}
	if err != nil {
		if errors.Is(err, ebpf.ErrNotSupported) {
			t.Skipf("skipping: kernel lacks a BPF feature the switch needs: %v", err)
		}
		t.Fatalf("Load: %v", err)
	}
	t.Cleanup(func() { d.Destroy() })
	h := &harness{t: t, d: d}
	must(t, d.SetSwitchConfig(SwitchConfig{BlockBits: 32, Block: testBlock, OwnUSIDs: []uint16{ownUSID}}))
	for p := PortID(0); p <= 5; p++ {
		role := RoleFabric
		if p == 4 {
			role = RoleHostFacing
		}
		n, o := neighMAC(p), ownMAC(p)
		must(t, d.SetPort(p, Port{Ifindex: loIfindex, NeighMAC: net.HardwareAddr(n[:]), OwnMAC: net.HardwareAddr(o[:]), Role: role}))
	}
	// Every SetPort mapped lo to itself; the frames of BPF_PROG_RUN arrive on lo.
	must(t, d.objs.IfindexPort.Put(uint32(loIfindex), uint32(ingressPort)))
	must(t, d.AddRoute(netip.MustParsePrefix("5f00:1:200::/48"), NextHop{Port: 1}))
	must(t, d.AddRoute(netip.MustParsePrefix("5f00:1:300::/48"), NextHop{Port: 2}))
	must(t, d.AddRoute(netip.MustParsePrefix("5f00:1:c001::/48"), NextHop{Port: 4}))
	must(t, d.AddRoute(netip.MustParsePrefix("fd00:4::/32"), NextHop{Port: 4}))
	must(t, d.SetECMPGroup(7, []PortID{0, 1, 2, 3}))
	must(t, d.AddRoute(netip.MustParsePrefix("fd00:9::/32"), NextHop{Group: true, GroupID: 7}))
	return h
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// run passes one frame through the switch program (a copy: the kernel never
// sees the caller's buffer twice) and returns the verdict and output frame.
func (h *harness) run(frame []byte) (uint32, []byte) {
	h.t.Helper()
	in := append([]byte(nil), frame...)
	ro := &ebpf.RunOptions{Data: in, DataOut: make([]byte, len(in)+256)}
	ret, err := h.d.SwitchProgram().Run(ro)
	if err != nil {
		h.t.Fatalf("BPF_PROG_RUN: %v", err)
	}
	return ret, ro.DataOut
}

func (h *harness) counters(p PortID) PortCounters {
	h.t.Helper()
	c, err := h.d.Counters(p)
	if err != nil {
		h.t.Fatal(err)
	}
	return c
}

// setModel sets the port model of port p, keeping its other settings.
func (h *harness) setModel(p PortID, role Role, m PortModel) {
	h.t.Helper()
	n, o := neighMAC(p), ownMAC(p)
	must(h.t, h.d.SetPort(p, Port{Ifindex: loIfindex, NeighMAC: net.HardwareAddr(n[:]), OwnMAC: net.HardwareAddr(o[:]), Role: role, Model: m}))
	must(h.t, h.d.objs.IfindexPort.Put(uint32(loIfindex), uint32(ingressPort)))
}
