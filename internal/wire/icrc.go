package wire

import (
	"encoding/binary"
	"hash/crc32"
)

var le = binary.LittleEndian

// ICRC computes the RoCEv2 invariant CRC over b, which starts at the IPv6
// header in front of UDP and ends just before the ICRC field. As RoCEv2
// defines it: CRC-32 (the Ethernet polynomial) over 8 bytes of 0xFF standing
// for the masked LRH, then the IPv6 header with traffic class, flow label and
// hop limit set to all ones, the UDP header with the checksum set to all ones,
// BTH with its reserved byte 4 set to all ones, then the rest unchanged. The
// result goes on the wire least significant byte first (as Soft-RoCE does).
// b is not modified and nothing is allocated.
func ICRC(b []byte) uint32 {
	var m [IPv6Len + UDPLen + BTHLen]byte
	if len(b) < len(m) {
		return 0
	}
	copy(m[:], b[:len(m)])
	m[0] = 0x6F
	m[1], m[2], m[3] = 0xFF, 0xFF, 0xFF
	m[7] = 0xFF
	m[IPv6Len+6], m[IPv6Len+7] = 0xFF, 0xFF
	m[IPv6Len+UDPLen+4] = 0xFF
	crc := crc32.Update(0, crc32.IEEETable, lrhMask[:])
	crc = crc32.Update(crc, crc32.IEEETable, m[:])
	return crc32.Update(crc, crc32.IEEETable, b[len(m):])
}

var lrhMask = [8]byte{0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF}

// CheckICRC reports whether the ICRC of a frame decoded into p is right.
// Trimmed packets carry no ICRC and report false.
func CheckICRC(frame []byte, p *Packet) bool {
	if p.Trimmed || len(frame) < p.InnerOff+IPv6Len+UDPLen+BTHLen+ICRCLen {
		return false
	}
	end := len(frame) - ICRCLen
	return ICRC(frame[p.InnerOff:end]) == le.Uint32(frame[end:])
}
