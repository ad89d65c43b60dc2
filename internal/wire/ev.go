package wire

// The EV travels in the UDP source port (EV bits 15..0) and the IPv6 flow label
// (EV bits 31..16 in the label's low 16 bits; the label's top 4 bits are 0).
// This is the mapping of the most detailed public description (MANI, "low 16
// bits into the UDP source port, high 16 bits into the low 16 bits of the flow
// label"); the Python emulator does the reverse. See docs/wire-format.md.

// SrcPort is the UDP source port that carries ev.
func (ev EV) SrcPort() uint16 { return uint16(ev) }

// FlowLabel is the 20-bit IPv6 flow label that carries ev.
func (ev EV) FlowLabel() uint32 { return uint32(ev) >> 16 }

// EVFromWire rebuilds the EV from a UDP source port and a flow label.
// The flow label's top 4 bits are ignored.
func EVFromWire(srcPort uint16, flowLabel uint32) EV {
	return EV(uint32(srcPort) | (flowLabel&0xFFFF)<<16)
}

// EV bit fields (ours, docs/conventions.md): bits 31..28 plane, 27..20 T1
// index inside the plane (the source T0's uplink), 19..0 free entropy.
const (
	evPlaneShift = 28
	evT1Shift    = 20
	evT1Mask     = 0xFF
	evEntropyMax = 1<<20 - 1
)

// MakeEV builds an EV from its fields. entropy is truncated to 20 bits.
func MakeEV(plane Plane, t1 uint8, entropy uint32) EV {
	return EV(uint32(plane&0xF)<<evPlaneShift | uint32(t1)<<evT1Shift | entropy&evEntropyMax)
}

// Plane is the plane (NIC port) the EV sends on.
func (ev EV) Plane() Plane { return Plane(uint32(ev) >> evPlaneShift) }

// T1 is the T1 index (source T0 uplink) the EV goes through.
func (ev EV) T1() uint8 { return uint8(uint32(ev) >> evT1Shift & evT1Mask) }

// Entropy is the free 20-bit part of the EV.
func (ev EV) Entropy() uint32 { return uint32(ev) & evEntropyMax }
