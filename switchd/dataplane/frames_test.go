package dataplane

import (
	"encoding/binary"
	"net/netip"
)

// Frame builder for the tests: Eth | IPv6 [| IPv6] | UDP | BTH | METH |
// [TSETH] | RETH | [ImmDt] | payload | ICRC, with every length field computed
// from what is actually present. Deliberately independent of the program
// under test (and of internal/wire, which is written concurrently).

type mrcHdr struct {
	opcode  uint8
	ts      bool // BTH.ts: TSETH present
	payload int  // payload bytes after the headers
	dmaLen  int  // RETH DMA length; 0 = payload
	noICRC  bool // as after trimming
}

type testFrame struct {
	dstMAC, srcMAC [6]byte
	ethType        uint16 // 0 = IPv6
	tc             uint8  // traffic class (DSCP<<2 | ECN)
	innerTC        *uint8 // inner traffic class when it differs from tc
	flow           uint32
	hl             uint8
	src, dst       netip.Addr
	encap          bool       // outer IPv6 (next header 41) + inner IPv6
	innerSrc       netip.Addr // inner addresses (encap only)
	innerDst       netip.Addr
	nextHeader     uint8 // override of the (inner-most) L4 protocol; 0 = UDP
	sport, dport   uint16
	mrc            *mrcHdr // nil: plain UDP with rawPayload
	rawPayload     []byte
}

var (
	macSender = [6]byte{0x02, 0, 0, 0, 0, 0x01}
	macSwitch = [6]byte{0x02, 0, 0, 0, 0, 0x02}
)

func (f testFrame) l4() []byte {
	var b []byte
	if f.mrc != nil {
		m := f.mrc
		bth := make([]byte, 12)
		bth[0] = m.opcode
		if m.ts {
			bth[8] = 0x10
		}
		binary.BigEndian.PutUint32(bth[8:], uint32(bth[8])<<24|0x123456)
		b = append(b, bth...)
		b = append(b, 0, 1, 0, 2) // METH
		if m.ts {
			b = append(b, 0xab, 0xcd, 0, 1) // TSETH
		}
		reth := make([]byte, 16)
		binary.BigEndian.PutUint64(reth, 0x1000)
		dma := m.dmaLen
		if dma == 0 {
			dma = m.payload
		}
		binary.BigEndian.PutUint32(reth[12:], uint32(dma))
		b = append(b, reth...)
		if m.opcode == 0xC9 || m.opcode == 0xCB {
			b = append(b, 0xde, 0xad, 0xbe, 0xef) // ImmDt
		}
		for i := 0; i < m.payload; i++ {
			b = append(b, byte(i))
		}
		if !m.noICRC {
			b = append(b, 0x11, 0x22, 0x33, 0x44)
		}
	} else {
		b = append(b, f.rawPayload...)
	}
	nh := f.nextHeader
	if nh == 0 || nh == 17 {
		udp := make([]byte, 8)
		binary.BigEndian.PutUint16(udp[0:], f.sport)
		binary.BigEndian.PutUint16(udp[2:], f.dport)
		binary.BigEndian.PutUint16(udp[4:], uint16(8+len(b)))
		b = append(udp, b...)
	}
	return b
}

func ip6hdr(tc uint8, flow uint32, plen int, nh, hl uint8, src, dst netip.Addr) []byte {
	h := make([]byte, 40)
	binary.BigEndian.PutUint32(h, 6<<28|uint32(tc)<<20|flow&0xfffff)
	binary.BigEndian.PutUint16(h[4:], uint16(plen))
	h[6] = nh
	h[7] = hl
	s, d := src.As16(), dst.As16()
	copy(h[8:], s[:])
	copy(h[24:], d[:])
	return h
}

func (f testFrame) bytes() []byte {
	et := f.ethType
	if et == 0 {
		et = 0x86dd
	}
	b := append([]byte{}, f.dstMAC[:]...)
	b = append(b, f.srcMAC[:]...)
	b = binary.BigEndian.AppendUint16(b, et)
	if et != 0x86dd {
		return append(b, f.rawPayload...)
	}
	nh := f.nextHeader
	if nh == 0 {
		nh = 17
	}
	l4 := f.l4()
	if f.encap {
		itc := f.tc
		if f.innerTC != nil {
			itc = *f.innerTC
		}
		inner := ip6hdr(itc, f.flow, len(l4), nh, 64, f.innerSrc, f.innerDst)
		b = append(b, ip6hdr(f.tc, f.flow, len(inner)+len(l4), 41, f.hl, f.src, f.dst)...)
		b = append(b, inner...)
	} else {
		b = append(b, ip6hdr(f.tc, f.flow, len(l4), nh, f.hl, f.src, f.dst)...)
	}
	return append(b, l4...)
}

// Offsets into a frame built above.
const (
	offOuterIP6 = 14
	offOuterTC  = offOuterIP6
	offOuterHL  = offOuterIP6 + 7
	offOuterDA  = offOuterIP6 + 24
)

func frameDA(b []byte) netip.Addr {
	var a [16]byte
	copy(a[:], b[offOuterDA:offOuterDA+16])
	return netip.AddrFrom16(a)
}

func frameTC(b []byte) uint8 {
	return uint8(binary.BigEndian.Uint32(b[offOuterIP6:]) >> 20)
}
