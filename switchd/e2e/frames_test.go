package e2e

import (
	"encoding/binary"
	"net"
	"net/netip"
)

// Test frame (conventions.md data framing without the MRC headers):
//
//	Eth | outer IPv6 (nh 41, DA = uSID container) | IPv6 (nh 17) | UDP 4791 | payload
//
// payload = 8-byte run magic | 4-byte sequence | 4 zero bytes.
const (
	ethLen     = 14
	ip6Len     = 40
	udpLen     = 8
	payloadLen = 16
	frameLen   = ethLen + 2*ip6Len + udpLen + payloadLen
	offOuter   = ethLen
	offInner   = ethLen + ip6Len
	offUDP     = offInner + ip6Len
	offPayload = offUDP + udpLen
)

type frameSpec struct {
	dst, src           net.HardwareAddr
	outerSrc, outerDst netip.Addr
	innerSrc, innerDst netip.Addr
	hopLimit           uint8
	flowLabel          uint32
	sport              uint16
	magic              [8]byte
	seq                uint32
}

func putIP6(b []byte, tc uint8, flow uint32, plen uint16, nh, hl uint8, src, dst netip.Addr) {
	binary.BigEndian.PutUint32(b[0:4], 6<<28|uint32(tc)<<20|flow&0xfffff)
	binary.BigEndian.PutUint16(b[4:6], plen)
	b[6], b[7] = nh, hl
	s, d := src.As16(), dst.As16()
	copy(b[8:24], s[:])
	copy(b[24:40], d[:])
}

func buildFrame(s frameSpec) []byte {
	b := make([]byte, frameLen)
	copy(b[0:6], s.dst)
	copy(b[6:12], s.src)
	binary.BigEndian.PutUint16(b[12:14], 0x86dd)
	// DSCP TRIMMABLE (10), ECT(0), as MRC data is sent.
	tc := uint8(10<<2 | 2)
	putIP6(b[offOuter:], tc, s.flowLabel, ip6Len+udpLen+payloadLen, 41, s.hopLimit, s.outerSrc, s.outerDst)
	putIP6(b[offInner:], tc, s.flowLabel, udpLen+payloadLen, 17, 64, s.innerSrc, s.innerDst)
	u := b[offUDP:]
	binary.BigEndian.PutUint16(u[0:2], s.sport)
	binary.BigEndian.PutUint16(u[2:4], 4791)
	binary.BigEndian.PutUint16(u[4:6], udpLen+payloadLen)
	// Checksum 0: RoCEv2 practice (conventions.md).
	copy(b[offPayload:], s.magic[:])
	binary.BigEndian.PutUint32(b[offPayload+8:], s.seq)
	return b
}

// parseTestFrame returns the sequence number of a frame built by buildFrame
// with this magic.
func parseTestFrame(b []byte, magic [8]byte) (uint32, bool) {
	if len(b) < frameLen || binary.BigEndian.Uint16(b[12:14]) != 0x86dd || b[offOuter+6] != 41 || b[offInner+6] != 17 {
		return 0, false
	}
	if [8]byte(b[offPayload:offPayload+8]) != magic {
		return 0, false
	}
	return binary.BigEndian.Uint32(b[offPayload+8:]), true
}
