package pathtmpl

import (
	"fmt"

	"github.com/softmrc/softmrc/internal/wire"
)

// The fabric's uSID and MAC allocation (docs/conventions.md), defined here
// once for the simulator (internal/fabricsim), the testbed plan
// (testbed/plan, which also writes the switches' configs) and the path
// templates. A uSID is index<<8 | plane; the index range says what it names:
//
//	0x01..0x3f  T1 j          index 0x01+j
//	0x40..0xbf  T0 k          index 0x40+k
//	0xc0..0xfe  host downlink d of a T0, index 0xc0+d
const (
	t1Base       = 0x01
	t0Base       = 0x40
	downlinkBase = 0xc0
	indexEnd     = 0xff // 0xff is not allocated

	// MaxT1s is the most T1s per plane (indexes 0x01..0x3f).
	MaxT1s = t0Base - t1Base
	// MaxT0s is the most T0s per plane (indexes 0x40..0xbf).
	MaxT0s = downlinkBase - t0Base
	// MaxDownlinks is the most host downlinks per T0 (indexes 0xc0..0xfe).
	MaxDownlinks = indexEnd - downlinkBase
)

func usid(index int, p wire.Plane) wire.USID { return wire.USID(index)<<8 | wire.USID(p) }

// T1USID is the uN uSID of T1 number j (0-based, < MaxT1s) of plane p.
func T1USID(j int, p wire.Plane) wire.USID { return usid(t1Base+j, p) }

// T0USID is the uN uSID of T0 number k (0-based, < MaxT0s) of plane p.
func T0USID(k int, p wire.Plane) wire.USID { return usid(t0Base+k, p) }

// DownlinkUSID is the uSID of host downlink d (0-based, < MaxDownlinks) of a
// T0 in plane p: the NIC port behind it owns block:DownlinkUSID::/48 as seen
// after its T0 shifted.
func DownlinkUSID(d int, p wire.Plane) wire.USID { return usid(downlinkBase+d, p) }

// USIDNode inverts the allocation: the kind of node u names (NodeT1,
// NodeT0, or NodeHost for a host downlink), its number (T1 j, T0 k,
// downlink d) and its plane. ok is false for an index nothing is allocated
// at (0x00, 0xff).
func USIDNode(u wire.USID) (k NodeKind, n int, p wire.Plane, ok bool) {
	idx, p := int(u>>8), wire.Plane(u&0xff)
	switch {
	case idx >= t1Base && idx < t0Base:
		return NodeT1, idx - t1Base, p, true
	case idx >= t0Base && idx < downlinkBase:
		return NodeT0, idx - t0Base, p, true
	case idx >= downlinkBase && idx < indexEnd:
		return NodeHost, idx - downlinkBase, p, true
	}
	return 0, 0, p, false
}

// SwitchName names the switch a uSID is the uN of, as the testbed names it:
// p<plane>-t1-<j> or p<plane>-t0-<k>; ok is false for a downlink or an
// unallocated uSID.
func SwitchName(u wire.USID) (name string, ok bool) {
	k, n, p, ok := USIDNode(u)
	switch {
	case ok && k == NodeT1:
		return fmt.Sprintf("p%d-t1-%d", p, n), true
	case ok && k == NodeT0:
		return fmt.Sprintf("p%d-t0-%d", p, n), true
	}
	return "", false
}

// NodeKind is the kind of node a MAC belongs to (the MAC's first byte).
type NodeKind uint8

// Node kinds, as encoded in NodeMAC.
const (
	NodeHost NodeKind = 0
	NodeT0   NodeKind = 1
	NodeT1   NodeKind = 2
	NodeMgmt NodeKind = 3
)

// NodeMAC is the MAC of port port of node node of kind k in run run:
// 02|k<<2 : run : node : port (locally administered, unicast; unique per
// run, so parallel runs on one host never share a MAC).
func NodeMAC(k NodeKind, run, node uint16, port uint8) wire.MAC {
	return wire.MAC{0x02 | byte(k)<<2, byte(run >> 8), byte(run), byte(node >> 8), byte(node), port}
}
