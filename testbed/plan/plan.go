// Package plan derives, deterministically, everything a testbed run makes
// from a topology: namespaces, veths, MACs, addresses, uSIDs, the static FIB
// of every switch, mrc-switchd and NIC configuration and the EV→uSID
// templates. The same topology, prefix and run directory always give the same
// plan, byte for byte; nothing here touches the system.
//
// Naming (prefix P, plane p, T0 k, T1 j, host i with id i+1, downlink d):
//
//	namespaces   P-h<i>, P-p<p>-t0-<k>, P-p<p>-t1-<j>, P-mgmt
//	host ports   p<p> (plane p), mgmt0
//	T0 ports     d<d> (host downlink d), u<j> (uplink to T1 j)
//	T1 ports     d<k> (to T0 k)
//	links        <nodeA>--<nodeB>, e.g. h0--p0-t0-0, p0-t0-0--p0-t1-1, h0--mgmt
//
// Interfaces live only inside the run's namespaces (veths are created
// straight into them), so short names cannot collide between runs.
package plan

import (
	"fmt"
	"hash/fnv"
	"net/netip"
	"path/filepath"
	"time"

	"github.com/softmrc/softmrc/internal/pathtmpl"
	"github.com/softmrc/softmrc/internal/wire"
	"github.com/softmrc/softmrc/testbed/topo"
)

// BPFRoot is where runs pin BPF objects; a run owns BPFRoot/<prefix>-*.
const BPFRoot = "/sys/fs/bpf/softmrc"

// Node kinds, also the MAC kind field.
const (
	KindHost = "host"
	KindT0   = "t0"
	KindT1   = "t1"
	KindMgmt = "mgmt"
)

// Link kinds.
const (
	LinkHost   = "host"   // NIC port - T0 downlink
	LinkFabric = "fabric" // T0 uplink - T1
	LinkMgmt   = "mgmt"   // host mgmt0 - management bridge
)

// Plan is the derived testbed. Slices are in creation order.
type Plan struct {
	Prefix    string         `yaml:"prefix"`
	RunID     uint16         `yaml:"run_id"`
	RunDir    string         `yaml:"run_dir"`
	Mode      topo.Mode      `yaml:"mode"`
	Dataplane topo.Dataplane `yaml:"dataplane"`
	Block     netip.Prefix   `yaml:"usid_block"`
	MTU       int            `yaml:"mtu"`
	// RoCEMTU is every NIC's RoCE MTU (mrc-nicd's mtu:).
	RoCEMTU    int  `yaml:"roce_mtu"`
	Planes     int  `yaml:"planes"`
	T0PerPlane int  `yaml:"t0_per_plane"`
	T1PerPlane int  `yaml:"t1_per_plane"`
	HostsPerT0 int  `yaml:"hosts_per_t0"`
	NICs       bool `yaml:"nics"`
	// NICThreads is every NIC's threads: (engine threads) and the queues of
	// each NIC-T0 veth (0: one).
	NICThreads int `yaml:"nic_threads,omitempty"`
	// NICPathProbes is every NIC's path_probes: (0: off).
	NICPathProbes time.Duration `yaml:"nic_path_probes,omitempty"`
	// HostCapacityBps is the NIC-T0 link capacity (0 = unlimited); NICs
	// pace their ports to it.
	HostCapacityBps uint64 `yaml:"host_capacity_bps,omitempty"`
	// NICPacingBps, when set, replaces HostCapacityBps as the NICs'
	// pacing_bps. mrc-nicd's engine paces each port at its pacing_bps
	// (nic/daemon EngineConfig; until 2026-12-03 at 95 % of the slowest),
	// so with pacing = capacity the NIC, not the link, binds a sender; a
	// bandwidth experiment sets this above the capacity so that the switch
	// port model is the bottleneck (docs/lab.md, S1).
	NICPacingBps uint64 `yaml:"nic_pacing_bps,omitempty"`
	// NICDCQCNScale, when set, is every NIC's roce.dcqcn_scale (nic/config
	// RoCEOptions): DCQCN slowed to the emulated links' speed (mrc-lab's
	// topology.dcqcn_scale, S7 and S8).
	NICDCQCNScale float64 `yaml:"nic_dcqcn_scale,omitempty"`
	// NICCCScale, when set, is every NIC's cc.scale (nic/config CC): MRC's
	// congestion control slowed to the emulated links' speed as DCQCN is
	// by NICDCQCNScale (mrc-lab's topology.cc_scale, S7).
	NICCCScale float64 `yaml:"nic_cc_scale,omitempty"`
	// NICRoCEAckTimeout, when set, is every NIC's roce.ack_timeout (the
	// RoCE QPs' local ACK timeout; mrc-lab's topology.roce_ack_timeout).
	NICRoCEAckTimeout time.Duration `yaml:"nic_roce_ack_timeout,omitempty"`
	// NICDCQCNTarget, when set, is every NIC's roce.dcqcn_target (DCQCN's
	// target-rate rule, "paper" or "mlx5"; mrc-lab's topology.dcqcn_target).
	NICDCQCNTarget string `yaml:"nic_dcqcn_target,omitempty"`
	// PinGlob is what the run may own in bpffs (removed by down).
	PinGlob    string   `yaml:"pin_glob"`
	Namespaces []string `yaml:"namespaces"`
	Mgmt       Mgmt     `yaml:"mgmt"`
	Switches   []Switch `yaml:"switches"`
	Hosts      []Host   `yaml:"hosts"`
	Links      []Link   `yaml:"links"`
}

// Mgmt is the out-of-band management network: one bridge in its own
// namespace, one veth per host.
type Mgmt struct {
	NS     string       `yaml:"ns"`
	Bridge string       `yaml:"bridge"`
	MAC    wire.MAC     `yaml:"mac"`
	Subnet netip.Prefix `yaml:"subnet"`
}

// Switch is one T0 or T1 and its mrc-switchd configuration.
type Switch struct {
	Name  string `yaml:"name"`
	NS    string `yaml:"ns"`
	Role  string `yaml:"role"` // t0 | t1
	Plane int    `yaml:"plane"`
	Index int    `yaml:"index"`
	// USID is the switch's uN uSID; UN its /48 (block + uSID).
	USID    wire.USID    `yaml:"usid"`
	UN      netip.Prefix `yaml:"un"`
	Ports   []Port       `yaml:"ports"`
	Routes  []Route      `yaml:"routes"`
	Groups  []Group      `yaml:"groups,omitempty"`
	Config  string       `yaml:"config"`   // mrc-switchd config file
	CtlSock string       `yaml:"ctl_sock"` // mrc-switchd control socket
	PinDir  string       `yaml:"pin_dir"`
	Log     string       `yaml:"log"`
}

// Port is one switch interface.
type Port struct {
	Ifname string `yaml:"ifname"`
	// Role is "host" for T0 downlinks (MRC never ECN-marks there and trims
	// to TRIMMED_LASTHOP) and "fabric" otherwise.
	Role    string     `yaml:"role"`
	MAC     wire.MAC   `yaml:"mac"`
	Peer    string     `yaml:"peer"` // node:ifname at the other end
	PeerMAC wire.MAC   `yaml:"peer_mac"`
	PeerLL  netip.Addr `yaml:"peer_ll"` // the peer's EUI-64 link-local address
	Link    string     `yaml:"link"`
	Model   PortModel  `yaml:"model"`
}

// PortModel is the egress model handed to the switch (zero = off).
type PortModel struct {
	CapacityBps   uint64  `yaml:"capacity_bps,omitempty"`
	ECNThreshold  uint64  `yaml:"ecn_threshold,omitempty"`
	ECNMax        uint64  `yaml:"ecn_max,omitempty"`
	ECNPMax       float64 `yaml:"ecn_pmax,omitempty"`
	TrimThreshold uint64  `yaml:"trim_threshold,omitempty"`
	Buffer        uint64  `yaml:"buffer,omitempty"`
	HostECN       bool    `yaml:"host_ecn,omitempty"`
}

// Route is one FIB entry: to a port (neighbour = that port's peer) or to an
// ECMP group.
type Route struct {
	Dst   netip.Prefix `yaml:"dst"`
	Port  string       `yaml:"port,omitempty"`
	Group string       `yaml:"group,omitempty"`
	Why   string       `yaml:"why"`
}

// Group is an ECMP group over ports.
type Group struct {
	Name  string   `yaml:"name"`
	Ports []string `yaml:"ports"`
}

// Host is one server with a NIC port per plane.
type Host struct {
	Name      string       `yaml:"name"`
	ID        int          `yaml:"id"` // 1-based: the <host> field of addresses
	NS        string       `yaml:"ns"`
	T0        int          `yaml:"t0"`       // T0 index in every plane
	Downlink  int          `yaml:"downlink"` // downlink index on that T0
	Ports     []HostPort   `yaml:"ports"`
	MgmtIf    string       `yaml:"mgmt_if"`
	MgmtMAC   wire.MAC     `yaml:"mgmt_mac"`
	MgmtAddr  netip.Prefix `yaml:"mgmt_addr"`
	NICConfig string       `yaml:"nic_config"`
	Template  string       `yaml:"template"`
	Log       string       `yaml:"log"`
}

// HostPort is a NIC port (one per plane).
type HostPort struct {
	Plane  int          `yaml:"plane"`
	Ifname string       `yaml:"ifname"`
	MAC    wire.MAC     `yaml:"mac"`
	Addr   netip.Prefix `yaml:"addr"` // inner address, fd00:<run>:<plane>:<id>::1/64
	// Locator is the /48 the port owns after its T0 shifted: block +
	// downlink uSID.
	Locator      netip.Prefix `yaml:"locator"`
	DownlinkUSID wire.USID    `yaml:"downlink_usid"`
	Switch       string       `yaml:"switch"`      // its T0
	SwitchPort   string       `yaml:"switch_port"` // the T0 downlink
	GatewayMAC   wire.MAC     `yaml:"gateway_mac"`
	GatewayLL    netip.Addr   `yaml:"gateway_ll"`
	Link         string       `yaml:"link"`
	// DelayUS is the host link's one-way delay, held by the port's mrc-nicd
	// (its config's port delay: both directions of the wire), when the
	// plan runs NICs; the link itself then carries none.
	DelayUS int64 `yaml:"delay_us,omitempty"`
}

// Link is one veth pair.
type Link struct {
	Name  string `yaml:"name"`
	Kind  string `yaml:"kind"`
	Plane int    `yaml:"plane"` // -1 for mgmt
	A     End    `yaml:"a"`
	B     End    `yaml:"b"`
	// Delay is applied with netem on both ends when non-zero (a host
	// link's is the NIC's delay line instead when the plan runs NICs:
	// HostPort.DelayUS).
	DelayUS int64 `yaml:"delay_us,omitempty"`
}

// End is one side of a veth.
type End struct {
	Node   string   `yaml:"node"`
	NS     string   `yaml:"ns"`
	Ifname string   `yaml:"ifname"`
	MAC    wire.MAC `yaml:"mac"`
}

// Options are inputs besides the topology.
type Options struct {
	// Prefix overrides the topology's prefix.
	Prefix string
	// RunDir is where configs, logs and the state file go.
	RunDir string
}

// RunIDFor derives a run id from a prefix (FNV-1a, never 0 or 0xffff).
func RunIDFor(prefix string) uint16 {
	h := fnv.New32a()
	h.Write([]byte(prefix))
	v := uint16(h.Sum32()%0xfffe) + 1
	return v
}

// MAC returns the MAC of a node port (pathtmpl.NodeMAC: 02|kind<<2, run id,
// node, port).
func MAC(kind string, run uint16, node uint16, port uint8) wire.MAC {
	k := map[string]pathtmpl.NodeKind{KindHost: pathtmpl.NodeHost, KindT0: pathtmpl.NodeT0, KindT1: pathtmpl.NodeT1, KindMgmt: pathtmpl.NodeMgmt}[kind]
	return pathtmpl.NodeMAC(k, run, node, port)
}

// LinkLocal returns the EUI-64 link-local address the kernel gives an
// interface with this MAC (RFC 4291 appendix A).
func LinkLocal(hw wire.MAC) netip.Addr {
	var a [16]byte
	a[0], a[1] = 0xfe, 0x80
	a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15] = hw[0]^0x02, hw[1], hw[2], 0xff, 0xfe, hw[3], hw[4], hw[5]
	return netip.AddrFrom16(a)
}

// Addr builds fd00:<run>:<w2>:<w3>::<last>/<bits>.
func addr(run, w2, w3, last uint16, bits int) netip.Prefix {
	var a [16]byte
	a[0], a[1] = 0xfd, 0x00
	a[2], a[3] = byte(run>>8), byte(run)
	a[4], a[5] = byte(w2>>8), byte(w2)
	a[6], a[7] = byte(w3>>8), byte(w3)
	a[14], a[15] = byte(last>>8), byte(last)
	return netip.PrefixFrom(netip.AddrFrom16(a), bits)
}

// HostAddr is the inner address of host id in plane: fd00:<run>:<plane>:<id>::1/64.
func HostAddr(run uint16, plane, id int) netip.Prefix {
	return addr(run, uint16(plane), uint16(id), 1, 64)
}

// PlaneSubnet is fd00:<run>:<plane>::/48, every host /64 of a plane.
func PlaneSubnet(run uint16, plane int) netip.Prefix {
	return addr(run, uint16(plane), 0, 0, 48)
}

// MgmtAddr is fd00:<run>:ffff::<id>/64.
func MgmtAddr(run uint16, id int) netip.Prefix { return addr(run, 0xffff, 0, uint16(id), 64) }

func un(block netip.Prefix, u wire.USID) netip.Prefix {
	a, _ := Container(block, u)
	return netip.PrefixFrom(a, 48)
}

// Node names.
func hostName(i int) string          { return fmt.Sprintf("h%d", i) }
func t0Name(p, k int) string         { return fmt.Sprintf("p%d-t0-%d", p, k) }
func t1Name(p, j int) string         { return fmt.Sprintf("p%d-t1-%d", p, j) }
func nsName(prefix, n string) string { return prefix + "-" + n }

// Build derives the plan. It validates the topology first.
func Build(t *topo.Topology, o Options) (*Plan, error) {
	t2 := *t
	if o.Prefix != "" {
		t2.Prefix = o.Prefix
	}
	if err := t2.Validate(); err != nil {
		return nil, err
	}
	if o.RunDir == "" {
		o.RunDir = filepath.Join("/run/softmrc", t2.Prefix)
	}
	run := t2.RunID
	if run == 0 {
		run = RunIDFor(t2.Prefix)
	}
	P := &Plan{
		Prefix: t2.Prefix, RunID: run, RunDir: o.RunDir, Mode: t2.Mode, Dataplane: t2.Dataplane,
		Block: t2.Block, MTU: t2.MTU, RoCEMTU: t2.RoCEMTU, Planes: t2.Planes, T0PerPlane: t2.T0PerPlane,
		T1PerPlane: t2.T1PerPlane, HostsPerT0: t2.HostsPerT0, NICs: t2.NICs, NICThreads: t2.NICThreads, NICPathProbes: t2.NICPathProbes, HostCapacityBps: t2.Host.CapacityBps,
		PinGlob: filepath.Join(BPFRoot, t2.Prefix+"-*"),
	}
	P.Mgmt = Mgmt{NS: nsName(t2.Prefix, "mgmt"), Bridge: "br0", MAC: MAC(KindMgmt, run, 0, 0xff), Subnet: MgmtAddr(run, 0).Masked()}
	P.Namespaces = append(P.Namespaces, P.Mgmt.NS)

	model := func(s topo.LinkSpec) PortModel {
		return PortModel{CapacityBps: s.CapacityBps, ECNThreshold: s.ECNThreshold, ECNMax: s.ECNMax, ECNPMax: s.ECNPMax,
			TrimThreshold: s.TrimThreshold, Buffer: s.Buffer, HostECN: s.HostECN}
	}
	sw := func(role string, p, idx int) Switch {
		name := t0Name(p, idx)
		u := pathtmpl.T0USID(idx, wire.Plane(p))
		if role == KindT1 {
			name, u = t1Name(p, idx), pathtmpl.T1USID(idx, wire.Plane(p))
		}
		return Switch{
			Name: name, NS: nsName(t2.Prefix, name), Role: role, Plane: p, Index: idx, USID: u, UN: un(t2.Block, u),
			Config:  filepath.Join(o.RunDir, "switch", name+".yaml"),
			CtlSock: filepath.Join(o.RunDir, "switch", name+".sock"),
			PinDir:  filepath.Join(BPFRoot, t2.Prefix+"-"+name),
			Log:     filepath.Join(o.RunDir, "log", name+".log"),
		}
	}
	nHosts := t2.Hosts()
	// Switches: per plane, T0s then T1s.
	t0 := make([][]*Switch, t2.Planes)
	t1 := make([][]*Switch, t2.Planes)
	for p := 0; p < t2.Planes; p++ {
		for k := 0; k < t2.T0PerPlane; k++ {
			P.Switches = append(P.Switches, sw(KindT0, p, k))
		}
		for j := 0; j < t2.T1PerPlane; j++ {
			P.Switches = append(P.Switches, sw(KindT1, p, j))
		}
	}
	for i := range P.Switches {
		s := &P.Switches[i]
		P.Namespaces = append(P.Namespaces, s.NS)
		if s.Role == KindT0 {
			t0[s.Plane] = append(t0[s.Plane], s)
		} else {
			t1[s.Plane] = append(t1[s.Plane], s)
		}
	}
	// Hosts and their links.
	for i := 0; i < nHosts; i++ {
		h := Host{
			Name: hostName(i), ID: i + 1, NS: nsName(t2.Prefix, hostName(i)),
			T0: i / t2.HostsPerT0, Downlink: i % t2.HostsPerT0,
			MgmtIf: "mgmt0", MgmtMAC: MAC(KindHost, run, uint16(i+1), 0xff), MgmtAddr: MgmtAddr(run, i+1),
			NICConfig: filepath.Join(o.RunDir, "host", hostName(i)+".nic.yaml"),
			Template:  filepath.Join(o.RunDir, "host", hostName(i)+".usid.yaml"),
			Log:       filepath.Join(o.RunDir, "log", hostName(i)+".log"),
		}
		P.Namespaces = append(P.Namespaces, h.NS)
		for p := 0; p < t2.Planes; p++ {
			s := t0[p][h.T0]
			dl := pathtmpl.DownlinkUSID(h.Downlink, wire.Plane(p))
			hp := HostPort{
				Plane: p, Ifname: fmt.Sprintf("p%d", p), MAC: MAC(KindHost, run, uint16(h.ID), uint8(p)),
				Addr: HostAddr(run, p, h.ID), Locator: un(t2.Block, dl), DownlinkUSID: dl,
				Switch: s.Name, SwitchPort: fmt.Sprintf("d%d", h.Downlink),
				GatewayMAC: MAC(KindT0, run, uint16(p)<<8|uint16(h.T0), uint8(h.Downlink)),
				Link:       h.Name + "--" + s.Name,
			}
			hp.GatewayLL = LinkLocal(hp.GatewayMAC)
			// A host link's delay is the NIC's delay line when mrc-nicd
			// runs (no netem needed: this kernel has none, and an XDP
			// switch cannot hold a frame); netem on the veth otherwise.
			linkDelay := t2.Host.Delay.Microseconds()
			if t2.NICs {
				hp.DelayUS, linkDelay = linkDelay, 0
			}
			s.Ports = append(s.Ports, Port{
				Ifname: hp.SwitchPort, Role: "host", MAC: hp.GatewayMAC, Peer: h.Name + ":" + hp.Ifname,
				PeerMAC: hp.MAC, PeerLL: LinkLocal(hp.MAC), Link: hp.Link, Model: model(t2.Host),
			})
			P.Links = append(P.Links, Link{
				Name: hp.Link, Kind: LinkHost, Plane: p, DelayUS: linkDelay,
				A: End{Node: h.Name, NS: h.NS, Ifname: hp.Ifname, MAC: hp.MAC},
				B: End{Node: s.Name, NS: s.NS, Ifname: hp.SwitchPort, MAC: hp.GatewayMAC},
			})
			h.Ports = append(h.Ports, hp)
		}
		P.Hosts = append(P.Hosts, h)
	}
	// Fabric links: T0 k uplink j <-> T1 j port k.
	for p := 0; p < t2.Planes; p++ {
		for _, a := range t0[p] {
			for _, b := range t1[p] {
				ea := End{Node: a.Name, NS: a.NS, Ifname: fmt.Sprintf("u%d", b.Index), MAC: MAC(KindT0, run, uint16(p)<<8|uint16(a.Index), uint8(0x80+b.Index))}
				eb := End{Node: b.Name, NS: b.NS, Ifname: fmt.Sprintf("d%d", a.Index), MAC: MAC(KindT1, run, uint16(p)<<8|uint16(b.Index), uint8(a.Index))}
				l := Link{Name: a.Name + "--" + b.Name, Kind: LinkFabric, Plane: p, A: ea, B: eb, DelayUS: t2.Fabric.Delay.Microseconds()}
				P.Links = append(P.Links, l)
				a.Ports = append(a.Ports, Port{Ifname: ea.Ifname, Role: "fabric", MAC: ea.MAC, Peer: b.Name + ":" + eb.Ifname, PeerMAC: eb.MAC, PeerLL: LinkLocal(eb.MAC), Link: l.Name, Model: model(t2.Fabric)})
				b.Ports = append(b.Ports, Port{Ifname: eb.Ifname, Role: "fabric", MAC: eb.MAC, Peer: a.Name + ":" + ea.Ifname, PeerMAC: ea.MAC, PeerLL: LinkLocal(ea.MAC), Link: l.Name, Model: model(t2.Fabric)})
			}
		}
	}
	// Management links.
	for _, h := range P.Hosts {
		P.Links = append(P.Links, Link{
			Name: h.Name + "--mgmt", Kind: LinkMgmt, Plane: -1,
			A: End{Node: h.Name, NS: h.NS, Ifname: h.MgmtIf, MAC: h.MgmtMAC},
			B: End{Node: "mgmt", NS: P.Mgmt.NS, Ifname: h.Name, MAC: MAC(KindMgmt, run, uint16(h.ID), 0)},
		})
	}
	for i := range P.Switches {
		fib(P, &P.Switches[i])
	}
	return P, nil
}

// fib fills a switch's static FIB.
//
// srv6: a T0 routes each T1 uSID /48 to its uplink, each downlink uSID /48 to
// the host port, and the other T0s' uSID /48 to the ECMP group of uplinks (so
// [srcT0, dstT0, downlink] also works and lets the fabric pick the T1). A T1
// routes each T0 uSID /48 to the port facing that T0. The switch's own /48 is
// its uN (in the config, not a FIB entry).
//
// ecmp: a T0 routes each local host's /64 to its downlink and every other
// host's /64 to the ECMP group of uplinks; a T1 routes each host /64 to the
// port facing that host's T0.
func fib(P *Plan, s *Switch) {
	var uplinks []string
	for _, pt := range s.Ports {
		if s.Role == KindT0 && pt.Role == "fabric" {
			uplinks = append(uplinks, pt.Ifname)
		}
	}
	if len(uplinks) > 0 {
		s.Groups = []Group{{Name: "uplinks", Ports: uplinks}}
	}
	add := func(dst netip.Prefix, port, group, why string) {
		s.Routes = append(s.Routes, Route{Dst: dst, Port: port, Group: group, Why: why})
	}
	switch {
	case P.Mode == topo.ModeSRv6 && s.Role == KindT0:
		for j := 0; j < P.T1PerPlane; j++ {
			add(un(P.Block, pathtmpl.T1USID(j, wire.Plane(s.Plane))), fmt.Sprintf("u%d", j), "", "T1 "+t1Name(s.Plane, j))
		}
		for k := 0; k < P.T0PerPlane; k++ {
			if k != s.Index {
				add(un(P.Block, pathtmpl.T0USID(k, wire.Plane(s.Plane))), "", "uplinks", "T0 "+t0Name(s.Plane, k)+" via any T1")
			}
		}
		for d := 0; d < P.HostsPerT0; d++ {
			h := P.Hosts[s.Index*P.HostsPerT0+d]
			add(un(P.Block, pathtmpl.DownlinkUSID(d, wire.Plane(s.Plane))), fmt.Sprintf("d%d", d), "", "downlink to "+h.Name)
		}
	case P.Mode == topo.ModeSRv6 && s.Role == KindT1:
		for k := 0; k < P.T0PerPlane; k++ {
			add(un(P.Block, pathtmpl.T0USID(k, wire.Plane(s.Plane))), fmt.Sprintf("d%d", k), "", "T0 "+t0Name(s.Plane, k))
		}
	case s.Role == KindT0:
		for _, h := range P.Hosts {
			if h.T0 == s.Index {
				add(HostAddr(P.RunID, s.Plane, h.ID).Masked(), fmt.Sprintf("d%d", h.Downlink), "", "local host "+h.Name)
			} else {
				add(HostAddr(P.RunID, s.Plane, h.ID).Masked(), "", "uplinks", "host "+h.Name+" via any T1")
			}
		}
	default:
		for _, h := range P.Hosts {
			add(HostAddr(P.RunID, s.Plane, h.ID).Masked(), fmt.Sprintf("d%d", h.T0), "", "host "+h.Name+" under "+t0Name(s.Plane, h.T0))
		}
	}
}

// Switch returns the named switch or nil.
func (p *Plan) Switch(name string) *Switch {
	for i := range p.Switches {
		if p.Switches[i].Name == name {
			return &p.Switches[i]
		}
	}
	return nil
}

// Host returns the named host or nil.
func (p *Plan) Host(name string) *Host {
	for i := range p.Hosts {
		if p.Hosts[i].Name == name {
			return &p.Hosts[i]
		}
	}
	return nil
}

// Link returns the named link or nil.
func (p *Plan) Link(name string) *Link {
	for i := range p.Links {
		if p.Links[i].Name == name {
			return &p.Links[i]
		}
	}
	return nil
}

// Port returns a switch's port by interface name, or nil.
func (s *Switch) Port(ifname string) *Port {
	for i := range s.Ports {
		if s.Ports[i].Ifname == ifname {
			return &s.Ports[i]
		}
	}
	return nil
}
