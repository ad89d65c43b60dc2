package fabricsim

// This file is the reference model of a softmrc switch: what the XDP switch
// (bpf/, switchd/) must do with the same frame bytes. It holds the whole
// per-packet decision — parse, SRv6 uN (RFC 9800 NEXT-CSID) or plain IPv6,
// FIB longest-prefix match, ECMP hashing, and the egress virtual queue's
// admission (ECN mark, trim, drop) — and nothing about time, which lives in
// sim.go. A differential test can feed frames to Switch.Forward and
// Admit and to the XDP program and compare bytes, verdicts and counters.
//
// Forwarding, step by step (ForwardSRv6 / ForwardECMP):
//
//  1. The frame must be Ethernet + IPv6 (version 6) with at least the fixed
//     header and a payload length that fits the frame; otherwise drop
//     (DropParse). A multicast or link-local destination is not forwarded
//     (DropForMe: the XDP switch passes it to its kernel). Only the
//     OUTERMOST IPv6 header is read and rewritten (docs/conventions.md).
//  2. SRv6 mode, uN with NEXT-CSID, repeated while the active uSID is one of
//     the switch's own (at most Slots()=6 times for F3216, so it is bounded):
//     - block and active uSID match an own uN (MatchesUN) and the argument
//     (everything after the active uSID, all 80 bits) is zero: end of the
//     container, the packet is for this switch; a switch terminates nothing,
//     so drop (DropForMe). (A NIC port does accept its own downlink uSID.)
//     - argument non-zero: hop limit ≤ 1 → drop (DropHopLimit) before the
//     DA is touched; else shift the container left by 16 bits keeping the
//     block (wire.F3216.Shift), decrement the hop limit, and look again.
//     When at least one shift happened the hop limit has been decremented by
//     those shifts; otherwise the packet is plain IPv6 transit: hop limit ≤ 1
//     → drop (DropHopLimit), else decrement once.
//  3. Longest-prefix match of the (new) destination in the static FIB; a
//     miss drops (DropNoRoute). An entry names one port or an ECMP group.
//  4. ECMP group (ECMP mode uplinks): member = hash mod n with ECMPHash over
//     outer source, outer destination, flow label and UDP source port (read
//     from the UDP header after the innermost IPv6 header; 0 when absent).
//
// Egress virtual queue (Admit), per port, with backlog B = bytes waiting
// (both classes, the packet on the wire excluded) and L = frame length:
//   - Priority class (outer DSCP CONTROL, TRIMMED or TRIMMED_LASTHOP): bypasses
//     the ECN and trim thresholds and goes to the high-priority queue; dropped
//     only if B+L exceeds the buffer (DropBuffer).
//   - Otherwise, if trimming is on and B+L > trim threshold: wire.Trim with
//     lastHop = (the port faces a host); a trimmed frame (TRIMMED or
//     TRIMMED_LASTHOP, never trimmed again) joins the high-priority queue. If
//     the frame cannot be trimmed (NO_TRIM class, not a data opcode, not MRC),
//     it is dropped (DropTrimFull) rather than let past the threshold.
//   - Else if B+L > buffer: drop (DropBuffer).
//   - Else it joins the data queue; then, on fabric-facing ports only, if the
//     backlog now exceeds the ECN threshold and the outer ECN is ECT(0) or
//     ECT(1), the outer ECN becomes CE.
//
// Faults a switch can have: a data-plane hang (every arriving frame is
// dropped, DropHung, while the links stay up), and per-link faults (down,
// blackhole, random loss) that sim.go applies on the wire.

import (
	"encoding/binary"
	"github.com/softmrc/softmrc/internal/flowhash"
	"net/netip"

	"github.com/softmrc/softmrc/internal/wire"
)

// Reason names why a packet was counted: the drop reasons and the other
// per-port events. Counters are indexed by it.
type Reason uint8

// Reasons.
const (
	None          Reason = iota // no drop (a Verdict or Forward that passes)
	CtrRx                       // frames received on a port
	CtrTx                       // frames put on the wire by a port
	CtrECNMarked                // CE set by the egress queue
	CtrTrimmed                  // trimmed by the egress queue
	CtrDelivered                // frames handed to a host
	DropParse                   // not Ethernet/IPv6
	DropForMe                   // end of container at a switch
	DropHopLimit                // hop limit ≤ 1
	DropNoRoute                 // FIB miss
	DropBuffer                  // egress buffer full
	DropTrimFull                // above the trim threshold and not trimmable
	DropHung                    // switch data plane hung
	DropLinkDown                // link (or NIC port) down
	DropBlackhole               // link blackholed
	DropLoss                    // random loss on the link
	NumReasons
)

var reasonNames = [NumReasons]string{
	"none", "rx", "tx", "ecn_marked", "trimmed", "delivered", "drop_parse", "drop_for_me", "drop_hop_limit",
	"drop_no_route", "drop_buffer", "drop_trim_full", "drop_hung", "drop_link_down",
	"drop_blackhole", "drop_loss",
}

func (r Reason) String() string {
	if r < NumReasons {
		return reasonNames[r]
	}
	return "unknown"
}

// IsDrop reports whether r counts lost frames.
func (r Reason) IsDrop() bool { return r >= DropParse && r < NumReasons }

// Route is one FIB entry: a port, or (Group ≥ 0) an ECMP group.
type Route struct {
	Prefix netip.Prefix
	Port   int
	Group  int // -1: none
}

// SwitchModel is the forwarding state of one switch: its own uN uSIDs, the
// static FIB and ECMP groups. It is what the XDP switch's maps hold.
type SwitchModel struct {
	Mode  Mode
	Block wire.Addr128
	USIDs []wire.USID
	// fib maps each prefix length in use (longest first in lens) to its routes.
	fib    map[netip.Prefix]Route
	lens   []int
	Groups [][]int
}

// AddRoute installs a FIB entry (replacing one with the same prefix).
func (m *SwitchModel) AddRoute(r Route) {
	if m.fib == nil {
		m.fib = make(map[netip.Prefix]Route)
	}
	r.Prefix = r.Prefix.Masked()
	m.fib[r.Prefix] = r
	b := r.Prefix.Bits()
	for i, l := range m.lens {
		if l == b {
			return
		}
		if l < b {
			m.lens = append(m.lens[:i], append([]int{b}, m.lens[i:]...)...)
			return
		}
	}
	m.lens = append(m.lens, b)
}

// Lookup is the longest-prefix match of dst.
func (m *SwitchModel) Lookup(dst wire.Addr128) (Route, bool) {
	a := dst.Netip()
	for _, l := range m.lens {
		p, _ := a.Prefix(l)
		if r, ok := m.fib[p]; ok {
			return r, true
		}
	}
	return Route{}, false
}

// ownUN reports whether the active uSID of da is one of the switch's uNs.
func (m *SwitchModel) ownUN(da wire.Addr128) bool {
	for _, u := range m.USIDs {
		if wire.F3216.MatchesUN(da, m.Block, u) {
			return true
		}
	}
	return false
}

// Forward decides the egress port of frame and rewrites the outer IPv6
// header in place (destination, hop limit). It returns the port or a drop
// reason.
func (m *SwitchModel) Forward(frame []byte) (port int, drop Reason) {
	if len(frame) < wire.EthLen+wire.IPv6Len || binary.BigEndian.Uint16(frame[12:14]) != wire.EtherTypeIPv6 {
		return -1, DropParse
	}
	ip := wire.IPv6(frame[wire.EthLen:])
	if ip.Version() != 6 || int(ip.PayloadLen()) > len(frame)-wire.EthLen-wire.IPv6Len {
		return -1, DropParse
	}
	da := ip.Dst()
	if d0 := frame[wire.EthLen+24]; d0 == 0xff || d0 == 0xfe && frame[wire.EthLen+25]&0xc0 == 0x80 {
		// Multicast and link-local (neighbour discovery): the XDP switch
		// passes them to its kernel; nothing here forwards them.
		return -1, DropForMe
	}
	shifted := false
	if m.Mode == ModeSRv6 {
		for i := 0; i < wire.F3216.Slots() && m.ownUN(da); i++ {
			if wire.F3216.ArgIsZero(da) {
				return -1, DropForMe
			}
			if ip.HopLimit() <= 1 {
				return -1, DropHopLimit
			}
			da = wire.F3216.Shift(da)
			ip.SetDst(da)
			ip.SetHopLimit(ip.HopLimit() - 1)
			shifted = true
		}
	}
	if !shifted {
		if ip.HopLimit() <= 1 {
			return -1, DropHopLimit
		}
		ip.SetHopLimit(ip.HopLimit() - 1)
	}
	r, ok := m.Lookup(da)
	if !ok {
		return -1, DropNoRoute
	}
	if r.Group < 0 {
		return r.Port, 0
	}
	g := m.Groups[r.Group]
	return g[ECMPHash(frame)%uint32(len(g))], 0
}

// ECMPHash is the flow hash of the ECMP groups (internal/flowhash, the
// function the XDP switch computes, so both pick the same member) over the
// outer source, the outer destination, the flow label and the UDP source port
// of the UDP header behind the innermost IPv6 header (0 when there is none).
func ECMPHash(frame []byte) uint32 {
	ip := frame[wire.EthLen:]
	var src, dst [16]byte
	copy(src[:], ip[8:24])
	copy(dst[:], ip[24:40])
	fl := wire.IPv6(ip).FlowLabel()
	inner := wire.EthLen
	if ip[6] == wire.ProtoIPv6 {
		if len(frame) < inner+2*wire.IPv6Len || frame[inner+wire.IPv6Len]>>4 != 6 {
			return flowhash.Sum(src, dst, fl, 0)
		}
		inner += wire.IPv6Len
	}
	var sport uint16
	if frame[inner+6] == wire.ProtoUDP && len(frame) >= inner+wire.IPv6Len+wire.UDPLen {
		sport = uint16(frame[inner+wire.IPv6Len])<<8 | uint16(frame[inner+wire.IPv6Len+1])
	}
	return flowhash.Sum(src, dst, fl, sport)
}

// QueueState is what Admit needs to know of an egress port.
type QueueState struct {
	Backlog     int  // bytes waiting (both classes), the frame on the wire excluded
	HostFacing  bool // the port leads to a NIC: trim with lastHop, never mark ECN
	ECNBytes    int  // 0 = off
	TrimBytes   int  // 0 = off
	BufferBytes int  // 0 = unlimited
	HostECN     bool // a host-facing port marks too (mrc-switchd's host_ecn)
}

// Verdict is Admit's decision.
type Verdict struct {
	Drop     Reason // None = admitted
	Priority bool   // high-priority queue
	Len      int    // frame length after a trim
	Marked   bool   // CE set
	Trimmed  bool
}

// IsPriority reports whether the frame's outer DSCP is a class that bypasses
// the data thresholds (CONTROL, TRIMMED, TRIMMED_LASTHOP).
func IsPriority(frame []byte) bool {
	if len(frame) < wire.EthLen+wire.IPv6Len {
		return false
	}
	switch wire.IPv6(frame[wire.EthLen:]).DSCP() {
	case wire.DSCPControl, wire.DSCPTrimmed, wire.DSCPTrimmedLastHop:
		return true
	}
	return false
}

// Admit applies the egress virtual queue to frame (which it may trim or mark
// in place) given the port's state.
func Admit(q QueueState, frame []byte) Verdict {
	n := len(frame)
	over := func(limit int, l int) bool { return limit > 0 && q.Backlog+l > limit }
	if IsPriority(frame) {
		if over(q.BufferBytes, n) {
			return Verdict{Drop: DropBuffer}
		}
		return Verdict{Priority: true, Len: n}
	}
	if over(q.TrimBytes, n) {
		t, ok := wire.Trim(frame, q.HostFacing)
		if !ok {
			return Verdict{Drop: DropTrimFull}
		}
		if over(q.BufferBytes, t) {
			return Verdict{Drop: DropBuffer}
		}
		return Verdict{Priority: true, Len: t, Trimmed: true}
	}
	if over(q.BufferBytes, n) {
		return Verdict{Drop: DropBuffer}
	}
	v := Verdict{Len: n}
	if (!q.HostFacing || q.HostECN) && q.ECNBytes > 0 && q.Backlog+n > q.ECNBytes {
		ip := wire.IPv6(frame[wire.EthLen:])
		if e := ip.ECN(); e == wire.ECNECT0 || e == wire.ECNECT1 {
			ip.SetECN(wire.ECNCE)
			v.Marked = true
		}
	}
	return v
}
