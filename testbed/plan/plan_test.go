package plan

import (
	"bytes"
	"cmp"
	"flag"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/softmrc/softmrc/internal/pathtmpl"
	"github.com/softmrc/softmrc/internal/wire"
	nicconfig "github.com/softmrc/softmrc/nic/config"
	swconfig "github.com/softmrc/softmrc/switchd/config"
	"github.com/softmrc/softmrc/testbed/topo"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden")

func build(t testing.TB, preset string, o Options) *Plan {
	t.Helper()
	top, err := topo.Preset(preset)
	if err != nil {
		t.Fatal(err)
	}
	p, err := Build(top, o)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func dump(t testing.TB, p *Plan) []byte {
	t.Helper()
	files, err := p.Files(nil)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	for _, f := range files {
		if strings.HasSuffix(f.Path, ".nic.yaml") {
			// nic/config owns most of that file's defaults; TestNICConfig
			// checks the fields the plan sets.
			continue
		}
		fmt.Fprintf(&b, "==> %s <==\n%s", f.Path, f.Data)
	}
	return b.Bytes()
}

// TestGoldenClos2P pins the whole derivation for clos-2p: regenerate with
// go test ./testbed/plan -run Golden -update after an intended change and
// review the diff.
func TestGoldenClos2P(t *testing.T) {
	got := dump(t, build(t, "clos-2p", Options{RunDir: "/run/softmrc/c2p"}))
	path := filepath.Join("testdata", "clos-2p.golden")
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		gl, wl := strings.Split(string(got), "\n"), strings.Split(string(want), "\n")
		for i := 0; i < len(gl) && i < len(wl); i++ {
			if gl[i] != wl[i] {
				t.Fatalf("plan differs from %s at line %d:\n got: %s\nwant: %s", path, i+1, gl[i], wl[i])
			}
		}
		t.Fatalf("plan differs from %s in length: %d vs %d lines", path, len(gl), len(wl))
	}
}

func TestDeterministic(t *testing.T) {
	for _, preset := range topo.Presets() {
		a := dump(t, build(t, preset, Options{Prefix: "x1"}))
		b := dump(t, build(t, preset, Options{Prefix: "x1"}))
		if !bytes.Equal(a, b) {
			t.Errorf("%s: two builds differ", preset)
		}
	}
}

// TestInvariants checks the naming and addressing rules on every preset and
// that two prefixes share no namespace, pin or address.
func TestInvariants(t *testing.T) {
	for _, preset := range topo.Presets() {
		t.Run(preset, func(t *testing.T) {
			p := build(t, preset, Options{Prefix: "ab"})
			q := build(t, preset, Options{Prefix: "ab2"})
			ns := map[string]bool{}
			for _, n := range p.Namespaces {
				if ns[n] || !strings.HasPrefix(n, "ab-") {
					t.Errorf("namespace %q duplicated or without the prefix", n)
				}
				ns[n] = true
			}
			for _, n := range q.Namespaces {
				if ns[n] {
					t.Errorf("namespace %q in both runs", n)
				}
			}
			if p.RunID == q.RunID {
				t.Errorf("run ids collide: %d", p.RunID)
			}
			macs := map[wire.MAC]string{}
			ifs := map[string]bool{}
			fd := netip.MustParsePrefix("fd00::/8")
			for _, l := range p.Links {
				for _, e := range []End{l.A, l.B} {
					if len(e.Ifname) > 15 || len(e.Ifname) == 0 {
						t.Errorf("ifname %q too long", e.Ifname)
					}
					key := e.NS + "/" + e.Ifname
					if ifs[key] {
						t.Errorf("interface %s twice", key)
					}
					ifs[key] = true
					if hw := e.MAC; hw.IsMulticast() || hw[0]&2 == 0 {
						t.Errorf("%s: MAC %s is not locally administered unicast", key, e.MAC)
					}
					if o, dup := macs[e.MAC]; dup {
						t.Errorf("MAC %s on %s and %s", e.MAC, o, key)
					}
					macs[e.MAC] = key
				}
			}
			for _, h := range p.Hosts {
				if !fd.Contains(h.MgmtAddr.Addr()) {
					t.Errorf("%s mgmt %s outside fd00::/8", h.Name, h.MgmtAddr)
				}
				for _, hp := range h.Ports {
					if !fd.Contains(hp.Addr.Addr()) {
						t.Errorf("%s: %s outside fd00::/8", h.Name, hp.Addr)
					}
					if hp.DownlinkUSID != pathtmpl.DownlinkUSID(h.Downlink, wire.Plane(hp.Plane)) {
						t.Errorf("%s plane %d: downlink uSID %04x", h.Name, hp.Plane, hp.DownlinkUSID)
					}
				}
			}
			for _, s := range p.Switches {
				if int(s.USID&0xff) != s.Plane {
					t.Errorf("%s: uSID %04x lacks plane %d in the low byte", s.Name, s.USID, s.Plane)
				}
				if !netip.MustParsePrefix("5f00::/16").Contains(s.UN.Addr()) || s.UN.Bits() != 48 {
					t.Errorf("%s: uN %s", s.Name, s.UN)
				}
				if !strings.HasPrefix(s.PinDir, BPFRoot+"/ab-") {
					t.Errorf("%s: pin dir %s outside the run's glob", s.Name, s.PinDir)
				}
			}
		})
	}
}

// walk forwards a packet through the plan's FIBs the way the switch issue
// specifies (uN shift while the destination is the node's own uN, then LPM;
// ECMP groups fan out to every member) and returns every host port it can
// reach, as "host:ifname dst". It is the reference model for the FIB
// derivation.
func walk(t *testing.T, p *Plan, from *Host, plane int, dst netip.Addr) []string {
	t.Helper()
	sw := p.Switch(from.Ports[plane].Switch)
	var out []string
	var visit func(s *Switch, dst netip.Addr, hops int)
	visit = func(s *Switch, dst netip.Addr, hops int) {
		if hops > 8 {
			t.Fatalf("loop at %s dst %s", s.Name, dst)
		}
		for p.Mode == topo.ModeSRv6 && s.UN.Contains(dst) {
			a := dst.As16()
			copy(a[4:], append(a[6:16:16], 0, 0))
			dst = netip.AddrFrom16(a)
			if dst == netip.AddrFrom16([16]byte{0x5f, 0x00, a[2], a[3]}) {
				return // end of container: dropped
			}
		}
		var best *Route
		for i := range s.Routes {
			r := &s.Routes[i]
			if r.Dst.Contains(dst) && (best == nil || r.Dst.Bits() > best.Dst.Bits()) {
				best = r
			}
		}
		if best == nil {
			return
		}
		ports := []string{best.Port}
		if best.Group != "" {
			for _, g := range s.Groups {
				if g.Name == best.Group {
					ports = g.Ports
				}
			}
		}
		for _, pn := range ports {
			pt := s.Port(pn)
			node, ifname, _ := strings.Cut(pt.Peer, ":")
			if next := p.Switch(node); next != nil {
				visit(next, dst, hops+1)
			} else {
				out = append(out, node+":"+ifname+" "+dst.String())
			}
		}
	}
	visit(sw, dst, 0)
	return out
}

// TestFIBReachesEveryHost sends, in the reference model, from every host to
// every other host over every (plane, T1) path (srv6) or plane (ecmp).
func TestFIBReachesEveryHost(t *testing.T) {
	for _, preset := range []string{"pair", "clos-2p", "clos-4p"} {
		for _, mode := range []topo.Mode{topo.ModeSRv6, topo.ModeECMP} {
			top, _ := topo.Preset(preset)
			top.Mode = mode
			p, err := Build(top, Options{})
			if err != nil {
				t.Fatal(err)
			}
			paths := 0
			for i := range p.Hosts {
				src := &p.Hosts[i]
				tpl, err := p.Template(src)
				if err != nil {
					t.Fatal(err)
				}
				for _, dst := range p.Hosts {
					if dst.Name == src.Name {
						continue
					}
					for pl := 0; pl < p.Planes; pl++ {
						for j := 0; j < max(1, p.T1PerPlane); j++ {
							want := fmt.Sprintf("%s:p%d", dst.Name, pl)
							var da netip.Addr
							if mode == topo.ModeSRv6 {
								idx, ok := tpl.PeerIndex(dst.Name)
								if !ok {
									t.Fatalf("%s's template lacks %s", src.Name, dst.Name)
								}
								ps, err := tpl.Compile(idx)
								if err != nil {
									t.Fatal(err)
								}
								c, _ := ps.Dst(wire.MakeEV(wire.Plane(pl), uint8(j), 0))
								da = c.Netip()
								want += " " + dst.Ports[pl].Locator.Addr().String()
							} else {
								da = dst.Ports[pl].Addr.Addr()
								want += " " + da.String()
							}
							got := walk(t, p, src, pl, da)
							if len(got) == 0 {
								t.Fatalf("%s %s: %s -> %s plane %d T1 %d (%s): dropped", preset, mode, src.Name, dst.Name, pl, j, da)
							}
							for _, g := range got {
								if g != want {
									t.Errorf("%s %s: %s -> %s plane %d T1 %d: reached %q, want %q", preset, mode, src.Name, dst.Name, pl, j, g, want)
								}
							}
							paths++
						}
					}
				}
			}
			t.Logf("%s %s: %d paths checked", preset, mode, paths)
		}
	}
}

func TestBuildErrors(t *testing.T) {
	top, _ := topo.Preset("clos-2p")
	if _, err := Build(top, Options{Prefix: "Bad_Prefix"}); err == nil {
		t.Error("a bad --prefix was accepted")
	}
}

// TestNICConfig reads back every host's NIC config with nic/config and checks
// the fields the plan derives.
func TestNICConfig(t *testing.T) {
	cases := []struct {
		mode              topo.Mode
		nicPacing, pacing uint64 // NICPacingBps set; the pacing_bps expected
		dcqcnScale        float64
		ccScale           float64
		ackTimeout        time.Duration // NICRoCEAckTimeout; 0: mrc-nicd's default
		dcqcnTarget       string
	}{
		{topo.ModeSRv6, 0, 25e9, 0, 0, 0, ""},
		{topo.ModeECMP, 0, 25e9, 0, 0, 0, ""},
		// S1 (docs/lab.md): the NICs paced above the link so that the
		// switch port model is the bottleneck.
		{topo.ModeSRv6, 26.5e9, 26.5e9, 0, 0, 0, ""},
		// S7, S8: DCQCN slowed to the emulated links (roce.dcqcn_scale);
		// S7: NCCL's RoCE ACK timeout, MRC's CC slowed too (cc.scale).
		// S7's lossless RoCE plane: mlx5's DCQCN target rule.
		{topo.ModeECMP, 0, 25e9, 1250, 0, 4096 << 20 * time.Nanosecond, "mlx5"},
		{topo.ModeECMP, 0, 25e9, 0, 1250, 0, ""},
	}
	for _, tc := range cases {
		mode := tc.mode
		top, _ := topo.Preset("clos-2p")
		top.Mode = mode
		top.Host = topo.LinkSpec{CapacityBps: 25e9, Buffer: 1 << 20}
		p, err := Build(top, Options{RunDir: "/run/softmrc/x"})
		if err != nil {
			t.Fatal(err)
		}
		p.NICPacingBps = tc.nicPacing
		p.RoCEMTU = 4096
		p.NICThreads = 3
		p.NICDCQCNScale = tc.dcqcnScale
		p.NICCCScale = tc.ccScale
		p.NICRoCEAckTimeout = tc.ackTimeout
		p.NICDCQCNTarget = tc.dcqcnTarget
		files, err := p.Files(nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			if !strings.HasSuffix(f.Path, ".nic.yaml") {
				continue
			}
			c, err := nicconfig.Parse(f.Data, f.Path)
			if err != nil {
				t.Fatal(err)
			}
			h := p.Host(c.Host)
			if h == nil || h.NICConfig != f.Path || string(c.Mode) != string(mode) || len(c.Ports) != p.Planes {
				t.Fatalf("%s: %+v", f.Path, c)
			}
			if c.MTU != 4096 {
				t.Errorf("%s: mtu %d, want the plan's roce_mtu 4096", f.Path, c.MTU)
			}
			if c.ThreadCount() != 3 {
				t.Errorf("%s: threads %d, want the plan's nic_threads 3", f.Path, c.ThreadCount())
			}
			if want := cmp.Or(tc.ackTimeout, nicconfig.DefaultRoCEAckTimeout); c.RoCE.AckTimeout != want {
				t.Errorf("%s: roce.ack_timeout %v, want %v", f.Path, c.RoCE.AckTimeout, want)
			}
			if c.CC.Scale != tc.ccScale {
				t.Errorf("%s: cc.scale %v, want %v", f.Path, c.CC.Scale, tc.ccScale)
			}
			if c.RoCE.DCQCNTarget != tc.dcqcnTarget {
				t.Errorf("%s: roce.dcqcn_target %q, want %q", f.Path, c.RoCE.DCQCNTarget, tc.dcqcnTarget)
			}
			if c.RoCE.DCQCNScale != tc.dcqcnScale {
				t.Errorf("%s: roce.dcqcn_scale %v, want %v", f.Path, c.RoCE.DCQCNScale, tc.dcqcnScale)
			}
			if (mode == topo.ModeSRv6) != (c.Template == h.Template) {
				t.Errorf("%s: template %q", f.Path, c.Template)
			}
			for i, port := range c.Ports {
				hp := h.Ports[i]
				if port.Interface != hp.Ifname || port.Plane != hp.Plane || port.MAC != hp.MAC ||
					port.NeighborMAC != hp.GatewayMAC || port.Address != hp.Addr.Addr() ||
					port.Locator != hp.Locator || port.PacingBps != tc.pacing {
					t.Errorf("%s port %d: %+v, want %+v", f.Path, i, port, hp)
				}
			}
		}
	}
}

// switchPorts plans top and returns every port of every switch config file
// the plan writes, each file parsed as mrc-switchd parses it (a file it
// rejects fails the test), with the plan.
func switchPorts(t *testing.T, top *topo.Topology) (*Plan, []swconfig.Port) {
	t.Helper()
	p, err := Build(top, Options{RunDir: "/run/softmrc/x"})
	if err != nil {
		t.Fatal(err)
	}
	files, err := p.Files(nil)
	if err != nil {
		t.Fatal(err)
	}
	var ports []swconfig.Port
	for _, f := range files {
		if !strings.Contains(f.Path, "/switch/") || !strings.HasSuffix(f.Path, ".yaml") {
			continue
		}
		c, err := swconfig.Parse(f.Path, f.Data)
		if err != nil {
			t.Fatalf("mrc-switchd rejects %s: %v", f.Path, err)
		}
		for _, pt := range c.Ports {
			if pt.Model == nil {
				t.Fatalf("%s port %s: no model", f.Path, pt.Name)
			}
			ports = append(ports, pt)
		}
	}
	return p, ports
}

// TestHostECN: links.host.host_ecn reaches the T0 downlinks' port models in
// the switch config files (which mrc-switchd accepts), and only them.
func TestHostECN(t *testing.T) {
	for _, on := range []bool{false, true} {
		top, _ := topo.Preset("clos-2p")
		top.Host = topo.LinkSpec{CapacityBps: 100e6, Buffer: 128 << 10, ECNThreshold: 16 << 10, HostECN: on}
		top.Fabric = topo.LinkSpec{CapacityBps: 400e6, Buffer: 128 << 10, ECNThreshold: 16 << 10}
		p, ports := switchPorts(t, top)
		hostPorts := 0
		for _, pt := range ports {
			want := on && pt.Role == swconfig.RoleHost
			if pt.Model.HostECN != want {
				t.Errorf("host_ecn=%v: port %s (%s): HostECN %v, want %v", on, pt.Name, pt.Role, pt.Model.HostECN, want)
			}
			if pt.Role == swconfig.RoleHost {
				hostPorts++
			}
		}
		if hostPorts != p.Planes*p.T0PerPlane*p.HostsPerT0 {
			t.Errorf("host_ecn=%v: %d host ports in the switch files, want one per host and plane", on, hostPorts)
		}
	}
}

// TestREDMarkingReachesSwitches: links' ecn_max and ecn_pmax reach every
// port model of their kind in the switch config files, which mrc-switchd
// accepts; a link without them keeps step marking.
func TestREDMarkingReachesSwitches(t *testing.T) {
	top, _ := topo.Preset("clos-2p")
	top.Host = topo.LinkSpec{CapacityBps: 100e6, Buffer: 1 << 20, ECNThreshold: 16 << 10, ECNMax: 512 << 10, ECNPMax: 0.01, HostECN: true}
	top.Fabric = topo.LinkSpec{CapacityBps: 400e6, Buffer: 128 << 10, ECNThreshold: 16 << 10}
	p, ports := switchPorts(t, top)
	red := 0
	for _, pt := range ports {
		m := pt.Model
		host := pt.Role == swconfig.RoleHost
		if host && (m.ECNMax != 512<<10 || m.ECNPMax != 0.01) || !host && (m.ECNMax != 0 || m.ECNPMax != 0) {
			t.Errorf("port %s (%s): ecn_max %d, ecn_pmax %v", pt.Name, pt.Role, m.ECNMax, m.ECNPMax)
		}
		if host {
			red++
		}
	}
	if red != p.Planes*p.T0PerPlane*p.HostsPerT0 {
		t.Errorf("%d host ports with RED marking, want one per host and plane", red)
	}
}

// TestHostLinkDelay: a host link's delay becomes the port delay of the
// host's mrc-nicd when the plan runs NICs (no netem on the veth: this
// kernel has none), netem on the veth otherwise; a fabric link's delay
// always stays on the link (netem, or netns.ErrNoNetem).
func TestHostLinkDelay(t *testing.T) {
	for _, tc := range []struct {
		name             string
		nics             bool
		host, fabric     time.Duration
		wantNIC          time.Duration // every NIC port's delay
		wantHostLinkUS   int64
		wantFabricLinkUS int64
	}{
		{name: "NICs hold the host link delay", nics: true, host: 5 * time.Millisecond, wantNIC: 5 * time.Millisecond},
		{name: "kernel hosts: netem on the host link", host: 5 * time.Millisecond, wantHostLinkUS: 5000},
		{name: "fabric delay stays on the link", nics: true, fabric: 2 * time.Millisecond, wantFabricLinkUS: 2000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			top, _ := topo.Preset("clos-2p")
			top.NICs = tc.nics
			top.Host.Delay, top.Fabric.Delay = tc.host, tc.fabric
			p, err := Build(top, Options{RunDir: "/run/softmrc/x"})
			if err != nil {
				t.Fatal(err)
			}
			for _, l := range p.Links {
				want := map[string]int64{LinkHost: tc.wantHostLinkUS, LinkFabric: tc.wantFabricLinkUS}[l.Kind]
				if l.Kind != LinkMgmt && l.DelayUS != want {
					t.Errorf("%s link %s: delay_us %d, want %d", l.Kind, l.Name, l.DelayUS, want)
				}
			}
			for i := range p.Hosts {
				c := p.NICConfig(&p.Hosts[i])
				if err := c.Validate(); err != nil {
					t.Fatalf("%s: mrc-nicd config invalid: %v", p.Hosts[i].Name, err)
				}
				for _, port := range c.Ports {
					if port.Delay != tc.wantNIC {
						t.Errorf("%s port %s: delay %v, want %v", p.Hosts[i].Name, port.Name, port.Delay, tc.wantNIC)
					}
				}
			}
		})
	}
}

// nic_path_probes reaches the plan and every NIC config, so that
// `mrc-mapper map --dir` has loops to read on a testbed the user brought
// up (before, each host's config had to be edited and its daemon
// restarted by hand).
func TestNICPathProbes(t *testing.T) {
	base := "planes: 2\nt0_per_plane: 2\nt1_per_plane: 2\nhosts_per_t0: 1\nnics: true\n"
	for _, tc := range []struct {
		line string
		want time.Duration
	}{{"", 0}, {"nic_path_probes: 5ms\n", 5 * time.Millisecond}, {"nic_path_probes: 1s\n", time.Second}} {
		top, err := topo.Parse("t.yaml", []byte(base+tc.line))
		if err != nil {
			t.Fatal(err)
		}
		p, err := Build(top, Options{RunDir: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		for i := range p.Hosts {
			if got := p.NICConfig(&p.Hosts[i]).PathProbes; got != tc.want {
				t.Errorf("%q: %s's path_probes %v, want %v", tc.line, p.Hosts[i].Name, got, tc.want)
			}
		}
	}
}
