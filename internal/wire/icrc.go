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
// hop limit set to all ones (version, payload length, next header and the
// addresses stay covered), the UDP header with the checksum set to all ones,
// BTH with its reserved byte 4 set to all ones, then the rest unchanged. The
// result goes on the wire least significant byte first (as Soft-RoCE does).
// b is not modified and nothing is allocated: the masked bytes are fed from
// package-level constants rather than from a masked copy (a local copy
// escapes to the heap through hash/crc32).
func ICRC(b []byte) uint32 {
	if len(b) < IPv6Len+UDPLen+BTHLen {
		return 0
	}
	const u, h = IPv6Len, IPv6Len + UDPLen // offsets of UDP and BTH
	t := crc32.IEEETable
	crc := crc32.Update(icrcSeed, t, ip6Masked[b[0]>>4][:]) // version kept; TC, flow label masked
	crc = crc32.Update(crc, t, b[4:7])                      // payload length, next header
	crc = crc32.Update(crc, t, ones[:1])                    // hop limit
	crc = crc32.Update(crc, t, b[8:u+6])                    // addresses, UDP ports and length
	crc = crc32.Update(crc, t, ones[:2])                    // UDP checksum
	crc = crc32.Update(crc, t, b[h:h+4])                    // BTH opcode, flags, P_Key
	crc = crc32.Update(crc, t, ones[:1])                    // BTH reserved byte 4
	return crc32.Update(crc, t, b[h+5:])                    // rest of BTH, headers, payload, pad
}

// icrcInPlace computes the same value as ICRC with one pass over b: it
// writes the masks into b, runs the CRC and puts the original bytes back.
// Encode uses it on the frame it is building (one CRC call instead of eight
// matters for small control packets); nobody else may see b meanwhile.
func icrcInPlace(b []byte) uint32 {
	if len(b) < IPv6Len+UDPLen+BTHLen {
		return 0
	}
	const u, h = IPv6Len, IPv6Len + UDPLen
	w0 := be.Uint32(b[0:4])
	hop, c0, c1, r := b[7], b[u+6], b[u+7], b[h+4]
	be.PutUint32(b[0:4], w0|0x0FFFFFFF)
	b[7], b[u+6], b[u+7], b[h+4] = 0xFF, 0xFF, 0xFF, 0xFF
	crc := crc32.Update(icrcSeed, crc32.IEEETable, b)
	be.PutUint32(b[0:4], w0)
	b[7], b[u+6], b[u+7], b[h+4] = hop, c0, c1, r
	return crc
}

var (
	ones = [8]byte{0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF}
	// icrcSeed is the CRC of the 8 bytes of 0xFF that stand for the masked
	// LRH (Soft-RoCE starts its register at the equivalent 0xDEBB20E3).
	icrcSeed = crc32.Checksum(ones[:], crc32.IEEETable)
	// ip6Masked[v] is the first IPv6 word with version v and the traffic
	// class and flow label masked to ones.
	ip6Masked = func() (m [16][4]byte) {
		for v := range m {
			m[v] = [4]byte{byte(v)<<4 | 0x0F, 0xFF, 0xFF, 0xFF}
		}
		return
	}()
)

// CheckICRC reports whether the ICRC of a frame decoded into p is right.
// Trimmed packets carry no ICRC and report false.
func CheckICRC(frame []byte, p *Packet) bool {
	if p.Trimmed || len(frame) < p.InnerOff+IPv6Len+UDPLen+BTHLen+ICRCLen {
		return false
	}
	end := len(frame) - ICRCLen
	return ICRC(frame[p.InnerOff:end]) == le.Uint32(frame[end:])
}
