package wire

import (
	"math/rand/v2"
	"testing"
)

// viewField pins one header field to its bit position, counted from the
// first (most significant) bit of the header, as docs/wire-format.md draws
// it. The test checks that the setter writes exactly those bits (big-endian)
// and nothing else, and that the getter reads them back.
type viewField struct {
	name   string
	hdrLen int
	bit    int // offset of the field's most significant bit
	width  int
	set    func(b []byte, v uint64)
	get    func(b []byte) uint64
}

func b2u(v bool) uint64 {
	if v {
		return 1
	}
	return 0
}

func viewFields() []viewField {
	return []viewField{
		{"eth.dst", EthLen, 0, 48, func(b []byte, v uint64) { Eth(b).SetDst(mac(v)) }, func(b []byte) uint64 { return unmac(Eth(b).Dst()) }},
		{"eth.src", EthLen, 48, 48, func(b []byte, v uint64) { Eth(b).SetSrc(mac(v)) }, func(b []byte) uint64 { return unmac(Eth(b).Src()) }},
		{"eth.type", EthLen, 96, 16, func(b []byte, v uint64) { Eth(b).SetEtherType(uint16(v)) }, func(b []byte) uint64 { return uint64(Eth(b).EtherType()) }},
		{"ip6.dscp", IPv6Len, 4, 6, func(b []byte, v uint64) { IPv6(b).SetDSCP(uint8(v)) }, func(b []byte) uint64 { return uint64(IPv6(b).DSCP()) }},
		{"ip6.ecn", IPv6Len, 10, 2, func(b []byte, v uint64) { IPv6(b).SetECN(uint8(v)) }, func(b []byte) uint64 { return uint64(IPv6(b).ECN()) }},
		{"ip6.tc", IPv6Len, 4, 8, func(b []byte, v uint64) { IPv6(b).SetTrafficClass(uint8(v)) }, func(b []byte) uint64 { return uint64(IPv6(b).TrafficClass()) }},
		{"ip6.flow", IPv6Len, 12, 20, func(b []byte, v uint64) { IPv6(b).SetFlowLabel(uint32(v)) }, func(b []byte) uint64 { return uint64(IPv6(b).FlowLabel()) }},
		{"ip6.plen", IPv6Len, 32, 16, func(b []byte, v uint64) { IPv6(b).SetPayloadLen(uint16(v)) }, func(b []byte) uint64 { return uint64(IPv6(b).PayloadLen()) }},
		{"ip6.nh", IPv6Len, 48, 8, func(b []byte, v uint64) { IPv6(b).SetNextHeader(uint8(v)) }, func(b []byte) uint64 { return uint64(IPv6(b).NextHeader()) }},
		{"ip6.hop", IPv6Len, 56, 8, func(b []byte, v uint64) { IPv6(b).SetHopLimit(uint8(v)) }, func(b []byte) uint64 { return uint64(IPv6(b).HopLimit()) }},
		{"ip6.src.hi", IPv6Len, 64, 64, func(b []byte, v uint64) { IPv6(b).SetSrc(Addr128{v, IPv6(b).Src().lo}) }, func(b []byte) uint64 { return IPv6(b).Src().hi }},
		{"ip6.dst.lo", IPv6Len, 256, 64, func(b []byte, v uint64) { IPv6(b).SetDst(Addr128{IPv6(b).Dst().hi, v}) }, func(b []byte) uint64 { return IPv6(b).Dst().lo }},
		{"udp.sport", UDPLen, 0, 16, func(b []byte, v uint64) { UDP(b).SetSrcPort(uint16(v)) }, func(b []byte) uint64 { return uint64(UDP(b).SrcPort()) }},
		{"udp.dport", UDPLen, 16, 16, func(b []byte, v uint64) { UDP(b).SetDstPort(uint16(v)) }, func(b []byte) uint64 { return uint64(UDP(b).DstPort()) }},
		{"udp.len", UDPLen, 32, 16, func(b []byte, v uint64) { UDP(b).SetLength(uint16(v)) }, func(b []byte) uint64 { return uint64(UDP(b).Length()) }},
		{"udp.csum", UDPLen, 48, 16, func(b []byte, v uint64) { UDP(b).SetChecksum(uint16(v)) }, func(b []byte) uint64 { return uint64(UDP(b).Checksum()) }},

		{"bth.opcode", BTHLen, 0, 8, func(b []byte, v uint64) { BTH(b).SetOpcode(Opcode(v)) }, func(b []byte) uint64 { return uint64(BTH(b).Opcode()) }},
		{"bth.se", BTHLen, 8, 1, func(b []byte, v uint64) { BTH(b).SetSE(v != 0) }, func(b []byte) uint64 { return b2u(BTH(b).SE()) }},
		{"bth.m", BTHLen, 9, 1, func(b []byte, v uint64) { BTH(b).SetMigReq(v != 0) }, func(b []byte) uint64 { return b2u(BTH(b).MigReq()) }},
		{"bth.pad", BTHLen, 10, 2, func(b []byte, v uint64) { BTH(b).SetPadCount(uint8(v)) }, func(b []byte) uint64 { return uint64(BTH(b).PadCount()) }},
		{"bth.tver", BTHLen, 12, 4, func(b []byte, v uint64) { BTH(b).SetTVer(uint8(v)) }, func(b []byte) uint64 { return uint64(BTH(b).TVer()) }},
		{"bth.pkey", BTHLen, 16, 16, func(b []byte, v uint64) { BTH(b).SetPKey(uint16(v)) }, func(b []byte) uint64 { return uint64(BTH(b).PKey()) }},
		{"bth.dqp", BTHLen, 40, 24, func(b []byte, v uint64) { BTH(b).SetDestQP(QPN(v)) }, func(b []byte) uint64 { return uint64(BTH(b).DestQP()) }},
		{"bth.a", BTHLen, 64, 1, func(b []byte, v uint64) { BTH(b).SetAckReq(v != 0) }, func(b []byte) uint64 { return b2u(BTH(b).AckReq()) }},
		{"bth.r", BTHLen, 65, 1, func(b []byte, v uint64) { BTH(b).SetR(v != 0) }, func(b []byte) uint64 { return b2u(BTH(b).R()) }},
		{"bth.rtx", BTHLen, 66, 1, func(b []byte, v uint64) { BTH(b).SetRtx(v != 0) }, func(b []byte) uint64 { return b2u(BTH(b).Rtx()) }},
		{"bth.ts", BTHLen, 67, 1, func(b []byte, v uint64) { BTH(b).SetTS(v != 0) }, func(b []byte) uint64 { return b2u(BTH(b).TS()) }},
		{"bth.psn", BTHLen, 72, 24, func(b []byte, v uint64) { BTH(b).SetPSN(PSN(v)) }, func(b []byte) uint64 { return uint64(BTH(b).PSN()) }},

		{"meth.rqmsn", METHLen, 0, 16, func(b []byte, v uint64) { METH(b).SetRQMSN(MSN(v)) }, func(b []byte) uint64 { return uint64(METH(b).RQMSN()) }},
		{"meth.msn", METHLen, 16, 16, func(b []byte, v uint64) { METH(b).SetMSN(MSN(v)) }, func(b []byte) uint64 { return uint64(METH(b).MSN()) }},
		{"tseth.ts", TSETHLen, 0, 16, func(b []byte, v uint64) { TSETH(b).SetTimestamp(uint16(v)) }, func(b []byte) uint64 { return uint64(TSETH(b).Timestamp()) }},
		{"tseth.tsr", TSETHLen, 16, 1, func(b []byte, v uint64) { TSETH(b).SetTSR(v != 0) }, func(b []byte) uint64 { return b2u(TSETH(b).TSR()) }},
		{"tseth.ftype", TSETHLen, 28, 4, func(b []byte, v uint64) { TSETH(b).SetFType(uint8(v)) }, func(b []byte) uint64 { return uint64(TSETH(b).FType()) }},
		{"reth.va", RETHLen, 0, 64, func(b []byte, v uint64) { RETH(b).SetVA(v) }, func(b []byte) uint64 { return RETH(b).VA() }},
		{"reth.rkey", RETHLen, 64, 32, func(b []byte, v uint64) { RETH(b).SetRKey(uint32(v)) }, func(b []byte) uint64 { return uint64(RETH(b).RKey()) }},
		{"reth.len", RETHLen, 96, 32, func(b []byte, v uint64) { RETH(b).SetDMALen(uint32(v)) }, func(b []byte) uint64 { return uint64(RETH(b).DMALen()) }},
		{"immdt", ImmDtLen, 0, 32, func(b []byte, v uint64) { ImmDt(b).SetImm(uint32(v)) }, func(b []byte) uint64 { return uint64(ImmDt(b).Imm()) }},
		{"aeth.syndrome", AETHLen, 0, 8, func(b []byte, v uint64) { AETH(b).SetSyndrome(uint8(v)) }, func(b []byte) uint64 { return uint64(AETH(b).Syndrome()) }},
		{"aeth.msn", AETHLen, 8, 24, func(b []byte, v uint64) { AETH(b).SetMSN(uint32(v)) }, func(b []byte) uint64 { return uint64(AETH(b).MSN()) }},

		{"seth.m", SETHLen, 9, 2, func(b []byte, v uint64) { SETH(b).SetM(MultipathVerdict(v)) }, func(b []byte) uint64 { return uint64(SETH(b).M()) }},
		{"seth.pr", SETHLen, 14, 1, func(b []byte, v uint64) { SETH(b).SetProbe(v != 0) }, func(b []byte) uint64 { return b2u(SETH(b).Probe()) }},
		{"seth.ack_psn_offset", SETHLen, 16, 16, func(b []byte, v uint64) { SETH(b).SetAckPSNOffset(int16(v)) }, func(b []byte) uint64 { return uint64(uint16(SETH(b).AckPSNOffset())) }},
		{"seth.entropy", SETHLen, 32, 32, func(b []byte, v uint64) { SETH(b).SetEntropy(EV(v)) }, func(b []byte) uint64 { return uint64(SETH(b).Entropy()) }},
		{"seth.spdcid", SETHLen, 64, 16, func(b []byte, v uint64) { SETH(b).SetSPDCID(uint16(v)) }, func(b []byte) uint64 { return uint64(SETH(b).SPDCID()) }},
		{"seth.dpdcid", SETHLen, 80, 16, func(b []byte, v uint64) { SETH(b).SetDPDCID(uint16(v)) }, func(b []byte) uint64 { return uint64(SETH(b).DPDCID()) }},
		{"seth.cack_psn", SETHLen, 104, 24, func(b []byte, v uint64) { SETH(b).SetCackPSN(PSN(v)) }, func(b []byte) uint64 { return uint64(SETH(b).CackPSN()) }},
		{"seth.cc_type", SETHLen, 128, 4, func(b []byte, v uint64) { SETH(b).SetCCType(uint8(v)) }, func(b []byte) uint64 { return uint64(SETH(b).CCType()) }},
		{"seth.cc_fl", SETHLen, 132, 4, func(b []byte, v uint64) { SETH(b).SetCCFlags(uint8(v)) }, func(b []byte) uint64 { return uint64(SETH(b).CCFlags()) }},
		{"seth.mpr", SETHLen, 136, 8, func(b []byte, v uint64) { SETH(b).SetMPR(uint8(v)) }, func(b []byte) uint64 { return uint64(SETH(b).MPR()) }},
		{"seth.sack_offset", SETHLen, 144, 16, func(b []byte, v uint64) { SETH(b).SetSackOffset(int16(v)) }, func(b []byte) uint64 { return uint64(uint16(SETH(b).SackOffset())) }},
		{"seth.bitmap", SETHLen, 160, 64, func(b []byte, v uint64) { SETH(b).SetBitmap(v) }, func(b []byte) uint64 { return SETH(b).Bitmap() }},
		{"cc.ts", CCStateLen, 0, 16, func(b []byte, v uint64) { CCState(b).SetTimestamp(uint16(v)) }, func(b []byte) uint64 { return uint64(CCState(b).Timestamp()) }},
		{"cc.ooo", CCStateLen, 17, 15, func(b []byte, v uint64) { CCState(b).SetOOOCount(uint16(v)) }, func(b []byte) uint64 { return uint64(CCState(b).OOOCount()) }},
		{"cc.restore", CCStateLen, 32, 1, func(b []byte, v uint64) { CCState(b).SetRestoreCwnd(v != 0) }, func(b []byte) uint64 { return b2u(CCState(b).RestoreCwnd()) }},
		{"cc.pen", CCStateLen, 33, 7, func(b []byte, v uint64) { CCState(b).SetRcvCwndPen(uint8(v)) }, func(b []byte) uint64 { return uint64(CCState(b).RcvCwndPen()) }},
		{"cc.rcvd", CCStateLen, 40, 24, func(b []byte, v uint64) { CCState(b).SetRcvdBytes(uint32(v)) }, func(b []byte) uint64 { return uint64(CCState(b).RcvdBytes()) }},

		{"neth.reason", NETHLen, 16, 8, func(b []byte, v uint64) { NETH(b).SetReason(NackReason(v)) }, func(b []byte) uint64 { return uint64(NETH(b).Reason()) }},
		{"neth.vendor", NETHLen, 24, 8, func(b []byte, v uint64) { NETH(b).SetVendor(uint8(v)) }, func(b []byte) uint64 { return uint64(NETH(b).Vendor()) }},
		{"neth.entropy", NETHLen, 32, 32, func(b []byte, v uint64) { NETH(b).SetEntropy(EV(v)) }, func(b []byte) uint64 { return uint64(NETH(b).Entropy()) }},
		{"neth.spdcid", NETHLen, 64, 16, func(b []byte, v uint64) { NETH(b).SetSPDCID(uint16(v)) }, func(b []byte) uint64 { return uint64(NETH(b).SPDCID()) }},
		{"neth.dpdcid", NETHLen, 80, 16, func(b []byte, v uint64) { NETH(b).SetDPDCID(uint16(v)) }, func(b []byte) uint64 { return uint64(NETH(b).DPDCID()) }},
		{"neth.nack_psn", NETHLen, 104, 24, func(b []byte, v uint64) { NETH(b).SetNackPSN(PSN(v)) }, func(b []byte) uint64 { return uint64(NETH(b).NackPSN()) }},
		{"neth.cc_type", NETHLen, 128, 4, func(b []byte, v uint64) { NETH(b).SetCCType(uint8(v)) }, func(b []byte) uint64 { return uint64(NETH(b).CCType()) }},
		{"neth.cc_fl", NETHLen, 132, 4, func(b []byte, v uint64) { NETH(b).SetCCFlags(uint8(v)) }, func(b []byte) uint64 { return uint64(NETH(b).CCFlags()) }},
		{"neth.ts", NETHLen, 144, 16, func(b []byte, v uint64) { NETH(b).SetTimestamp(uint16(v)) }, func(b []byte) uint64 { return uint64(NETH(b).Timestamp()) }},

		{"peth.vendor", PETHLen, 24, 8, func(b []byte, v uint64) { PETH(b).SetVendor(uint8(v)) }, func(b []byte) uint64 { return uint64(PETH(b).Vendor()) }},
		{"peth.probe_id", PETHLen, 32, 16, func(b []byte, v uint64) { PETH(b).SetProbeID(uint16(v)) }, func(b []byte) uint64 { return uint64(PETH(b).ProbeID()) }},
		{"peth.spdcid", PETHLen, 64, 16, func(b []byte, v uint64) { PETH(b).SetSPDCID(uint16(v)) }, func(b []byte) uint64 { return uint64(PETH(b).SPDCID()) }},
		{"peth.dpdcid", PETHLen, 80, 16, func(b []byte, v uint64) { PETH(b).SetDPDCID(uint16(v)) }, func(b []byte) uint64 { return uint64(PETH(b).DPDCID()) }},
		{"peth.ts", PETHLen, 96, 16, func(b []byte, v uint64) { PETH(b).SetTimestamp(uint16(v)) }, func(b []byte) uint64 { return uint64(PETH(b).Timestamp()) }},
		{"peth.tsr", PETHLen, 112, 1, func(b []byte, v uint64) { PETH(b).SetTSR(v != 0) }, func(b []byte) uint64 { return b2u(PETH(b).TSR()) }},
		{"peth.ftype", PETHLen, 124, 4, func(b []byte, v uint64) { PETH(b).SetFType(uint8(v)) }, func(b []byte) uint64 { return uint64(PETH(b).FType()) }},

		{"erth.op", ERTHLen, 10, 2, func(b []byte, v uint64) { ERTH(b).SetOp(EndpointOp(v)) }, func(b []byte) uint64 { return uint64(ERTH(b).Op()) }},
		{"erth.vendor", ERTHLen, 24, 8, func(b []byte, v uint64) { ERTH(b).SetVendor(uint8(v)) }, func(b []byte) uint64 { return uint64(ERTH(b).Vendor()) }},
		{"erth.mask", ERTHLen, 32, 32, func(b []byte, v uint64) { ERTH(b).SetPortStatusMask(uint32(v)) }, func(b []byte) uint64 { return uint64(ERTH(b).PortStatusMask()) }},
		{"erth.ts", ERTHLen, 96, 16, func(b []byte, v uint64) { ERTH(b).SetTimestamp(uint16(v)) }, func(b []byte) uint64 { return uint64(ERTH(b).Timestamp()) }},
		{"erth.ftype", ERTHLen, 124, 4, func(b []byte, v uint64) { ERTH(b).SetFType(uint8(v)) }, func(b []byte) uint64 { return uint64(ERTH(b).FType()) }},
		{"eeth.op", EETHLen, 10, 2, func(b []byte, v uint64) { EETH(b).SetOp(EndpointOp(v)) }, func(b []byte) uint64 { return uint64(EETH(b).Op()) }},
		{"eeth.vendor", EETHLen, 24, 8, func(b []byte, v uint64) { EETH(b).SetVendor(uint8(v)) }, func(b []byte) uint64 { return uint64(EETH(b).Vendor()) }},
		{"eeth.mask", EETHLen, 32, 32, func(b []byte, v uint64) { EETH(b).SetPortStatusMask(uint32(v)) }, func(b []byte) uint64 { return uint64(EETH(b).PortStatusMask()) }},
		{"eeth.ts", EETHLen, 224, 16, func(b []byte, v uint64) { EETH(b).SetTimestamp(uint16(v)) }, func(b []byte) uint64 { return uint64(EETH(b).Timestamp()) }},
	}
}

func mac(v uint64) (m [6]byte) {
	for i := range m {
		m[i] = byte(v >> (40 - 8*i))
	}
	return
}

func unmac(m [6]byte) (v uint64) {
	for _, b := range m {
		v = v<<8 | uint64(b)
	}
	return
}

// bitAt reads bit i (0 = most significant bit of b[0]).
func bitAt(b []byte, i int) uint64 { return uint64(b[i/8] >> (7 - i%8) & 1) }

func TestViewFieldsExact(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, f := range viewFields() {
		mask := uint64(1)<<f.width - 1
		if f.width == 64 {
			mask = ^uint64(0)
		}
		for _, v := range []uint64{0, mask, 1, 1 << (f.width - 1), rng.Uint64() & mask, rng.Uint64() & mask} {
			b := make([]byte, f.hdrLen)
			for i := range b {
				b[i] = byte(rng.Uint32())
			}
			before := append([]byte(nil), b...)
			f.set(b, v)
			if got := f.get(b); got != v {
				t.Errorf("%s: set %#x, get %#x", f.name, v, got)
			}
			for i := 0; i < 8*f.hdrLen; i++ {
				in := i >= f.bit && i < f.bit+f.width
				switch {
				case in && bitAt(b, i) != v>>(f.bit+f.width-1-i)&1:
					t.Errorf("%s = %#x: bit %d (byte %d) is not the value's", f.name, v, i, i/8)
				case !in && bitAt(b, i) != bitAt(before, i):
					t.Errorf("%s = %#x: setter changed bit %d (byte %d) outside the field", f.name, v, i, i/8)
				}
			}
		}
	}
}

// The flow label setter keeps DSCP/ECN and vice versa (checked above for
// DSCP/ECN); the 20-bit label itself:
func TestIPv6VersionTCFlow(t *testing.T) {
	b := IPv6(make([]byte, IPv6Len))
	b.SetVersionTCFlow(46, 3, 0xFFFFF)
	if b.Version() != 6 || b.DSCP() != 46 || b.ECN() != 3 || b.FlowLabel() != 0xFFFFF || b.TrafficClass() != 46<<2|3 {
		t.Fatalf("got v%d dscp %d ecn %d flow %#x", b.Version(), b.DSCP(), b.ECN(), b.FlowLabel())
	}
	if b[0] != 0x6B || b[1] != 0xBF {
		t.Fatalf("bytes %x", b[:4])
	}
}
