package wire

// PeekDestQP returns the BTH destination QP of an MRC or RoCEv2 frame
// without decoding it: Ethernet, IPv6 (and an inner IPv6 when the frame is
// IPv6-in-IPv6, as uSID frames are), UDP, then the BTH at a fixed offset.
// It checks only what it needs to find the BTH (EtherType, next headers,
// length), not ports, lengths or the ICRC: a frame it accepts may still be
// one the engine drops. mrc-nicd's shards (--threads) use it to hand a
// frame to the engine that owns its QP before anything else reads it.
func PeekDestQP(frame []byte) (QPN, bool) {
	if len(frame) < EthLen+IPv6Len || Eth(frame).EtherType() != EtherTypeIPv6 {
		return 0, false
	}
	off := EthLen
	next := IPv6(frame[off:]).NextHeader()
	if next == ProtoIPv6 {
		off += IPv6Len
		if len(frame) < off+IPv6Len {
			return 0, false
		}
		next = IPv6(frame[off:]).NextHeader()
	}
	off += IPv6Len + UDPLen
	if next != ProtoUDP || len(frame) < off+BTHLen {
		return 0, false
	}
	return BTH(frame[off:]).DestQP(), true
}
