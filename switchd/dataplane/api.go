// Package dataplane loads, attaches and configures the softmrc XDP switch
// program (bpf/switch.bpf.c): uSID (RFC 9800 NEXT-CSID) forwarding, an LPM
// FIB with ECMP groups, a per-egress-port capacity/ECN/trimming model and
// fault injection. It is the only package that touches the switch's BPF maps;
// mrc-switchd drives it.
//
// Behaviour choices are documented in docs/switch.md.
package dataplane

import (
	"net"
	"net/netip"
	"time"
)

// Limits of the BPF maps. They are compile-time sizes in bpf/consts.h.
const (
	// MaxPorts is the number of port slots (PortID 0..MaxPorts-1).
	MaxPorts = 64
	// MaxGroups is the number of ECMP group slots (GroupID 0..MaxGroups-1).
	MaxGroups = 256
	// MaxGroupMembers is the largest ECMP group.
	MaxGroupMembers = 16
	// MaxRoutes is the capacity of the FIB (LPM trie).
	MaxRoutes = 4096
	// MaxOwnUSIDs is the number of own uN uSIDs a switch may have (a policy
	// limit: the own-uSID table has an entry for every 16-bit uSID).
	MaxOwnUSIDs = 16
	// MaxCapacityBps is the largest capacity a PortModel accepts (the
	// virtual-queue arithmetic is exact up to this rate).
	MaxCapacityBps = 100_000_000_000
)

// PortID indexes a switch port: the devmap slot, the port table and the
// counters. Counters for frames that arrive on an interface not mapped to a
// port are kept under UnmappedPort.
type PortID uint32

// UnmappedPort is the counters slot for frames received on an interface that
// has no PortID (Counters(UnmappedPort) reads it).
const UnmappedPort PortID = MaxPorts

// GroupID indexes an ECMP group.
type GroupID uint32

// Role says whether a port faces a host (NIC) or another switch.
type Role uint8

const (
	// RoleFabric ports connect switches; ECN marking happens only here and
	// trimmed packets get DSCP TRIMMED.
	RoleFabric Role = 0
	// RoleHostFacing ports connect a NIC: no ECN marking, trimmed packets get
	// DSCP TRIMMED_LASTHOP.
	RoleHostFacing Role = 1
)

// Mode selects how the switch forwards.
type Mode uint8

const (
	// ModeSRv6 processes the node's own uN uSIDs in the outermost IPv6
	// destination, then looks the (new) destination up in the FIB.
	ModeSRv6 Mode = 0
	// ModeECMP is a plain IPv6 router: no uSID processing; routes that name
	// an ECMP group pick a member by flow hash.
	ModeECMP Mode = 1
)

// AttachMode selects the XDP attach mode.
type AttachMode uint8

const (
	// AttachNativeOrGeneric tries native (driver) mode, then generic.
	AttachNativeOrGeneric AttachMode = iota
	// AttachNative fails if the driver has no native XDP.
	AttachNative
	// AttachGeneric uses generic (skb) XDP.
	AttachGeneric
)

// PortModel is the per-egress-port virtual queue. The zero value disables
// the model (every packet that reaches the port is sent). Thresholds are in
// bytes of virtual-queue backlog and must satisfy
// MarkBytes <= TrimBytes <= BufferBytes when set.
type PortModel struct {
	// CapacityBps is the drain rate in bit/s; 0 disables the model.
	CapacityBps uint64
	// MarkBytes: ECT data packets enqueued above this backlog get CE
	// (fabric ports only, unless HostECN). 0 = never mark.
	MarkBytes uint32
	// MarkMaxBytes and MarkProb make the marking RED-style (WRED ECN, as
	// DCQCN's paper configures its switches: Kmin = MarkBytes, Kmax =
	// MarkMaxBytes, Pmax = MarkProb): a packet that takes the backlog to q
	// between the two is marked with probability MarkProb × (q − MarkBytes)
	// / (MarkMaxBytes − MarkBytes), and always above MarkMaxBytes. The
	// backlog is the instantaneous one, not RED's average. 0 = step
	// marking: every packet above MarkBytes.
	MarkMaxBytes uint32
	MarkProb     float64
	// HostECN makes a host-facing port mark as well. MRC's last hop only
	// trims (TRIMMED_LASTHOP); DCQCN needs marks at the last hop to see an
	// incast at all, as on commodity switches that mark any congested egress.
	HostECN bool
	// TrimBytes: a data-class packet that would take the backlog above this
	// is trimmed (trimmable MRC data) or dropped. 0 = BufferBytes.
	TrimBytes uint32
	// BufferBytes: any packet that would take the backlog above this is
	// dropped (also priority and trimmed packets).
	BufferBytes uint32
}

// Port configures one switch port.
type Port struct {
	// Ifindex of the interface in the switch's namespace (devmap target).
	Ifindex int
	// NeighMAC is written as the destination MAC of frames sent on the port.
	NeighMAC net.HardwareAddr
	// OwnMAC is written as the source MAC (normally the interface's MAC).
	OwnMAC net.HardwareAddr
	Role   Role
	Model  PortModel
}

// Fault is the injected misbehaviour of one port. The zero value is a
// healthy port. Faults apply to frames received on and sent to the port.
type Fault struct {
	// Down drops everything on the port (as a link with no carrier).
	Down bool
	// Blackhole drops everything on the port while the carrier stays up.
	Blackhole bool
	// LossPPM drops each frame sent on the port with this probability in
	// parts per million (0..1_000_000).
	LossPPM uint32
	// FlapOn/FlapOff: when both are non-zero the port alternates between up
	// for FlapOn and down for FlapOff, starting up at the moment SetFault is
	// called. SetFault with the same FlapOn/FlapOff as the port already has
	// keeps the running schedule (its phase), so re-applying a fault (e.g.
	// after a daemon restart) does not restart the flap.
	FlapOn, FlapOff time.Duration
}

// NextHop is the target of a route: a port or an ECMP group.
type NextHop struct {
	// Group selects GroupID instead of Port.
	Group   bool
	Port    PortID
	GroupID GroupID
}

// Route is one FIB entry.
type Route struct {
	Prefix  netip.Prefix
	NextHop NextHop
}

// SwitchConfig is the switch-wide configuration.
type SwitchConfig struct {
	// BlockBits is the uSID locator-block length: 16, 32 (F3216, default
	// when 0) or 48.
	BlockBits int
	// Block is the uSID block, e.g. 5f00:1::/32. Its length must equal
	// BlockBits.
	Block netip.Prefix
	// OwnUSIDs are the node's uN uSIDs; each installs Block:uSID::/(BlockBits+16).
	OwnUSIDs []uint16
	Mode     Mode
}

// PortCounters are the per-port counters summed over CPUs. Every frame the
// program sees is counted in exactly one of Forwarded, Pass or a Drop*
// counter: Rx* and Pass/DropNoRoute/DropHopLimit/DropMalformed/
// DropEndOfContainer on the ingress port, Tx*/Forwarded/ECNMarked/Trimmed/
// DropBuffer on the egress port, DropFault on the faulty port (ingress or
// egress) or, for a hung switch, on the ingress port.
type PortCounters struct {
	RxPackets, RxBytes uint64
	TxPackets, TxBytes uint64
	Forwarded          uint64
	ECNMarked          uint64
	Trimmed            uint64
	DropNoRoute        uint64
	DropHopLimit       uint64
	DropFault          uint64
	DropBuffer         uint64
	DropMalformed      uint64
	DropEndOfContainer uint64
	Pass               uint64
}

// LinkKind says which program an XDP link runs.
type LinkKind uint8

const (
	// LinkSwitch runs the switch program (a port).
	LinkSwitch LinkKind = 0
	// LinkPass runs the XDP_PASS program (the far end of a veth the switch
	// redirects into).
	LinkPass LinkKind = 1
)

// String is "switch" or "pass".
func (k LinkKind) String() string {
	if k == LinkPass {
		return "pass"
	}
	return "switch"
}

// Attachment is one XDP link of the Dataplane.
type Attachment struct {
	Ifindex int
	Kind    LinkKind
}

// LoadOptions configure Load.
type LoadOptions struct {
	// PinDir, when set, is a bpffs directory (e.g. /sys/fs/bpf/softmrc/t0-0)
	// where maps and links are pinned so that Adopt can take them over after
	// a restart. It is created if missing.
	PinDir string
}

// The functions and Dataplane methods are defined in dataplane.go:
//
//	Load(opts LoadOptions) (*Dataplane, error)
//	Adopt(pinDir string) (*Dataplane, error)
//	(*Dataplane).Attach(ifindex int, mode AttachMode) error  // switch program, bpf_link (pinned if PinDir)
//	(*Dataplane).AttachPass(ifindex int) error               // XDP_PASS program for veth peers
//	(*Dataplane).Detach(ifindex int) error                   // removes the link (and its pin)
//	(*Dataplane).Attached() []Attachment                     // switch and pass links, by ifindex
//	(*Dataplane).StaleLinks() []Attachment                   // pinned links dropped at adoption (device gone)
//	(*Dataplane).SetSwitchConfig(cfg SwitchConfig) error
//	(*Dataplane).AddLocalAddr(a netip.Addr) error            // DA passed to the kernel
//	(*Dataplane).DelLocalAddr(a netip.Addr) error
//	(*Dataplane).SetPort(id PortID, p Port) error
//	(*Dataplane).Port(id PortID) (Port, bool, error)         // false: slot not configured
//	(*Dataplane).DelPort(id PortID) error                    // also clears the port's fault
//	(*Dataplane).AddRoute(prefix netip.Prefix, nh NextHop) error  // add or replace
//	(*Dataplane).DelRoute(prefix netip.Prefix) error
//	(*Dataplane).Routes() ([]Route, error)
//	(*Dataplane).SetECMPGroup(id GroupID, members []PortID) error
//	(*Dataplane).SetMode(m Mode) error
//	(*Dataplane).SetFault(id PortID, f Fault) error          // an unchanged flap keeps its phase
//	(*Dataplane).Fault(id PortID) (Fault, error)             // read back from the faults map
//	(*Dataplane).SetHang(hang bool) error
//	(*Dataplane).Hang() (bool, error)
//	(*Dataplane).Counters(id PortID) (PortCounters, error)
//	(*Dataplane).Close() error    // closes fds; pinned maps/links stay and keep forwarding
//	(*Dataplane).Destroy() error  // detaches every link and removes the pins
//	(*Dataplane).SwitchProgram() / PassProgram() *ebpf.Program  // for BPF_PROG_RUN
//	USIDPrefix(block netip.Prefix, u uint16) netip.Prefix       // block:u::/(bits+16)
//	FlowHash(src, dst netip.Addr, flowLabel uint32, sport uint16) uint32  // ECMP hash twin
//	(PortCounters).Dropped() uint64
//
// SetPort and Attach resolve ifindexes in the calling thread's network
// namespace: call them from a thread locked into the switch's namespace.
