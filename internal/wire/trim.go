package wire

// Trim is the reference trimming operation (docs/conventions.md) that the
// fabric simulator applies and the XDP switch is held against: it cuts a data
// frame right after RETH (or ImmDt), rewrites every IPv6 payload length and the
// UDP length, and sets the outermost DSCP to TRIMMED or TRIMMED_LASTHOP (the
// ECN bits stay). It returns the new frame length; ok is false (and frame is
// untouched) for anything that is not an untrimmed MRC data frame of class
// TRIMMABLE or TRIMMABLE_RETX. It does not allocate.
func Trim(frame []byte, lastHop bool) (n int, ok bool) {
	var p Packet
	if (Decoder{}).Decode(frame, &p) != nil || !p.Opcode.IsData() || p.Trimmed {
		return len(frame), false
	}
	// Only the trimmable classes are trimmed (conventions.md); everything
	// else (NO_TRIM, CONTROL, already TRIMMED, unknown values) is left alone.
	if p.DSCP != DSCPTrimmable && p.DSCP != DSCPTrimmableRetx {
		return len(frame), false
	}
	n = p.PayOff
	outer := IPv6(frame[EthLen:])
	outer.SetPayloadLen(uint16(n - EthLen - IPv6Len))
	if p.Encap {
		IPv6(frame[p.InnerOff:]).SetPayloadLen(uint16(n - p.InnerOff - IPv6Len))
	}
	UDP(frame[p.InnerOff+IPv6Len:]).SetLength(uint16(n - p.InnerOff - IPv6Len))
	d := uint8(DSCPTrimmed)
	if lastHop {
		d = DSCPTrimmedLastHop
	}
	outer.SetDSCP(d)
	return n, true
}
