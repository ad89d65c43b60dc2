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
//
// b is not modified and nothing is allocated. The 60 masked header bytes are
// copied to the stack, masked there and run through this package's own
// slicing-by-8 loop (a stack copy handed to hash/crc32 would escape to the
// heap: crc32.Update dispatches through a function variable); the rest of
// the frame, payload included, goes through one crc32.Update call, which
// uses CLMUL on amd64. Feeding the header to crc32.Update in eight pieces
// (what this did before) cost as much as the CRC of a 2 KiB payload: each
// call pays the table dispatch and a sync.Once, and pieces under 16 bytes
// run a byte at a time.
func ICRC(b []byte) uint32 {
	if len(b) < icrcHdrLen {
		return 0
	}
	const u, h = IPv6Len, IPv6Len + UDPLen // offsets of UDP and BTH
	var m [icrcHdrLen]byte
	copy(m[:], b)
	m[0] |= 0x0F                        // traffic class, high nibble (version kept)
	m[1], m[2], m[3] = 0xFF, 0xFF, 0xFF // traffic class, low nibble; flow label
	m[7] = 0xFF                         // hop limit
	m[u+6], m[u+7] = 0xFF, 0xFF         // UDP checksum
	m[h+4] = 0xFF                       // BTH reserved byte 4
	crc := icrcHeader(icrcSeed, &m)
	return crcUpdate(crc, b[icrcHdrLen:])
}

// crcUpdate is crc32.Update(crc, crc32.IEEETable, p) with a cheaper end:
// hash/crc32 runs CLMUL over p's 16-byte blocks (from 64 bytes on) and a
// byte-at-a-time loop over the last len(p)%16 bytes, which for a 2 KiB data
// frame (8 left over) cost about as much as 500 bytes of CLMUL. Here the
// blocks go to crc32.Update and the rest through slicing-by-8 steps, with a
// byte loop only for the last len(p)%8.
func crcUpdate(crc uint32, p []byte) uint32 {
	if len(p) < 64 {
		return crc32.Update(crc, crc32.IEEETable, p)
	}
	do := len(p) &^ 15
	crc = crc32.Update(crc, crc32.IEEETable, p[:do])
	if do == len(p) {
		return crc
	}
	return slicing8(crc, p[do:])
}

// icrcHdrLen is the part of the ICRC input that has masked fields: IPv6,
// UDP and BTH.
const icrcHdrLen = IPv6Len + UDPLen + BTHLen

// icrcHeader continues the CRC-32 (IEEE, hash/crc32's convention: crc is
// the finished value of what came before) over the masked header.
func icrcHeader(crc uint32, m *[icrcHdrLen]byte) uint32 { return slicing8(crc, m[:]) }

// slicing8 continues the CRC-32 (IEEE, hash/crc32's convention) over p,
// eight bytes per step (slicing-by-8, the algorithm hash/crc32 uses for
// short inputs), the last len(p)%8 a byte at a time.
func slicing8(crc uint32, p []byte) uint32 {
	t := &icrcSlicing8
	crc = ^crc
	for len(p) >= 8 {
		crc ^= le.Uint32(p)
		crc = t[0][p[7]] ^ t[1][p[6]] ^ t[2][p[5]] ^ t[3][p[4]] ^
			t[4][crc>>24] ^ t[5][crc>>16&0xFF] ^ t[6][crc>>8&0xFF] ^ t[7][crc&0xFF]
		p = p[8:]
	}
	for _, v := range p {
		crc = t[0][byte(crc)^v] ^ crc>>8
	}
	return ^crc
}

// icrcSlicing8 holds the slicing-by-8 tables of the IEEE polynomial:
// row 0 is the byte-at-a-time table, row k the CRC of a byte followed by k
// zero bytes.
var icrcSlicing8 = func() (t [8][256]uint32) {
	t[0] = *crc32.IEEETable
	for i := range 256 {
		c := t[0][i]
		for k := 1; k < 8; k++ {
			c = t[0][c&0xFF] ^ c>>8
			t[k][i] = c
		}
	}
	return
}()

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
	crc := crcUpdate(icrcSeed, b)
	be.PutUint32(b[0:4], w0)
	b[7], b[u+6], b[u+7], b[h+4] = hop, c0, c1, r
	return crc
}

var (
	ones = [8]byte{0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF}
	// icrcSeed is the CRC of the 8 bytes of 0xFF that stand for the masked
	// LRH (Soft-RoCE starts its register at the equivalent 0xDEBB20E3).
	icrcSeed = crc32.Checksum(ones[:], crc32.IEEETable)
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

// CheckICRCInPlace is CheckICRC for a frame the caller owns: it masks the
// header fields in the frame itself, runs one CRC pass over header and
// payload together and puts the original bytes back before it returns, so
// the frame is unchanged afterwards but must not be read by anyone else
// (another goroutine, a shared golden buffer) meanwhile. It saves the
// separate header pass of CheckICRC: 60 bytes through a table loop, which
// cost a receiver a third as much as the CLMUL pass over a 2 KiB payload
// (BenchmarkCheckICRC).
func CheckICRCInPlace(frame []byte, p *Packet) bool {
	if p.Trimmed || len(frame) < p.InnerOff+IPv6Len+UDPLen+BTHLen+ICRCLen {
		return false
	}
	end := len(frame) - ICRCLen
	return icrcInPlace(frame[p.InnerOff:end]) == le.Uint32(frame[end:])
}
