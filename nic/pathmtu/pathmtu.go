// Package pathmtu checks that a NIC's ports can carry the frames of a QP's
// RoCE MTU: the check perftest's check_mtu and the verbs' path MTU stand
// for, done against the interfaces the frames really leave on. It is pure:
// the caller reads the interface MTUs.
package pathmtu

import (
	"fmt"
	"strings"

	"github.com/softmrc/softmrc/internal/wire"
)

// FrameLen is the longest frame, Ethernet header included, that a QP with
// RoCE MTU mtu (payload bytes per packet) sends: a data packet with every
// optional header (TSETH, ImmDt) and, when encap (SRv6 mode), the outer
// IPv6 header.
func FrameLen(mtu int, encap bool) int {
	longest := 0
	for _, op := range []wire.Opcode{wire.OpWriteFirst, wire.OpWriteMiddle, wire.OpWriteLast,
		wire.OpWriteLastImm, wire.OpWriteOnly, wire.OpWriteOnlyImm} {
		p := wire.Packet{Opcode: op, Encap: encap, HasTS: true}
		longest = max(longest, p.HeaderLen()+mtu+(-mtu)&3+wire.ICRCLen)
	}
	return longest
}

// IfMTU is the interface MTU (IPv6 packet, no Ethernet header) that frames
// of RoCE MTU mtu need.
func IfMTU(mtu int, encap bool) int { return FrameLen(mtu, encap) - wire.EthLen }

// Port is one port as the check sees it.
type Port struct {
	Name      string // the port's name in the NIC config
	Interface string // its network interface
	MTU       int    // the interface MTU; 0 = unknown (not checked)
}

// Error is a failed check: which ports are too small for which QP MTU.
type Error struct {
	QPMTU int    // the QP's RoCE MTU
	Need  int    // the interface MTU it needs
	Short []Port // the ports below Need
}

func (e *Error) Error() string {
	var ps []string
	for _, p := range e.Short {
		ps = append(ps, fmt.Sprintf("%s (%s) has MTU %d", p.Name, p.Interface, p.MTU))
	}
	return fmt.Sprintf("path MTU: a RoCE MTU of %d needs an interface MTU of at least %d, but port %s: "+
		"raise the interface MTU to %d or more (mrc-testbed: roce_mtu: %d in the topology sets it, or mtu:) "+
		"or use a smaller RoCE MTU (mtu: in mrc-nicd's config)",
		e.QPMTU, e.Need, strings.Join(ps, ", port "), e.Need, e.QPMTU)
}

// Check returns an *Error when a port with a known MTU cannot carry the
// frames of a QP with RoCE MTU qpMTU.
func Check(qpMTU int, encap bool, ports []Port) error {
	need := IfMTU(qpMTU, encap)
	var short []Port
	for _, p := range ports {
		if p.MTU > 0 && p.MTU < need {
			short = append(short, p)
		}
	}
	if short != nil {
		return &Error{QPMTU: qpMTU, Need: need, Short: short}
	}
	return nil
}
