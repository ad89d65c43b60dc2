// Package topo defines the softmrc testbed topology file: a multi-plane Clos
// (P planes, T0 and T1 switches per plane, hosts under each T0 with one NIC
// port per plane), its link and queue-model parameters and forwarding mode.
// It parses the YAML file with line-accurate errors, validates it against the
// limits of docs/conventions.md (uSID index ranges, 4-bit plane field) and
// provides the built-in presets.
//
// The shape of every plane (hosts_per_t0 = 2, t0_per_plane = 2):
//
//	plane p:      T1(p,0)   T1(p,1)  ...      every T0 links to every T1
//	               |  \    /  |
//	               |   \  /   |
//	              T0(p,0)   T0(p,1)  ...
//	              /    \     /    \
//	            h0     h1  h2     h3         host i hangs off T0 i/hosts_per_t0
//	                                         in every plane (port p)
package topo

import (
	"fmt"
	"github.com/softmrc/softmrc/nic/pathmtu"
	"net/netip"
	"time"

	"github.com/softmrc/softmrc/internal/pathtmpl"
)

// Mode is the fabric forwarding mode.
type Mode string

// Forwarding modes.
const (
	// ModeSRv6 forwards by the uSID container in the outer destination
	// (RFC 9800 NEXT-CSID); the sender picks plane and T1.
	ModeSRv6 Mode = "srv6"
	// ModeECMP forwards plain IPv6 by destination /64; T0s hash over uplinks.
	ModeECMP Mode = "ecmp"
)

// Dataplane selects what forwards packets inside a switch namespace.
type Dataplane string

// Dataplanes.
const (
	// DataplaneXDP runs mrc-switchd (the XDP switch) in every switch namespace.
	DataplaneXDP Dataplane = "xdp"
	// DataplaneKernel programs the same FIB into the Linux kernel of each switch
	// namespace (seg6local End flavors next-csid, multipath routes). It is the
	// reference the XDP switch is checked against and needs no daemon; only the
	// down/up faults exist there.
	DataplaneKernel Dataplane = "kernel"
)

// Limits from docs/conventions.md: the uSID allocation (pathtmpl) bounds T1s,
// T0s and host downlinks; the EV plane field is 4 bits.
const (
	MaxPlanes     = 16
	MaxT0         = pathtmpl.MaxT0s       // 128
	MaxT1         = pathtmpl.MaxT1s       // 63
	MaxHostsPerT0 = pathtmpl.MaxDownlinks // 63
	// MaxMTU bounds the veth MTU. The switch and NIC programs are
	// frags-aware (xdp.frags), so native XDP no longer limits the peer to
	// 3506; 9000 is a jumbo frame.
	MaxMTU = 9000
	// MinMTU leaves room for outer IPv6 + inner IPv6 + UDP + BTH and a payload.
	MinMTU = 1280
	// DefaultMTU fits a 2048-byte RoCE MTU plus both IPv6 headers with room.
	// A roce_mtu of 4096 raises the default to what its frames need
	// (pathmtu.IfMTU: 4228 bytes).
	DefaultMTU = 3500
	// MinPathProbes and MaxPathProbes bound nic_path_probes (mrc-nicd
	// takes at least 1ms; 5ms is the recommended interval).
	MinPathProbes = time.Millisecond
	MaxPathProbes = 10 * time.Second
	// DefaultRoCEMTU is the NICs' RoCE MTU (payload bytes per packet).
	DefaultRoCEMTU = 2048
	// MaxPrefixLen keeps namespace and pin names short.
	MaxPrefixLen = 8
)

// DefaultBlock is the uSID block the testbed uses unless told (conventions.md).
var DefaultBlock = netip.MustParsePrefix("5f00:1::/32")

// Topology is one testbed description. The zero value is not valid; use
// Parse, Load or Preset, then Validate.
type Topology struct {
	// Source is the file the topology came from ("preset:NAME" for presets).
	Source string
	// Prefix names every namespace, pin and run of this topology.
	Prefix string
	// RunID is the 16-bit <run> field of every address (fd00:<run>:...) and
	// MAC. 0 means "derive from Prefix".
	RunID     uint16
	Mode      Mode
	Dataplane Dataplane
	// Block is the uSID block (F3216: a /32 inside 5f00::/16).
	Block      netip.Prefix
	Planes     int
	T0PerPlane int
	// T1PerPlane may be 0 only with one T0 per plane (the pair preset).
	T1PerPlane int
	HostsPerT0 int
	// MTU is the MTU of every veth (NIC-T0 and T0-T1 links).
	MTU int
	// MTUSet records that MTU was given (file or SetMTU) rather than
	// defaulted; only a defaulted MTU follows the RoCE MTU.
	MTUSet bool
	// RoCEMTU is every NIC's RoCE MTU (1024, 2048 or 4096), written into
	// the mrc-nicd configs.
	RoCEMTU int
	// NICs asks for mrc-nicd in every host namespace (started only when the
	// binary exists).
	NICs bool
	// NICThreads is every mrc-nicd's engine threads (its config's
	// threads:); each NIC-T0 link then has that many queues on both ends.
	// 0 or 1: one.
	NICThreads int
	// NICPathProbes is every mrc-nicd's path-probe agent interval (its
	// config's path_probes:, so that `mrc-mapper map --dir` has loops to
	// read); 0: off. srv6 mode only, at least 1ms.
	NICPathProbes time.Duration
	// Fabric applies to T0-T1 links, Host to NIC-T0 links.
	Fabric LinkSpec
	Host   LinkSpec
}

// LinkSpec is the per-link model handed to the switch port models (capacity,
// queue thresholds) and to netem (delay).
type LinkSpec struct {
	// CapacityBps is the port capacity in bit/s; 0 = unlimited (model off).
	CapacityBps uint64
	// Delay is a one-way delay added with netem on both veth ends; 0 = none.
	Delay time.Duration
	// ECNThreshold, TrimThreshold and Buffer are virtual-queue depths in bytes
	// (0 = that stage off). They must be increasing where set.
	ECNThreshold  uint64
	TrimThreshold uint64
	Buffer        uint64
	// ECNMax and ECNPMax make the marking RED-style (mrc-switchd ecn_max,
	// ecn_pmax; DCQCN's Kmax and Pmax): the probability rises linearly
	// from 0 at ECNThreshold to ECNPMax at ECNMax, and is 1 above it.
	// 0 = every ECT packet above ECNThreshold (step marking).
	ECNMax  uint64
	ECNPMax float64
	// HostECN (links.host only): the T0 downlinks mark CE above ECNThreshold
	// as fabric ports do (mrc-switchd host_ecn), so DCQCN sees a last-hop
	// incast. Default off: a T0 downlink only trims, as MRC's design has it.
	HostECN bool
}

// Hosts is the number of hosts.
func (t *Topology) Hosts() int { return t.T0PerPlane * t.HostsPerT0 }

// String is a one-line summary.
func (t *Topology) String() string {
	return fmt.Sprintf("%s: %d planes × %d T0 × %d T1, %d hosts, mode %s, dataplane %s, block %s",
		t.Prefix, t.Planes, t.T0PerPlane, t.T1PerPlane, t.Hosts(), t.Mode, t.Dataplane, t.Block)
}

// Presets lists the built-in topology names in a stable order.
func Presets() []string { return []string{"pair", "clos-2p", "clos-4p", "clos-8p"} }

// Preset returns a built-in topology: pair (2 hosts, 1 plane, 1 switch),
// clos-2p (2 planes × 2 T0 × 2 T1, 4 hosts), clos-4p (4 planes × 2 T0 × 4 T1,
// 4 hosts) and clos-8p (8 planes × 4 T0 × 4 T1, 16 hosts; the scale benchmark).
func Preset(name string) (*Topology, error) {
	t := defaults()
	t.Source = "preset:" + name
	switch name {
	case "pair":
		t.Prefix, t.Planes, t.T0PerPlane, t.T1PerPlane, t.HostsPerT0 = "pair", 1, 1, 0, 2
	case "clos-2p":
		t.Prefix, t.Planes, t.T0PerPlane, t.T1PerPlane, t.HostsPerT0 = "c2p", 2, 2, 2, 2
	case "clos-4p":
		t.Prefix, t.Planes, t.T0PerPlane, t.T1PerPlane, t.HostsPerT0 = "c4p", 4, 2, 4, 2
	case "clos-8p":
		t.Prefix, t.Planes, t.T0PerPlane, t.T1PerPlane, t.HostsPerT0 = "c8p", 8, 4, 4, 4
	default:
		return nil, fmt.Errorf("unknown preset %q: allowed %v", name, Presets())
	}
	return t, nil
}

func defaults() *Topology {
	return &Topology{
		Prefix:    "tb",
		Mode:      ModeSRv6,
		Dataplane: DataplaneXDP,
		Block:     DefaultBlock,
		MTU:       DefaultMTU,
		RoCEMTU:   DefaultRoCEMTU,
	}
}

// SetRoCEMTU sets the NICs' RoCE MTU; an MTU that was not given is raised to
// what the RoCE MTU's frames need (never lowered below DefaultMTU).
func (t *Topology) SetRoCEMTU(m int) {
	t.RoCEMTU = m
	if !t.MTUSet {
		t.MTU = max(DefaultMTU, pathmtu.IfMTU(m, true))
	}
}

// SetMTU sets the veth MTU explicitly.
func (t *Topology) SetMTU(m int) { t.MTU, t.MTUSet = m, true }
