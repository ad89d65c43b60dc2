package wire

import (
	"fmt"
	"net/netip"
)

// Shared fixtures: one fully populated Packet per packet kind. Every field
// carries a distinct non-zero value so that a field written to the wrong
// place shows up in the golden bytes and in the round trips.

func mustAddr(s string) Addr128 { return Addr128FromNetip(netip.MustParseAddr(s)) }

var (
	sampleSrc  = mustAddr("fd00:1:2::11")
	sampleDst  = mustAddr("fd00:1:2::22")
	sampleOSrc = mustAddr("fd00:1:2::11")
	// T0 0x40 (plane 2) -> T1 0x01 -> T0 0x41 -> downlink 0xc0 in 5f00:1::/32.
	sampleUSID = mustAddr("5f00:1:4002:102:4102:c002::")
)

// sampleKind is one packet kind: an opcode with or without the SRv6 outer
// header and, for data, with or without TSETH.
type sampleKind struct {
	name  string
	op    Opcode
	encap bool
	ts    bool
}

// sampleKinds lists every packet kind the golden tests pin down.
func sampleKinds() []sampleKind {
	ops := []Opcode{OpWriteFirst, OpWriteMiddle, OpWriteLast, OpWriteLastImm, OpWriteOnly, OpWriteOnlyImm,
		OpAck, OpEndpointReq, OpEndpointResp, OpSACK, OpNACK, OpProbe, OpCNP}
	var ks []sampleKind
	for _, op := range ops {
		for _, encap := range []bool{false, true} {
			tss := []bool{false}
			if op.IsData() {
				tss = []bool{false, true}
			}
			for _, ts := range tss {
				name := fmt.Sprintf("%02x_%s", uint8(op), op)
				if ts {
					name += "_ts"
				}
				if encap {
					name += "_encap"
				}
				ks = append(ks, sampleKind{name, op, encap, ts})
			}
		}
	}
	return ks
}

// samplePacket builds the fixture for kind k.
func samplePacket(k sampleKind) Packet {
	p := Packet{
		DstMAC: [6]byte{0x02, 0, 0, 0, 0, 0x22}, SrcMAC: [6]byte{0x02, 0, 0, 0, 0, 0x11},
		Encap: k.encap, Src: sampleSrc, Dst: sampleDst,
		DSCP: DSCPTrimmable, ECN: ECNECT0, HopLimit: 64,
		EV: MakeEV(2, 1, 0x5a5a5), DstPort: UDPPortRoCEv2,
		Opcode: k.op, PKey: 0xFFFF, DestQP: 0x00ABCD, PSN: 0x123456,
	}
	if k.encap {
		p.OuterSrc, p.OuterDst = sampleOSrc, sampleUSID
	}
	switch {
	case k.op.IsData():
		p.MSN, p.RQMSN = 0x0102, 0x0003
		p.VA, p.RKey, p.DMALen = 0x00007F0000001000, 0xCAFE0001, 8192
		p.Payload = []byte("softmrc golden payload, 42 bytes long....")
		p.AckReq = k.op.IsLast()
		p.SE = k.op.HasImm()
		if k.ts {
			p.HasTS, p.TS, p.FType = true, 0xBEEF, FTypeTimestamp
		}
		if k.op.HasImm() {
			p.Imm = 0xDEADBEEF
		}
	case k.op == OpAck:
		p.DSCP = DSCPControl
		p.Syndrome, p.AckMSN = AETHSyndromeACK, 0x000102
	case k.op == OpSACK:
		p.DSCP = DSCPControl
		p.SACK = SACKFields{M: MSkipOnce, AckPSNOffset: -2, Entropy: MakeEV(3, 7, 0x12345),
			SPDCID: 0x0101, DPDCID: 0x0202, CackPSN: 0x123450, CCType: 1, CCFlags: 0,
			MPR: 4, SackOffset: 2, Bitmap: 0x8000_0000_0000_0005,
			TSEcho: 0xBEEF, OOOCount: 3, RestoreCwnd: true, RcvCwndPen: 64, RcvdBytes: 0x000400}
		p.PSN = p.SACK.CackPSN
	case k.op == OpNACK:
		p.DSCP = DSCPControl
		p.NACK = NACKFields{Reason: NackTrimmed, Vendor: 0, Entropy: MakeEV(1, 2, 3),
			SPDCID: 0x0101, DPDCID: 0x0202, NackPSN: 0x123457, CCType: 2, CCFlags: 1, Timestamp: 0x0BAD}
		p.PSN = p.NACK.NackPSN
	case k.op == OpCNP:
		// A CNP carries no PSN; DSCP as the other control packets.
		p.DSCP, p.ECN, p.PSN = DSCPControl, ECNNotECT, 0
	case k.op == OpProbe:
		p.PSN = 0
		p.Probe = ProbeFields{ProbeID: 0x0777, SPDCID: 0x0101, DPDCID: 0x0202, Timestamp: 0x1234,
			FType: FTypeTimestamp, Vendor: 0}
	case k.op == OpEndpointReq, k.op == OpEndpointResp:
		p.DSCP = DSCPControl
		p.DestQP = QPEndpoint
		p.PSN = 0x00_4242 // request id in psn[15:0]
		p.Endpoint = EndpointFields{Op: EPPortStatusUpdate, PortStatusMask: 0x0000_000D, Timestamp: 0x2222}
		if k.op == OpEndpointResp {
			p.Endpoint.Op = EPEVProbe
		}
	}
	return p
}
