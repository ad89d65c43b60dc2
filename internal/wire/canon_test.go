package wire

// canonical returns the bytes Encode(Decode(f)) must produce for a frame f
// that decodes. It is spelled out byte by byte from docs/wire-format.md
// ("Canonical form"), independently of Decode/Encode, so the fuzz and golden
// tests check the codec against the document rather than against itself:
//
//   - the inner IPv6 header (SRv6 mode) gets the outer traffic class and hop
//     limit (Packet has one of each; switches rewrite only the outer header);
//   - hop limit 0 becomes 64 (Packet.HopLimit 0 means "default");
//   - both flow labels become the EV's (the inner label's low 16 bits);
//   - UDP checksum 0; BTH TVer 0, reserved byte 4 and byte-8 bits 3:0 zero,
//     the ts bit zero on packets that are not data;
//   - every reserved bit of the MRC headers zero, the ERTH tsr/ftype word
//     0x0001 (timestamp format), pad bytes zero;
//   - the ICRC recomputed (absent on trimmed frames).
func canonical(f []byte) []byte {
	c := append([]byte(nil), f...)
	outer := c[EthLen : EthLen+IPv6Len]
	if outer[7] == 0 {
		outer[7] = 64
	}
	tc := outer[0]<<4 | outer[1]>>4
	inner := outer
	ioff := EthLen
	if outer[6] == 41 {
		ioff = EthLen + IPv6Len
		inner = c[ioff : ioff+IPv6Len]
		inner[7] = outer[7]
	}
	flow := uint32(inner[2])<<8 | uint32(inner[3]) // low 16 bits of the inner label
	for _, h := range [][]byte{outer, inner} {
		h[0] = 0x60 | tc>>4
		h[1] = tc << 4 // flow label bits 19:16 are 0
		h[2], h[3] = byte(flow>>8), byte(flow)
	}
	udp := c[ioff+IPv6Len:]
	udp[6], udp[7] = 0, 0
	bth := udp[UDPLen:]
	op := Opcode(bth[0])
	data := op >= 0xC6 && op <= 0xCB
	bth[1] &^= 0x0F
	bth[4] = 0
	bth[8] &^= 0x0F
	if !data {
		bth[8] &^= 0x10
	}
	x := bth[BTHLen:]
	end := len(c) // end of headers+payload+pad
	trimmedDSCP := tc>>2 == DSCPTrimmed || tc>>2 == DSCPTrimmedLastHop
	hdr := 0
	switch {
	case data:
		hdr = 4 + 16
		if bth[8]&0x10 != 0 {
			t := x[4:8]
			t[2] &= 0x80
			t[3] &= 0x0F
			hdr += 4
		}
		if op == 0xC9 || op == 0xCB {
			hdr += 4
		}
	case op == 0xD1:
		hdr = 4
	case op == 0xDC:
		x[0] = 0
		x[1] &= 0x62
		x[12] = 0
		x[30] &= 0x7F
		hdr = 36
	case op == 0xDD:
		x[0], x[1], x[12], x[17] = 0, 0, 0, 0
		hdr = 20
	case op == 0xDE:
		x[0], x[1], x[2], x[6], x[7] = 0, 0, 0, 0, 0
		x[14] &= 0x80
		x[15] &= 0x0F
		hdr = 16
	case op == 0xD8:
		x[0], x[2] = 0, 0
		x[1] &= 0x30
		clear(x[8:12])
		x[14], x[15] = 0, 1
		hdr = 16
	case op == 0xD9:
		x[0], x[2] = 0, 0
		x[1] &= 0x30
		clear(x[8:28])
		clear(x[30:36])
		hdr = 36
	case op == 0x81: // CNP: 16 reserved bytes, ignored on receipt, sent as 0
		clear(x[:CNPLen])
		hdr = CNPLen
	}
	if data && trimmedDSCP && len(x) == hdr {
		return c // trimmed: no payload, pad or ICRC
	}
	end -= ICRCLen
	pad := int(bth[1] >> 4 & 3)
	clear(c[end-pad : end])
	le.PutUint32(c[end:], ICRC(c[ioff:end]))
	return c
}
