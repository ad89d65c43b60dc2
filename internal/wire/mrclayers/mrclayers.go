// Package mrclayers teaches gopacket the MRC headers, so that
//
//	gopacket.NewPacket(frame, layers.LayerTypeEthernet, gopacket.Default)
//
// decodes a whole softmrc frame: Ethernet, [outer IPv6,] IPv6, UDP 4791 (and
// the 4971 alias), BTH with the MRC byte-8 flags, then METH, TSETH, RETH,
// ImmDt, payload, ICRC for data, or one of AETH, SETH (+CC_STATE), NETH,
// PETH, ERTH, EETH and the ICRC for control packets.
//
// It is for tools and tests (pcap readers, dumps, assertions), never for the
// data path: gopacket allocates per packet. The byte layouts come from
// internal/wire, which owns them; this package only adapts them. Importing it
// registers the layer types and the UDP ports (init).
package mrclayers

import (
	"errors"
	"fmt"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"

	"github.com/softmrc/softmrc/internal/wire"
)

// Layer type numbers, from gopacket's range for application types (1000-1999).
const layerTypeBase = 1790

// The MRC layer types.
var (
	LayerTypeBTH   = register(0, "MRC-BTH", decodeBTH)
	LayerTypeMETH  = register(1, "MRC-METH", nil)
	LayerTypeTSETH = register(2, "MRC-TSETH", nil)
	LayerTypeRETH  = register(3, "MRC-RETH", nil)
	LayerTypeImmDt = register(4, "MRC-ImmDt", nil)
	LayerTypeAETH  = register(5, "MRC-AETH", nil)
	LayerTypeSETH  = register(6, "MRC-SETH", nil)
	LayerTypeNETH  = register(7, "MRC-NETH", nil)
	LayerTypePETH  = register(8, "MRC-PETH", nil)
	LayerTypeERTH  = register(9, "MRC-ERTH", nil)
	LayerTypeEETH  = register(10, "MRC-EETH", nil)
	LayerTypeICRC  = register(11, "MRC-ICRC", nil)
	// LayerTypeCNP is RoCEv2's CNP body (16 reserved bytes), sent by the
	// RoCE baseline transport (docs/roce.md).
	LayerTypeCNP = register(12, "RoCE-CNP", nil)
)

func register(i int, name string, f func([]byte, gopacket.PacketBuilder) error) gopacket.LayerType {
	var dec gopacket.Decoder = gopacket.DecodeFunc(func(data []byte, p gopacket.PacketBuilder) error {
		// Every MRC header after BTH needs the opcode and flags of its BTH,
		// so only BTH starts a decode on its own; the others are reached
		// through BTH (ctxDecoder).
		if f == nil {
			return fmt.Errorf("%s can only be decoded after an MRC BTH", name)
		}
		return f(data, p)
	})
	return gopacket.RegisterLayerType(layerTypeBase+i, gopacket.LayerTypeMetadata{Name: name, Decoder: dec})
}

func init() {
	layers.RegisterUDPPortLayerType(wire.UDPPortRoCEv2, LayerTypeBTH)
	layers.RegisterUDPPortLayerType(wire.UDPPortAlias, LayerTypeBTH)
}

var errShort = errors.New("mrclayers: header truncated")

// BTH is the base transport header with MRC's byte-8 flags.
type BTH struct {
	layers.BaseLayer
	Opcode   wire.Opcode
	SE       bool
	MigReq   bool
	PadCount uint8
	TVer     uint8
	PKey     uint16
	DestQP   wire.QPN
	AckReq   bool
	R        bool
	Rtx      bool
	TS       bool
	PSN      wire.PSN
}

func (l *BTH) LayerType() gopacket.LayerType { return LayerTypeBTH }

// DecodeFromBytes decodes the 12 BTH bytes.
func (l *BTH) DecodeFromBytes(data []byte, df gopacket.DecodeFeedback) error {
	if len(data) < wire.BTHLen {
		df.SetTruncated()
		return errShort
	}
	h := wire.BTH(data)
	*l = BTH{
		BaseLayer: layers.BaseLayer{Contents: data[:wire.BTHLen], Payload: data[wire.BTHLen:]},
		Opcode:    h.Opcode(), SE: h.SE(), MigReq: h.MigReq(), PadCount: h.PadCount(), TVer: h.TVer(),
		PKey: h.PKey(), DestQP: h.DestQP(), AckReq: h.AckReq(), R: h.R(), Rtx: h.Rtx(), TS: h.TS(), PSN: h.PSN(),
	}
	return nil
}

func decodeBTH(data []byte, p gopacket.PacketBuilder) error {
	l := &BTH{}
	if err := l.DecodeFromBytes(data, p); err != nil {
		return err
	}
	p.AddLayer(l)
	if !l.Opcode.Known() {
		return p.NextDecoder(gopacket.LayerTypePayload)
	}
	c := ctx{op: l.Opcode, ts: l.TS && l.Opcode.IsData(), pad: int(l.PadCount)}
	return p.NextDecoder(c.next(stepFirst))
}

// METH carries the message sequence numbers of a data packet.
type METH struct {
	layers.BaseLayer
	RQMSN, MSN wire.MSN
}

func (l *METH) LayerType() gopacket.LayerType { return LayerTypeMETH }

// TSETH carries the sender's timestamp (1.024 µs units).
type TSETH struct {
	layers.BaseLayer
	Timestamp uint16
	TSR       bool
	FType     uint8
}

func (l *TSETH) LayerType() gopacket.LayerType { return LayerTypeTSETH }

// RETH is on every MRC data packet.
type RETH struct {
	layers.BaseLayer
	VA     uint64
	RKey   uint32
	DMALen uint32
}

func (l *RETH) LayerType() gopacket.LayerType { return LayerTypeRETH }

// ImmDt is the immediate of Write-with-Immediate.
type ImmDt struct {
	layers.BaseLayer
	Imm uint32
}

func (l *ImmDt) LayerType() gopacket.LayerType { return LayerTypeImmDt }

// AETH is the transport ACK header.
type AETH struct {
	layers.BaseLayer
	Syndrome uint8
	MSN      uint32
}

func (l *AETH) LayerType() gopacket.LayerType { return LayerTypeAETH }

// SETH is the reliability SACK header with its CC_STATE.
type SETH struct {
	layers.BaseLayer
	wire.SACKFields
}

func (l *SETH) LayerType() gopacket.LayerType { return LayerTypeSETH }

// NETH is the reliability NACK header.
type NETH struct {
	layers.BaseLayer
	wire.NACKFields
}

func (l *NETH) LayerType() gopacket.LayerType { return LayerTypeNETH }

// PETH is the reliability probe header.
type PETH struct {
	layers.BaseLayer
	wire.ProbeFields
}

func (l *PETH) LayerType() gopacket.LayerType { return LayerTypePETH }

// ERTH is the endpoint request header.
type ERTH struct {
	layers.BaseLayer
	wire.EndpointFields
}

func (l *ERTH) LayerType() gopacket.LayerType { return LayerTypeERTH }

// EETH is the endpoint response header.
type EETH struct {
	layers.BaseLayer
	wire.EndpointFields
}

func (l *EETH) LayerType() gopacket.LayerType { return LayerTypeEETH }

// ICRC is the 4-byte invariant CRC trailer, as its value (the wire carries
// it least significant byte first).
type ICRC struct {
	layers.BaseLayer
	Value uint32
}

func (l *ICRC) LayerType() gopacket.LayerType { return LayerTypeICRC }

// CNP is the 16 reserved bytes after the BTH of a RoCEv2 Congestion
// Notification Packet (opcode 0x81).
type CNP struct {
	layers.BaseLayer
}

func (l *CNP) LayerType() gopacket.LayerType { return LayerTypeCNP }

// ctx carries what the headers after BTH need from it.
type ctx struct {
	op   wire.Opcode
	ts   bool
	pad  int
	step step
}

type step int

const (
	stepFirst step = iota // the header right after BTH
	stepTSETH
	stepRETH
	stepImmDt
	stepTail // payload, pad, ICRC
)

func (c ctx) next(s step) gopacket.Decoder { c.step = s; return c }

// Decode implements gopacket.Decoder for one header after BTH.
func (c ctx) Decode(data []byte, p gopacket.PacketBuilder) error {
	need := func(n int) error {
		if len(data) < n {
			p.SetTruncated()
			return errShort
		}
		return nil
	}
	base := func(n int) layers.BaseLayer { return layers.BaseLayer{Contents: data[:n], Payload: data[n:]} }
	be := func(i, n int) uint64 {
		var v uint64
		for _, b := range data[i : i+n] {
			v = v<<8 | uint64(b)
		}
		return v
	}
	switch {
	case c.step == stepTail:
		return c.decodeTail(data, p)
	case c.op.IsData() && c.step == stepFirst:
		if err := need(wire.METHLen); err != nil {
			return err
		}
		h := wire.METH(data)
		p.AddLayer(&METH{BaseLayer: base(wire.METHLen), RQMSN: h.RQMSN(), MSN: h.MSN()})
		if c.ts {
			return p.NextDecoder(c.next(stepTSETH))
		}
		return p.NextDecoder(c.next(stepRETH))
	case c.step == stepTSETH:
		if err := need(wire.TSETHLen); err != nil {
			return err
		}
		h := wire.TSETH(data)
		p.AddLayer(&TSETH{BaseLayer: base(wire.TSETHLen), Timestamp: h.Timestamp(), TSR: h.TSR(), FType: h.FType()})
		return p.NextDecoder(c.next(stepRETH))
	case c.step == stepRETH:
		if err := need(wire.RETHLen); err != nil {
			return err
		}
		h := wire.RETH(data)
		p.AddLayer(&RETH{BaseLayer: base(wire.RETHLen), VA: h.VA(), RKey: h.RKey(), DMALen: h.DMALen()})
		if c.op.HasImm() {
			return p.NextDecoder(c.next(stepImmDt))
		}
		return p.NextDecoder(c.next(stepTail))
	case c.step == stepImmDt:
		if err := need(wire.ImmDtLen); err != nil {
			return err
		}
		p.AddLayer(&ImmDt{BaseLayer: base(wire.ImmDtLen), Imm: uint32(be(0, 4))})
		return p.NextDecoder(c.next(stepTail))
	case c.op == wire.OpAck:
		if err := need(wire.AETHLen); err != nil {
			return err
		}
		h := wire.AETH(data)
		p.AddLayer(&AETH{BaseLayer: base(wire.AETHLen), Syndrome: h.Syndrome(), MSN: h.MSN()})
	case c.op == wire.OpSACK:
		n := wire.SETHLen + wire.CCStateLen
		if err := need(n); err != nil {
			return err
		}
		x, cc := wire.SETH(data), wire.CCState(data[wire.SETHLen:])
		p.AddLayer(&SETH{BaseLayer: base(n), SACKFields: wire.SACKFields{
			M: x.M(), Probe: x.Probe(), AckPSNOffset: x.AckPSNOffset(), Entropy: x.Entropy(),
			SPDCID: x.SPDCID(), DPDCID: x.DPDCID(), CackPSN: x.CackPSN(), CCType: x.CCType(),
			CCFlags: x.CCFlags(), MPR: x.MPR(), SackOffset: x.SackOffset(), Bitmap: x.Bitmap(),
			TSEcho: cc.Timestamp(), OOOCount: cc.OOOCount(), RestoreCwnd: cc.RestoreCwnd(),
			RcvCwndPen: cc.RcvCwndPen(), RcvdBytes: cc.RcvdBytes(),
		}})
	case c.op == wire.OpNACK:
		if err := need(wire.NETHLen); err != nil {
			return err
		}
		x := wire.NETH(data)
		p.AddLayer(&NETH{BaseLayer: base(wire.NETHLen), NACKFields: wire.NACKFields{
			Reason: x.Reason(), Vendor: x.Vendor(), Entropy: x.Entropy(), SPDCID: x.SPDCID(),
			DPDCID: x.DPDCID(), NackPSN: x.NackPSN(), CCType: x.CCType(), CCFlags: x.CCFlags(),
			Timestamp: x.Timestamp(),
		}})
	case c.op == wire.OpProbe:
		if err := need(wire.PETHLen); err != nil {
			return err
		}
		x := wire.PETH(data)
		p.AddLayer(&PETH{BaseLayer: base(wire.PETHLen), ProbeFields: wire.ProbeFields{
			ProbeID: x.ProbeID(), SPDCID: x.SPDCID(), DPDCID: x.DPDCID(), Timestamp: x.Timestamp(),
			TSR: x.TSR(), FType: x.FType(), Vendor: x.Vendor(),
		}})
	case c.op == wire.OpEndpointReq:
		if err := need(wire.ERTHLen); err != nil {
			return err
		}
		x := wire.ERTH(data)
		p.AddLayer(&ERTH{BaseLayer: base(wire.ERTHLen), EndpointFields: wire.EndpointFields{
			Op: x.Op(), PortStatusMask: x.PortStatusMask(), Timestamp: x.Timestamp(), Vendor: x.Vendor(),
		}})
	case c.op == wire.OpEndpointResp:
		if err := need(wire.EETHLen); err != nil {
			return err
		}
		x := wire.EETH(data)
		p.AddLayer(&EETH{BaseLayer: base(wire.EETHLen), EndpointFields: wire.EndpointFields{
			Op: x.Op(), PortStatusMask: x.PortStatusMask(), Timestamp: x.Timestamp(), Vendor: x.Vendor(),
		}})
	case c.op == wire.OpCNP:
		if err := need(wire.CNPLen); err != nil {
			return err
		}
		p.AddLayer(&CNP{BaseLayer: base(wire.CNPLen)})
	default:
		return fmt.Errorf("mrclayers: no header after BTH for opcode %#x", uint8(c.op))
	}
	return p.NextDecoder(c.next(stepTail))
}

// decodeTail splits what follows the last header into the payload (an
// application layer) and the ICRC. A trimmed data frame has nothing here.
func (c ctx) decodeTail(data []byte, p gopacket.PacketBuilder) error {
	if len(data) == 0 && c.op.IsData() {
		return nil // trimmed: no payload, no ICRC
	}
	if len(data) < wire.ICRCLen+c.pad {
		p.SetTruncated()
		return errShort
	}
	end := len(data) - wire.ICRCLen
	if pay := data[:end-c.pad]; len(pay) > 0 {
		pl := gopacket.Payload(pay)
		p.AddLayer(&pl)
		p.SetApplicationLayer(&pl)
	}
	t := data[end:]
	p.AddLayer(&ICRC{BaseLayer: layers.BaseLayer{Contents: t},
		Value: uint32(t[0]) | uint32(t[1])<<8 | uint32(t[2])<<16 | uint32(t[3])<<24})
	return nil
}
