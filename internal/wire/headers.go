package wire

import "encoding/binary"

var be = binary.BigEndian

// Each header type below is a zero-copy view over the bytes of one header. A
// view must be at least the header's length (the caller checks, Decode does);
// getters and setters touch only their own bits.

// Eth is an Ethernet II header.
type Eth []byte

func (h Eth) Dst() (m MAC)          { copy(m[:], h[0:6]); return }
func (h Eth) Src() (m MAC)          { copy(m[:], h[6:12]); return }
func (h Eth) EtherType() uint16     { return be.Uint16(h[12:14]) }
func (h Eth) SetDst(m MAC)          { copy(h[0:6], m[:]) }
func (h Eth) SetSrc(m MAC)          { copy(h[6:12], m[:]) }
func (h Eth) SetEtherType(t uint16) { be.PutUint16(h[12:14], t) }

// IPv6 is an IPv6 fixed header.
type IPv6 []byte

func (h IPv6) Version() uint8         { return h[0] >> 4 }
func (h IPv6) TrafficClass() uint8    { return h[0]<<4 | h[1]>>4 }
func (h IPv6) DSCP() uint8            { return h.TrafficClass() >> 2 }
func (h IPv6) ECN() uint8             { return h.TrafficClass() & 3 }
func (h IPv6) FlowLabel() uint32      { return be.Uint32(h[0:4]) & 0xFFFFF }
func (h IPv6) PayloadLen() uint16     { return be.Uint16(h[4:6]) }
func (h IPv6) NextHeader() uint8      { return h[6] }
func (h IPv6) HopLimit() uint8        { return h[7] }
func (h IPv6) Src() Addr128           { return Addr128FromSlice(h[8:24]) }
func (h IPv6) Dst() Addr128           { return Addr128FromSlice(h[24:40]) }
func (h IPv6) SetPayloadLen(n uint16) { be.PutUint16(h[4:6], n) }
func (h IPv6) SetNextHeader(n uint8)  { h[6] = n }
func (h IPv6) SetHopLimit(n uint8)    { h[7] = n }
func (h IPv6) SetSrc(a Addr128)       { a.Put(h[8:24]) }
func (h IPv6) SetDst(a Addr128)       { a.Put(h[24:40]) }

// SetVersionTCFlow writes version 6, the traffic class (DSCP<<2|ECN) and the flow label.
func (h IPv6) SetVersionTCFlow(dscp, ecn uint8, flow uint32) {
	tc := uint32(dscp&0x3F)<<2 | uint32(ecn&3)
	be.PutUint32(h[0:4], 6<<28|tc<<20|flow&0xFFFFF)
}

// SetTrafficClass rewrites the 8-bit traffic class (DSCP<<2 | ECN) and
// nothing else.
func (h IPv6) SetTrafficClass(tc uint8) {
	h[0] = h[0]&0xF0 | tc>>4
	h[1] = h[1]&0x0F | tc<<4
}

// SetDSCP rewrites the DSCP and nothing else (ECN, version, flow label stay).
func (h IPv6) SetDSCP(d uint8) { h.SetTrafficClass(d<<2 | h.ECN()) }

// SetECN rewrites the ECN bits and nothing else.
func (h IPv6) SetECN(e uint8) { h.SetTrafficClass(h.DSCP()<<2 | e&3) }

// SetFlowLabel rewrites the 20-bit flow label and nothing else.
func (h IPv6) SetFlowLabel(f uint32) {
	h[1] = h[1]&0xF0 | byte(f>>16)&0x0F
	h[2], h[3] = byte(f>>8), byte(f)
}

// UDP is a UDP header.
type UDP []byte

func (h UDP) SrcPort() uint16      { return be.Uint16(h[0:2]) }
func (h UDP) DstPort() uint16      { return be.Uint16(h[2:4]) }
func (h UDP) Length() uint16       { return be.Uint16(h[4:6]) }
func (h UDP) Checksum() uint16     { return be.Uint16(h[6:8]) }
func (h UDP) SetSrcPort(p uint16)  { be.PutUint16(h[0:2], p) }
func (h UDP) SetDstPort(p uint16)  { be.PutUint16(h[2:4], p) }
func (h UDP) SetLength(n uint16)   { be.PutUint16(h[4:6], n) }
func (h UDP) SetChecksum(c uint16) { be.PutUint16(h[6:8], c) }

// BTH is the InfiniBand base transport header with MRC's byte-8 flags.
//
//	byte 0    opcode
//	byte 1    SE(7) M(6) PadCnt(5:4) TVer(3:0)     (IBTA order, see wire-format.md)
//	byte 2-3  P_Key
//	byte 4    reserved (masked in the ICRC)
//	byte 5-7  destination QP
//	byte 8    A(7) R(6) rtx(5) ts(4) reserved(3:0)
//	byte 9-11 PSN
type BTH []byte

func (h BTH) Opcode() Opcode      { return Opcode(h[0]) }
func (h BTH) SE() bool            { return h[1]&0x80 != 0 }
func (h BTH) MigReq() bool        { return h[1]&0x40 != 0 }
func (h BTH) PadCount() uint8     { return h[1] >> 4 & 3 }
func (h BTH) TVer() uint8         { return h[1] & 0xF }
func (h BTH) PKey() uint16        { return be.Uint16(h[2:4]) }
func (h BTH) DestQP() QPN         { return QPN(be.Uint32(h[4:8]) & QPNMask) }
func (h BTH) AckReq() bool        { return h[8]&0x80 != 0 }
func (h BTH) R() bool             { return h[8]&0x40 != 0 }
func (h BTH) Rtx() bool           { return h[8]&0x20 != 0 }
func (h BTH) TS() bool            { return h[8]&0x10 != 0 }
func (h BTH) PSN() PSN            { return PSN(be.Uint32(h[8:12]) & PSNMask) }
func (h BTH) SetOpcode(op Opcode) { h[0] = byte(op) }
func (h BTH) SetDestQP(q QPN)     { h[5], h[6], h[7] = byte(q>>16), byte(q>>8), byte(q) }
func (h BTH) SetPSN(p PSN)        { h[9], h[10], h[11] = byte(p>>16), byte(p>>8), byte(p) }
func (h BTH) SetRtx(v bool)       { setBit(&h[8], 0x20, v) }
func (h BTH) SetTS(v bool)        { setBit(&h[8], 0x10, v) }
func (h BTH) SetAckReq(v bool)    { setBit(&h[8], 0x80, v) }
func (h BTH) SetR(v bool)         { setBit(&h[8], 0x40, v) }
func (h BTH) SetSE(v bool)        { setBit(&h[1], 0x80, v) }
func (h BTH) SetMigReq(v bool)    { setBit(&h[1], 0x40, v) }
func (h BTH) SetPadCount(n uint8) { h[1] = h[1]&^0x30 | (n&3)<<4 }
func (h BTH) SetTVer(v uint8)     { h[1] = h[1]&^0x0F | v&0xF }
func (h BTH) SetPKey(k uint16)    { be.PutUint16(h[2:4], k) }

func setBit(b *byte, m byte, v bool) {
	if v {
		*b |= m
	} else {
		*b &^= m
	}
}

// METH: RQMSN(16) | MSN(16).
type METH []byte

func (h METH) RQMSN() MSN     { return MSN(be.Uint16(h[0:2])) }
func (h METH) MSN() MSN       { return MSN(be.Uint16(h[2:4])) }
func (h METH) SetRQMSN(m MSN) { be.PutUint16(h[0:2], uint16(m)) }
func (h METH) SetMSN(m MSN)   { be.PutUint16(h[2:4], uint16(m)) }

// TSETH: tx_timestamp(16) | tsr(1) | reserved(11) | ftype(4).
type TSETH []byte

func (h TSETH) Timestamp() uint16     { return be.Uint16(h[0:2]) }
func (h TSETH) TSR() bool             { return h[2]&0x80 != 0 }
func (h TSETH) FType() uint8          { return h[3] & 0xF }
func (h TSETH) SetTimestamp(t uint16) { be.PutUint16(h[0:2], t) }
func (h TSETH) SetTSR(v bool)         { setBit(&h[2], 0x80, v) }
func (h TSETH) SetFType(f uint8)      { h[3] = h[3]&^0xF | f&0xF }

// RETH: VA(64) | R_Key(32) | DMA length(32).
type RETH []byte

func (h RETH) VA() uint64         { return be.Uint64(h[0:8]) }
func (h RETH) RKey() uint32       { return be.Uint32(h[8:12]) }
func (h RETH) DMALen() uint32     { return be.Uint32(h[12:16]) }
func (h RETH) SetVA(v uint64)     { be.PutUint64(h[0:8], v) }
func (h RETH) SetRKey(k uint32)   { be.PutUint32(h[8:12], k) }
func (h RETH) SetDMALen(n uint32) { be.PutUint32(h[12:16], n) }

// ImmDt is the 4-byte immediate data of Write-with-Immediate.
type ImmDt []byte

func (h ImmDt) Imm() uint32     { return be.Uint32(h[0:4]) }
func (h ImmDt) SetImm(v uint32) { be.PutUint32(h[0:4], v) }

// AETH is the IBTA ACK extended transport header: syndrome(8) | MSN(24).
type AETH []byte

func (h AETH) Syndrome() uint8     { return h[0] }
func (h AETH) MSN() uint32         { return be.Uint32(h[0:4]) & 0xFFFFFF }
func (h AETH) SetSyndrome(s uint8) { h[0] = s }
func (h AETH) SetMSN(m uint32)     { h[1], h[2], h[3] = byte(m>>16), byte(m>>8), byte(m) }

// SETH is the reliability SACK header (28 bytes) followed by CC_STATE (8).
//
//	0-1   type(15:12)=0 nh(11:7)=0 M(6:5) res(4:2) pr(1) res(0)
//	2-3   ack_psn_offset (int16; probe id in a probe response)
//	4-7   entropy (reflected EV)
//	8-9   spdcid   10-11 dpdcid
//	12    reserved 13-15 cack_psn
//	16    cc_type(7:4) cc_fl(3:0)
//	17    mpr (units of 128 PSNs)
//	18-19 sack_offset (int16): bitmap base = cack_psn + sack_offset
//	20-27 sack_bitmap (bit i, LSB first, = PSN base+i received)
type SETH []byte

func (h SETH) M() MultipathVerdict { return MultipathVerdict(be.Uint16(h[0:2]) >> 5 & 3) }
func (h SETH) Probe() bool         { return be.Uint16(h[0:2])&0x2 != 0 }
func (h SETH) AckPSNOffset() int16 { return int16(be.Uint16(h[2:4])) }
func (h SETH) Entropy() EV         { return EV(be.Uint32(h[4:8])) }
func (h SETH) SPDCID() uint16      { return be.Uint16(h[8:10]) }
func (h SETH) DPDCID() uint16      { return be.Uint16(h[10:12]) }
func (h SETH) CackPSN() PSN        { return PSN(be.Uint32(h[12:16]) & PSNMask) }
func (h SETH) CCType() uint8       { return h[16] >> 4 }
func (h SETH) CCFlags() uint8      { return h[16] & 0xF }
func (h SETH) MPR() uint8          { return h[17] }
func (h SETH) SackOffset() int16   { return int16(be.Uint16(h[18:20])) }
func (h SETH) Bitmap() uint64      { return be.Uint64(h[20:28]) }

func (h SETH) SetM(m MultipathVerdict) {
	be.PutUint16(h[0:2], be.Uint16(h[0:2])&^(3<<5)|uint16(m&3)<<5)
}
func (h SETH) SetProbe(v bool)         { setBit(&h[1], 0x2, v) }
func (h SETH) SetAckPSNOffset(o int16) { be.PutUint16(h[2:4], uint16(o)) }
func (h SETH) SetEntropy(ev EV)        { be.PutUint32(h[4:8], uint32(ev)) }
func (h SETH) SetSPDCID(id uint16)     { be.PutUint16(h[8:10], id) }
func (h SETH) SetDPDCID(id uint16)     { be.PutUint16(h[10:12], id) }
func (h SETH) SetCackPSN(p PSN)        { h[13], h[14], h[15] = byte(p>>16), byte(p>>8), byte(p) }
func (h SETH) SetCCType(t uint8)       { h[16] = h[16]&0x0F | t<<4 }
func (h SETH) SetCCFlags(f uint8)      { h[16] = h[16]&0xF0 | f&0xF }
func (h SETH) SetMPR(m uint8)          { h[17] = m }
func (h SETH) SetSackOffset(o int16)   { be.PutUint16(h[18:20], uint16(o)) }
func (h SETH) SetBitmap(b uint64)      { be.PutUint64(h[20:28], b) }

// CCState is the 8-byte CC_STATE that follows SETH:
// tx_timestamp(16) | r(1) ooo_count(15) | restore_cwnd(1) rcv_cwnd_pen(7) | rcvd_bytes(24, units of 256 B).
type CCState []byte

func (h CCState) Timestamp() uint16     { return be.Uint16(h[0:2]) }
func (h CCState) OOOCount() uint16      { return be.Uint16(h[2:4]) & 0x7FFF }
func (h CCState) RestoreCwnd() bool     { return h[4]&0x80 != 0 }
func (h CCState) RcvCwndPen() uint8     { return h[4] & 0x7F }
func (h CCState) RcvdBytes() uint32     { return be.Uint32(h[4:8]) & 0xFFFFFF }
func (h CCState) SetTimestamp(t uint16) { be.PutUint16(h[0:2], t) }
func (h CCState) SetOOOCount(n uint16) {
	be.PutUint16(h[2:4], be.Uint16(h[2:4])&0x8000|n&0x7FFF)
}
func (h CCState) SetRestoreCwnd(v bool) { setBit(&h[4], 0x80, v) }
func (h CCState) SetRcvCwndPen(p uint8) { h[4] = h[4]&0x80 | p&0x7F }
func (h CCState) SetRcvdBytes(n uint32) { h[5], h[6], h[7] = byte(n>>16), byte(n>>8), byte(n) }

// NETH is the reliability NACK header:
// type/nh/res(16) | reason(8) | vendor(8) | entropy(32) | spdcid(16) | dpdcid(16) |
// res(8) | nack_psn(24) | cc_type(4) cc_fl(4) | res(8) | tx_timestamp(16).
type NETH []byte

func (h NETH) Reason() NackReason     { return NackReason(h[2]) }
func (h NETH) Vendor() uint8          { return h[3] }
func (h NETH) Entropy() EV            { return EV(be.Uint32(h[4:8])) }
func (h NETH) SPDCID() uint16         { return be.Uint16(h[8:10]) }
func (h NETH) DPDCID() uint16         { return be.Uint16(h[10:12]) }
func (h NETH) NackPSN() PSN           { return PSN(be.Uint32(h[12:16]) & PSNMask) }
func (h NETH) CCType() uint8          { return h[16] >> 4 }
func (h NETH) CCFlags() uint8         { return h[16] & 0xF }
func (h NETH) Timestamp() uint16      { return be.Uint16(h[18:20]) }
func (h NETH) SetReason(r NackReason) { h[2] = byte(r) }
func (h NETH) SetVendor(v uint8)      { h[3] = v }
func (h NETH) SetEntropy(ev EV)       { be.PutUint32(h[4:8], uint32(ev)) }
func (h NETH) SetSPDCID(id uint16)    { be.PutUint16(h[8:10], id) }
func (h NETH) SetDPDCID(id uint16)    { be.PutUint16(h[10:12], id) }
func (h NETH) SetNackPSN(p PSN)       { h[13], h[14], h[15] = byte(p>>16), byte(p>>8), byte(p) }
func (h NETH) SetCCType(t uint8)      { h[16] = h[16]&0x0F | t<<4 }
func (h NETH) SetCCFlags(f uint8)     { h[16] = h[16]&0xF0 | f&0xF }
func (h NETH) SetTimestamp(t uint16)  { be.PutUint16(h[18:20], t) }

// PETH is the reliability probe header:
// type/nh/res(16) | res(8) | vendor(8) | probe_id(16) | res(16) | spdcid(16) | dpdcid(16) |
// tx_timestamp(16) | tsr(1) res(11) ftype(4).
type PETH []byte

func (h PETH) ProbeID() uint16       { return be.Uint16(h[4:6]) }
func (h PETH) SPDCID() uint16        { return be.Uint16(h[8:10]) }
func (h PETH) DPDCID() uint16        { return be.Uint16(h[10:12]) }
func (h PETH) Timestamp() uint16     { return be.Uint16(h[12:14]) }
func (h PETH) Vendor() uint8         { return h[3] }
func (h PETH) TSR() bool             { return h[14]&0x80 != 0 }
func (h PETH) FType() uint8          { return h[15] & 0xF }
func (h PETH) SetVendor(v uint8)     { h[3] = v }
func (h PETH) SetProbeID(id uint16)  { be.PutUint16(h[4:6], id) }
func (h PETH) SetSPDCID(id uint16)   { be.PutUint16(h[8:10], id) }
func (h PETH) SetDPDCID(id uint16)   { be.PutUint16(h[10:12], id) }
func (h PETH) SetTimestamp(t uint16) { be.PutUint16(h[12:14], t) }
func (h PETH) SetTSR(v bool)         { setBit(&h[14], 0x80, v) }
func (h PETH) SetFType(f uint8)      { h[15] = h[15]&^0xF | f&0xF }

// ERTH is the endpoint request header:
// type/nh/op(op in byte 1 bits 5:4) | res(8) | vendor(8) | port_status_mask(32) |
// res(32) | tx_timestamp(16) | tsr ftype(16).
type ERTH []byte

func (h ERTH) Op() EndpointOp             { return EndpointOp(h[1] >> 4 & 3) }
func (h ERTH) PortStatusMask() uint32     { return be.Uint32(h[4:8]) }
func (h ERTH) Timestamp() uint16          { return be.Uint16(h[12:14]) }
func (h ERTH) Vendor() uint8              { return h[3] }
func (h ERTH) FType() uint8               { return h[15] & 0xF }
func (h ERTH) SetOp(op EndpointOp)        { h[1] = h[1]&^0x30 | byte(op&3)<<4 }
func (h ERTH) SetVendor(v uint8)          { h[3] = v }
func (h ERTH) SetPortStatusMask(m uint32) { be.PutUint32(h[4:8], m) }
func (h ERTH) SetTimestamp(t uint16)      { be.PutUint16(h[12:14], t) }
func (h ERTH) SetFType(f uint8)           { h[15] = h[15]&^0xF | f&0xF }

// EETH is the endpoint response header (36 bytes): op in byte 1 bits 5:4;
// ours: the responder's port_status_mask at bytes 4-7; the echoed request
// timestamp at bytes 28-29; the rest reserved.
type EETH []byte

func (h EETH) Op() EndpointOp             { return EndpointOp(h[1] >> 4 & 3) }
func (h EETH) PortStatusMask() uint32     { return be.Uint32(h[4:8]) }
func (h EETH) Timestamp() uint16          { return be.Uint16(h[28:30]) }
func (h EETH) Vendor() uint8              { return h[3] }
func (h EETH) SetOp(op EndpointOp)        { h[1] = h[1]&^0x30 | byte(op&3)<<4 }
func (h EETH) SetVendor(v uint8)          { h[3] = v }
func (h EETH) SetPortStatusMask(m uint32) { be.PutUint32(h[4:8], m) }
func (h EETH) SetTimestamp(t uint16)      { be.PutUint16(h[28:30], t) }
