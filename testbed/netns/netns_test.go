package netns

import (
	"compress/gzip"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/softmrc/softmrc/internal/ethtool"
	"github.com/softmrc/softmrc/testbed/plan"
	"github.com/softmrc/softmrc/testbed/topo"
)

func needRoot(t *testing.T) {
	t.Helper()
	if err := Supported(); err != nil {
		if os.Getenv("MRC_TEST_REQUIRE_PRIV") == "1" {
			t.Fatalf("MRC_TEST_REQUIRE_PRIV=1 but: %v", err)
		}
		t.Skipf("skipping: %v", err)
	}
}

func prefix() string {
	b := make([]byte, 3)
	rand.Read(b)
	return "n" + hex.EncodeToString(b)
}

func TestCreateDoDelete(t *testing.T) {
	needRoot(t)
	name := prefix() + "-x"
	if err := Create(name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { Delete(name) })
	if !Exists(name) {
		t.Fatal("namespace missing after Create")
	}
	if err := Create(name); err == nil {
		t.Error("Create of an existing name succeeded")
	}
	var inside, outside string
	if err := Do(name, func() error {
		b, err := os.Readlink("/proc/thread-self/ns/net")
		inside = b
		return err
	}); err != nil {
		t.Fatal(err)
	}
	outside, _ = os.Readlink("/proc/self/ns/net")
	if inside == outside || inside == "" {
		t.Errorf("Do ran in %q, the test is in %q", inside, outside)
	}
	h, err := Handle(name)
	if err != nil {
		t.Fatal(err)
	}
	lo, err := h.LinkByName("lo")
	h.Close()
	if err != nil || lo.Attrs().Flags&1 == 0 {
		t.Errorf("lo not up in the new namespace: %v", err)
	}
	if err := Delete(name); err != nil {
		t.Fatal(err)
	}
	if Exists(name) {
		t.Error("namespace still there after Delete")
	}
	if err := Delete(name); err != nil {
		t.Errorf("second Delete: %v", err)
	}
}

// TestApplyPair applies the pair preset without any switch daemon and
// checks what the plan says against the kernel: interfaces, MACs, MTU,
// addresses, GRO, offloads, the bridge; then deletes it all.
func TestApplyPair(t *testing.T) {
	needRoot(t)
	top, _ := topo.Preset("pair")
	top.Mode = topo.ModeECMP
	p, err := plan.Build(top, plan.Options{Prefix: prefix(), RunDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, ns := range p.Namespaces {
			Delete(ns)
		}
		if left, _ := List(p.Prefix + "-"); len(left) > 0 {
			t.Errorf("left behind: %v", left)
		}
	})
	if err := Apply(p); err != nil {
		t.Fatal(err)
	}
	for _, l := range p.Links {
		for _, e := range []plan.End{l.A, l.B} {
			h, err := Handle(e.NS)
			if err != nil {
				t.Fatal(err)
			}
			lk, err := h.LinkByName(e.Ifname)
			h.Close()
			if err != nil {
				t.Errorf("%s/%s: %v", e.NS, e.Ifname, err)
				continue
			}
			a := lk.Attrs()
			if a.HardwareAddr.String() != e.MAC.String() || a.MTU != p.MTU || a.OperState != netlink.OperUp {
				t.Errorf("%s/%s: mac %s mtu %d state %s; want %s %d up", e.NS, e.Ifname, a.HardwareAddr, a.MTU, a.OperState, e.MAC, p.MTU)
			}
			if l.Kind == plan.LinkMgmt {
				continue
			}
			Do(e.NS, func() error {
				on, err := ethtool.GRO(e.Ifname)
				if err != nil || !on {
					t.Errorf("%s/%s: GRO %v %v, want on", e.NS, e.Ifname, on, err)
				}
				return nil
			})
		}
	}
	h0 := p.Hosts[0]
	h, _ := Handle(h0.NS)
	defer h.Close()
	lk, _ := h.LinkByName("p0")
	addrs, _ := h.AddrList(lk, netlink.FAMILY_V6)
	found := false
	for _, a := range addrs {
		found = found || a.IP.String() == h0.Ports[0].Addr.Addr().String()
	}
	if !found {
		t.Errorf("%s p0 lacks %s: %v", h0.Name, h0.Ports[0].Addr, addrs)
	}
	routes, _ := h.RouteList(lk, netlink.FAMILY_V6)
	found = false
	for _, r := range routes {
		found = found || (r.Dst != nil && r.Dst.String() == plan.PlaneSubnet(p.RunID, 0).String())
	}
	if !found {
		t.Errorf("ecmp host route to %s missing: %v", plan.PlaneSubnet(p.RunID, 0), routes)
	}
}

// TestNextCSIDEncap installs the uN route the kernel dataplane uses and reads
// it back with iproute2 (the netlink library cannot decode flavours).
func TestNextCSIDEncap(t *testing.T) {
	needRoot(t)
	e := &nextCSIDEncap{blockBits: 32, nodeBits: 16}
	b, _ := e.Encode()
	// ACTION(End=1) then FLAVORS{OPERATION=1<<4, LCBLOCK_BITS=32, LCNODE_FN_BITS=16}.
	want := "0800010001000000" + "1c000b80" + "0800010010000000" + "0500020020000000" + "0500030010000000"
	if got := hex.EncodeToString(b); got != want {
		t.Errorf("encoding\n got %s\nwant %s", got, want)
	}
	ip, err := exec.LookPath("ip")
	if err != nil {
		t.Skip("skipping the read-back: iproute2 (ip) not installed")
	}
	top, _ := topo.Preset("pair")
	top.Dataplane = topo.DataplaneKernel
	p, _ := plan.Build(top, plan.Options{Prefix: prefix(), RunDir: t.TempDir()})
	t.Cleanup(func() {
		for _, ns := range p.Namespaces {
			Delete(ns)
		}
	})
	err = Apply(p)
	switch has, known := kernelOption("CONFIG_IPV6_SEG6_LWTUNNEL"); {
	case known && !has && !errors.Is(err, ErrNoSRv6):
		t.Fatalf("kernel built without CONFIG_IPV6_SEG6_LWTUNNEL: Apply gave %v, want ErrNoSRv6", err)
	case errors.Is(err, ErrNoSRv6):
		if !strings.Contains(err.Error(), "dataplane: xdp") {
			t.Errorf("ErrNoSRv6 without what to do instead: %v", err)
		}
		t.Skipf("skipping the read-back: %v", err)
	case err != nil:
		t.Fatal(err)
	}
	out, err := exec.Command(ip, "-n", p.Switches[0].NS, "-6", "route", "show", p.Switches[0].UN.String()).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "seg6local action End flavors next-csid lblen 32 nflen 16") {
		t.Errorf("kernel has %q (%v)", out, err)
	}
}

// TestDelay: a link delay is a netem qdisc on both ends, or, on a kernel
// without sch_netem (like the development VM), the documented ErrNoNetem
// with what to do: a fabric link's error says delay works on host links
// only. (A host link with NICs needs no netem: plan.TestHostLinkDelay.)
func TestDelay(t *testing.T) {
	needRoot(t)
	for _, tc := range []struct {
		name, preset string
		nics         bool
		set          func(*topo.Topology)
		hint         string
	}{
		{name: "host link, kernel hosts", preset: "pair", set: func(t *topo.Topology) { t.Host.Delay = 2 * time.Millisecond }, hint: "set nics: true"},
		{name: "fabric link", preset: "clos-2p", nics: true, set: func(t *topo.Topology) { t.Fabric.Delay = 2 * time.Millisecond }, hint: "host links only"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			top, _ := topo.Preset(tc.preset)
			top.NICs = tc.nics
			tc.set(top)
			p, err := plan.Build(top, plan.Options{Prefix: prefix(), RunDir: t.TempDir()})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				for _, ns := range p.Namespaces {
					Delete(ns)
				}
			})
			err = Apply(p)
			if errors.Is(err, ErrNoNetem) {
				if !strings.Contains(err.Error(), tc.hint) {
					t.Fatalf("ErrNoNetem without the hint %q: %v", tc.hint, err)
				}
				t.Logf("kernel lacks netem, as reported: %v", err)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for _, l := range p.Links {
				if l.DelayUS == 0 {
					continue
				}
				h, _ := Handle(l.A.NS)
				defer h.Close()
				lk, _ := h.LinkByName(l.A.Ifname)
				qs, _ := h.QdiscList(lk)
				for _, q := range qs {
					if q.Type() == "netem" {
						return
					}
				}
				t.Errorf("no netem qdisc on %s/%s: %v", l.A.NS, l.A.Ifname, qs)
				return
			}
			t.Fatal("no link carries the delay")
		})
	}
}

// kernelOption reads option (CONFIG_…) from /proc/config.gz: whether it is
// built in or a module, and whether the kernel publishes its config at all.
func kernelOption(option string) (has, known bool) {
	f, err := os.Open("/proc/config.gz")
	if err != nil {
		return false, false
	}
	defer f.Close()
	z, err := gzip.NewReader(f)
	if err != nil {
		return false, false
	}
	b, err := io.ReadAll(z)
	if err != nil {
		return false, false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, option+"="); ok {
			return v == "y" || v == "m", true
		}
	}
	return false, true // "# CONFIG_… is not set", or not even offered
}
