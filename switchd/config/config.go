// Package config holds the configuration of one mrc-switchd switch: its
// identity (name, uSID block, own uN uSIDs), forwarding mode, ports, FIB,
// ECMP groups and where its pins, control socket and metrics live.
//
// A Config is either loaded from YAML with Load/Parse, which report errors
// with file, line and field, or built in Go (the testbed generates configs
// from a topology) and written with Marshal/Write. Validate checks a Config
// built either way.
package config

import (
	"fmt"
	"net/netip"
	"strings"

	"github.com/softmrc/softmrc/internal/wire"
)

// Mode is the forwarding mode of a switch.
type Mode string

// Forwarding modes.
const (
	// ModeSRv6 shifts the switch's own uN uSIDs out of the outer destination
	// (RFC 9800 NEXT-CSID) and then looks the new destination up in the FIB.
	ModeSRv6 Mode = "srv6"
	// ModeECMP forwards on the destination as is; FIB entries that point at an
	// ECMP group choose a member by a hash of the flow.
	ModeECMP Mode = "ecmp"
)

// Role says what sits at the far end of a port.
type Role string

// Port roles.
const (
	// RoleHost faces a NIC: no ECN marking, trimming sets TRIMMED_LASTHOP.
	RoleHost Role = "host"
	// RoleFabric faces another switch: ECN marking, trimming sets TRIMMED.
	RoleFabric Role = "fabric"
)

// Config is one switch. The YAML keys are given in the field comments; see
// docs/switchd.md for the reference.
type Config struct {
	// Name (name) identifies the switch in logs, metrics, pins and the
	// default control socket path. Letters, digits, '-', '_' and '.'.
	Name string
	// Block (usid_block) is the uSID locator block, e.g. 5f00:1::/32. Its
	// length is the block length LBL and must be 16, 32 or 48.
	Block netip.Prefix
	// USIDs (usids) are the switch's own uN uSIDs. Each owns the prefix
	// Block:uSID::/(LBL+16). May be empty in ECMP mode.
	USIDs []wire.USID
	// Mode (mode) is srv6 (default) or ecmp.
	Mode Mode
	// Ports (ports) are the switch's interfaces, in port-index order: the
	// first port is index 0 in the data plane.
	Ports []Port
	// FIB (fib) maps destination prefixes to a port or an ECMP group.
	FIB []Route
	// ECMPGroups (ecmp_groups) are named sets of ports.
	ECMPGroups []ECMPGroup
	// PinDir (pin_dir) is the bpffs directory for pinned maps and links.
	// Default /sys/fs/bpf/softmrc/<name>.
	PinDir string
	// Control (control_socket) is the unix control socket path.
	// Default /run/softmrc/<name>.sock.
	Control string
	// Metrics (metrics) is where Prometheus metrics are served: host:port
	// (TCP, e.g. 127.0.0.1:0) or an absolute unix socket path. Empty: off.
	Metrics string
}

// Port is one switch interface.
type Port struct {
	// Name (name) is how the FIB, groups, faults and counters refer to it.
	Name string
	// Interface (interface) is the Linux interface name in the switch's netns.
	Interface string
	// NeighbourMAC (neighbour_mac) is written as destination MAC of frames
	// sent out of this port.
	NeighbourMAC wire.MAC
	// Role (role) is host or fabric.
	Role Role
	// Model (model) is the optional egress port model; nil means off.
	Model *PortModel
}

// PortModel is the egress virtual queue of a port. Zero thresholds are off.
type PortModel struct {
	// CapacityBps (capacity_bps) is the drain rate of the virtual queue in
	// bit/s. Required (> 0).
	CapacityBps uint64
	// ECNThreshold (ecn_threshold) is the backlog in bytes above which ECT
	// packets get CE (fabric ports only, unless HostECN). 0: no marking.
	ECNThreshold uint32
	// ECNMax (ecn_max) and ECNPMax (ecn_pmax) make marking RED-style, as
	// DCQCN's paper configures its switches (Kmin = ecn_threshold, Kmax =
	// ecn_max, Pmax = ecn_pmax): between the two thresholds a packet is
	// marked with a probability rising linearly from 0 to ECNPMax, above
	// ecn_max always. 0: every packet above ECNThreshold (step marking).
	ECNMax  uint32
	ECNPMax float64
	// HostECN (host_ecn) makes a host-role port mark CE above ECNThreshold
	// too, as commodity switches do on any congested egress, so that DCQCN
	// sees a last-hop incast. Default false: a host port only trims (MRC).
	HostECN bool
	// TrimThreshold (trim_threshold) is the backlog in bytes above which
	// trimmable data packets are trimmed. 0: no trimming.
	TrimThreshold uint32
	// Buffer (buffer) is the backlog in bytes above which packets are
	// dropped. Required (> 0).
	Buffer uint32
}

// Route is one FIB entry: exactly one of Port and Group is set.
type Route struct {
	// Prefix (prefix) is an IPv6 prefix without host bits.
	Prefix netip.Prefix
	// Port (port) is a port name.
	Port string
	// Group (group) is an ECMP group name.
	Group string
}

// Target returns "port NAME" or "group NAME".
func (r Route) Target() string {
	if r.Group != "" {
		return "group " + r.Group
	}
	return "port " + r.Port
}

// ECMPGroup is a named set of ports that a route spreads flows over.
type ECMPGroup struct {
	// Name (name) is how routes refer to the group.
	Name string
	// Ports (ports) are port names, at least one.
	Ports []string
}

// Default paths, with %s replaced by the switch name.
const (
	DefaultPinDirFmt  = "/sys/fs/bpf/softmrc/%s"
	DefaultControlFmt = "/run/softmrc/%s.sock"
)

// WithDefaults returns a copy of c with empty optional fields filled in.
func (c Config) WithDefaults() Config {
	if c.Mode == "" {
		c.Mode = ModeSRv6
	}
	if c.PinDir == "" && c.Name != "" {
		c.PinDir = fmt.Sprintf(DefaultPinDirFmt, c.Name)
	}
	if c.Control == "" && c.Name != "" {
		c.Control = fmt.Sprintf(DefaultControlFmt, c.Name)
	}
	return c
}

// BlockLen is the locator block length LBL in bits.
func (c *Config) BlockLen() int { return c.Block.Bits() }

// UNPrefix is the prefix owned by uN uSID u: Block:u::/(LBL+16).
func (c *Config) UNPrefix(u wire.USID) netip.Prefix {
	a := c.Block.Masked().Addr().As16()
	off := c.Block.Bits() / 8
	if off+2 > 16 {
		return netip.Prefix{}
	}
	a[off] = byte(u >> 8)
	a[off+1] = byte(u)
	return netip.PrefixFrom(netip.AddrFrom16(a), c.Block.Bits()+16)
}

// PortIndex returns the data-plane index of the port called name.
func (c *Config) PortIndex(name string) (int, bool) {
	for i, p := range c.Ports {
		if p.Name == name {
			return i, true
		}
	}
	return 0, false
}

// Group returns the ECMP group called name.
func (c *Config) Group(name string) (ECMPGroup, bool) {
	for _, g := range c.ECMPGroups {
		if g.Name == name {
			return g, true
		}
	}
	return ECMPGroup{}, false
}

// String is a one-line summary for logs.
func (c *Config) String() string {
	us := make([]string, len(c.USIDs))
	for i, u := range c.USIDs {
		us[i] = u.Hex()
	}
	return fmt.Sprintf("switch %s mode %s block %s usids [%s] ports %d routes %d groups %d",
		c.Name, c.Mode, c.Block, strings.Join(us, ","), len(c.Ports), len(c.FIB), len(c.ECMPGroups))
}
