package wire

import "errors"

// SACKFields are the SETH and CC_STATE fields of a SACK.
type SACKFields struct {
	M            MultipathVerdict
	Probe        bool // pr: this SACK answers a reliability probe
	AckPSNOffset int16
	Entropy      EV // reflected EV
	SPDCID       uint16
	DPDCID       uint16
	CackPSN      PSN
	CCType       uint8
	CCFlags      uint8
	MPR          uint8 // units of 128 PSNs; 0 = dynamic MPR off
	SackOffset   int16 // bitmap base = CackPSN + SackOffset
	Bitmap       uint64
	// CC_STATE
	TSEcho      uint16 // echoed TSETH timestamp
	OOOCount    uint16 // 15 bits
	RestoreCwnd bool
	RcvCwndPen  uint8  // 7 bits
	RcvdBytes   uint32 // 24 bits, units of 256 bytes
}

// NACKFields are the NETH fields.
type NACKFields struct {
	Reason    NackReason
	Vendor    uint8
	Entropy   EV
	SPDCID    uint16
	DPDCID    uint16
	NackPSN   PSN
	CCType    uint8
	CCFlags   uint8
	Timestamp uint16
}

// ProbeFields are the PETH fields.
type ProbeFields struct {
	ProbeID   uint16
	SPDCID    uint16
	DPDCID    uint16
	Timestamp uint16
	TSR       bool
	FType     uint8
	Vendor    uint8 // vendor_info
}

// EndpointFields are the ERTH (request) or EETH (response) fields.
type EndpointFields struct {
	Op             EndpointOp
	PortStatusMask uint32 // bit p set = port/plane p is up (ours; polarity is not public)
	Timestamp      uint16
	Vendor         uint8 // vendor_info (byte 3)
}

// Packet describes one whole MRC frame. Which header groups matter is decided
// by Opcode (and Encap, HasTS). Encode writes it; Decoder.Decode fills it from
// bytes without allocating (Payload then aliases the frame).
type Packet struct {
	DstMAC, SrcMAC MAC

	// Encap selects SRv6 mode: an outer IPv6 header (next header 41) whose
	// destination is the uSID container.
	Encap    bool
	OuterSrc Addr128
	OuterDst Addr128

	// The (inner) IPv6 header that carries UDP: the NICs' own addresses.
	Src, Dst Addr128

	// Traffic class and hop limit of the outermost header (written into both
	// headers on Encode; read from the outermost on Decode).
	DSCP     uint8
	ECN      uint8
	HopLimit uint8

	// EV rides in the UDP source port and the flow label (ev.go).
	EV      EV
	DstPort uint16 // 0 means 4791

	// BTH
	Opcode   Opcode
	SE       bool
	MigReq   bool
	PKey     uint16
	DestQP   QPN
	AckReq   bool
	R        bool
	Rtx      bool
	PSN      PSN
	PadCount uint8 // set by Encode from len(Payload); read by Decode

	// METH (data)
	MSN   MSN
	RQMSN MSN

	// TSETH (data, when HasTS)
	HasTS bool
	TS    uint16
	TSR   bool
	FType uint8

	// RETH (data)
	VA     uint64
	RKey   uint32
	DMALen uint32

	// ImmDt (WriteLastImm, WriteOnlyImm)
	Imm uint32

	// AETH (Ack)
	Syndrome uint8
	AckMSN   uint32 // 24 bits

	SACK     SACKFields
	NACK     NACKFields
	Probe    ProbeFields
	Endpoint EndpointFields

	Payload []byte

	// Trimmed: the outermost DSCP says trimmed and the frame ends right
	// after the headers (no payload, no ICRC). Decode sets it; Encode honours
	// it (for switch and receiver tests): it then writes only the headers,
	// keeps PadCount as given (a trimmed frame keeps the original pad count)
	// and requires a data opcode, an empty Payload and DSCP TRIMMED or
	// TRIMMED_LASTHOP.
	Trimmed bool

	// Filled by Decode.
	ICRC     uint32 // as found on the wire (little-endian per RoCEv2)
	InnerOff int    // offset of the IPv6 header that carries UDP
	BTHOff   int    // offset of BTH
	PayOff   int    // offset of the payload
}

// Errors returned by Encode and Decode. They are values so that the hot path
// never allocates; callers count them by identity.
var (
	ErrShortBuffer = errors.New("wire: buffer too small for the packet")
	ErrTruncated   = errors.New("wire: frame truncated")
	ErrNotIPv6     = errors.New("wire: not an IPv6 frame")
	ErrNotUDP      = errors.New("wire: not UDP (or not IPv6-in-IPv6 carrying UDP)")
	ErrPort        = errors.New("wire: UDP destination port is not an MRC port")
	ErrOpcode      = errors.New("wire: unknown or unsupported BTH opcode")
	ErrLength      = errors.New("wire: length fields disagree with the frame")
	ErrPayload     = errors.New("wire: payload on a packet kind that has none")
	ErrField       = errors.New("wire: field out of range")
)

// extLen is the length of the headers after BTH for op (without TSETH).
func extLen(op Opcode) int {
	switch {
	case op.IsData():
		n := METHLen + RETHLen
		if op.HasImm() {
			n += ImmDtLen
		}
		return n
	case op == OpAck:
		return AETHLen
	case op == OpSACK:
		return SETHLen + CCStateLen
	case op == OpNACK:
		return NETHLen
	case op == OpProbe:
		return PETHLen
	case op == OpEndpointReq:
		return ERTHLen
	case op == OpEndpointResp:
		return EETHLen
	case op == OpCNP:
		return CNPLen
	}
	return -1
}

// HeaderLen is the number of bytes before the payload of p.
func (p *Packet) HeaderLen() int {
	n := EthLen + IPv6Len + UDPLen + BTHLen + extLen(p.Opcode)
	if p.Encap {
		n += IPv6Len
	}
	if p.HasTS && p.Opcode.IsData() {
		n += TSETHLen
	}
	return n
}

// Len is the encoded frame length of p.
func (p *Packet) Len() int {
	if p.Trimmed {
		return p.HeaderLen()
	}
	return p.HeaderLen() + len(p.Payload) + (-len(p.Payload))&3 + ICRCLen
}

// MaxIPv6Payload bounds the payload length of the outermost IPv6 header: no
// jumbograms, the 16-bit field must hold it.
const MaxIPv6Payload = 0xFFFF

// Encode writes p into b and returns the frame length. It sets the length
// fields, the pad count and the ICRC; the UDP checksum is 0. HopLimit 0 is
// written as 64 and DstPort 0 as 4791. PSNs, QPN, DSCP and ECN out of range
// are errors (ErrField); the other fields are cut to their wire width (a
// 24-bit counter such as RcvdBytes wraps). Encode never allocates.
func (p *Packet) Encode(b []byte) (int, error) {
	if !p.Opcode.Known() {
		return 0, ErrOpcode
	}
	if !p.Opcode.IsData() && len(p.Payload) > 0 {
		return 0, ErrPayload
	}
	if !p.PSN.Valid() || !p.SACK.CackPSN.Valid() || !p.NACK.NackPSN.Valid() ||
		p.DestQP > QPNMask || p.DSCP > 63 || p.ECN > 3 {
		return 0, ErrField
	}
	if p.Trimmed && (!p.Opcode.IsData() || len(p.Payload) > 0 || p.PadCount > 3 ||
		(p.DSCP != DSCPTrimmed && p.DSCP != DSCPTrimmedLastHop)) {
		return 0, ErrField
	}
	n := p.Len()
	if n-EthLen-IPv6Len > MaxIPv6Payload {
		return 0, ErrField
	}
	if len(b) < n {
		return 0, ErrShortBuffer
	}
	b = b[:n]
	eth := Eth(b)
	eth.SetDst(p.DstMAC)
	eth.SetSrc(p.SrcMAC)
	eth.SetEtherType(EtherTypeIPv6)
	off := EthLen
	hop := p.HopLimit
	if hop == 0 {
		hop = 64
	}
	flow := p.EV.FlowLabel()
	if p.Encap {
		o := IPv6(b[off:])
		o.SetVersionTCFlow(p.DSCP, p.ECN, flow)
		o.SetPayloadLen(uint16(n - off - IPv6Len))
		o.SetNextHeader(ProtoIPv6)
		o.SetHopLimit(hop)
		o.SetSrc(p.OuterSrc)
		o.SetDst(p.OuterDst)
		off += IPv6Len
	}
	inner := IPv6(b[off:])
	innerOff := off
	inner.SetVersionTCFlow(p.DSCP, p.ECN, flow)
	inner.SetPayloadLen(uint16(n - off - IPv6Len))
	inner.SetNextHeader(ProtoUDP)
	inner.SetHopLimit(hop)
	inner.SetSrc(p.Src)
	inner.SetDst(p.Dst)
	off += IPv6Len
	u := UDP(b[off:])
	u.SetSrcPort(p.EV.SrcPort())
	port := p.DstPort
	if port == 0 {
		port = UDPPortRoCEv2
	}
	u.SetDstPort(port)
	u.SetLength(uint16(n - off))
	u.SetChecksum(0)
	off += UDPLen

	pad := uint8((-len(p.Payload)) & 3)
	if p.Trimmed {
		pad = p.PadCount
	}
	// Every header below is written through its view (headers.go), the one
	// definition of its layout; the views' setters touch only their own
	// bits, so each header is cleared first (reserved bits are zero). Each
	// view is made from an array pointer: its length is then a constant and
	// the compiler drops the setters' bounds checks (one check per header).
	h := BTH((*[BTHLen]byte)(b[off:])[:])
	clear(h)
	h.SetOpcode(p.Opcode)
	h.SetSE(p.SE)
	h.SetMigReq(p.MigReq)
	h.SetPadCount(pad) // TVer 0
	h.SetPKey(p.PKey)
	h.SetDestQP(p.DestQP)
	h.SetPSN(p.PSN)
	h.SetAckReq(p.AckReq)
	h.SetR(p.R)
	h.SetRtx(p.Rtx)
	hasTS := p.HasTS && p.Opcode.IsData()
	h.SetTS(hasTS)
	off += BTHLen

	switch op := p.Opcode; {
	case op.IsData():
		m := METH((*[METHLen]byte)(b[off:])[:])
		m.SetRQMSN(p.RQMSN)
		m.SetMSN(p.MSN)
		off += METHLen
		if hasTS {
			t := TSETH((*[TSETHLen]byte)(b[off:])[:])
			clear(t)
			t.SetTimestamp(p.TS)
			t.SetTSR(p.TSR)
			t.SetFType(p.FType)
			off += TSETHLen
		}
		r := RETH((*[RETHLen]byte)(b[off:])[:])
		r.SetVA(p.VA)
		r.SetRKey(p.RKey)
		r.SetDMALen(p.DMALen)
		off += RETHLen
		if op.HasImm() {
			ImmDt((*[ImmDtLen]byte)(b[off:])[:]).SetImm(p.Imm)
			off += ImmDtLen
		}
	case op == OpAck:
		a := AETH((*[AETHLen]byte)(b[off:])[:])
		a.SetSyndrome(p.Syndrome)
		a.SetMSN(p.AckMSN)
		off += AETHLen
	case op == OpSACK:
		s := &p.SACK
		x := SETH((*[SETHLen]byte)(b[off:])[:])
		clear(x)
		x.SetM(s.M)
		x.SetProbe(s.Probe)
		x.SetAckPSNOffset(s.AckPSNOffset)
		x.SetEntropy(s.Entropy)
		x.SetSPDCID(s.SPDCID)
		x.SetDPDCID(s.DPDCID)
		x.SetCackPSN(s.CackPSN)
		x.SetCCType(s.CCType)
		x.SetCCFlags(s.CCFlags)
		x.SetMPR(s.MPR)
		x.SetSackOffset(s.SackOffset)
		x.SetBitmap(s.Bitmap)
		off += SETHLen
		c := CCState((*[CCStateLen]byte)(b[off:])[:])
		clear(c)
		c.SetTimestamp(s.TSEcho)
		c.SetOOOCount(s.OOOCount)
		c.SetRestoreCwnd(s.RestoreCwnd)
		c.SetRcvCwndPen(s.RcvCwndPen)
		c.SetRcvdBytes(s.RcvdBytes)
		off += CCStateLen
	case op == OpNACK:
		s := &p.NACK
		x := NETH((*[NETHLen]byte)(b[off:])[:])
		clear(x)
		x.SetReason(s.Reason)
		x.SetVendor(s.Vendor)
		x.SetEntropy(s.Entropy)
		x.SetSPDCID(s.SPDCID)
		x.SetDPDCID(s.DPDCID)
		x.SetNackPSN(s.NackPSN)
		x.SetCCType(s.CCType)
		x.SetCCFlags(s.CCFlags)
		x.SetTimestamp(s.Timestamp)
		off += NETHLen
	case op == OpCNP:
		clear(b[off : off+CNPLen])
		off += CNPLen
	case op == OpProbe:
		s := &p.Probe
		x := PETH((*[PETHLen]byte)(b[off:])[:])
		clear(x)
		x.SetVendor(s.Vendor)
		x.SetProbeID(s.ProbeID)
		x.SetSPDCID(s.SPDCID)
		x.SetDPDCID(s.DPDCID)
		x.SetTimestamp(s.Timestamp)
		x.SetTSR(s.TSR)
		x.SetFType(s.FType)
		off += PETHLen
	case op == OpEndpointReq:
		s := &p.Endpoint
		x := ERTH((*[ERTHLen]byte)(b[off:])[:])
		clear(x)
		x.SetOp(s.Op)
		x.SetVendor(s.Vendor)
		x.SetPortStatusMask(s.PortStatusMask)
		x.SetTimestamp(s.Timestamp)
		x.SetFType(FTypeTimestamp)
		off += ERTHLen
	case op == OpEndpointResp:
		s := &p.Endpoint
		x := EETH((*[EETHLen]byte)(b[off:])[:])
		clear(x)
		x.SetOp(s.Op)
		x.SetVendor(s.Vendor)
		x.SetPortStatusMask(s.PortStatusMask)
		x.SetTimestamp(s.Timestamp)
		off += EETHLen
	}
	if p.Trimmed {
		return n, nil
	}
	off += copy(b[off:], p.Payload)
	for i := uint8(0); i < pad; i++ {
		b[off] = 0
		off++
	}
	crc := icrcInPlace(b[innerOff:off])
	le.PutUint32(b[off:], crc)
	p.PadCount = pad
	return n, nil
}

// Decoder parses frames. The zero value accepts UDP ports 4791 and 4971.
type Decoder struct {
	// Port, when non-zero, is the only UDP destination port accepted.
	Port uint16
}

// Decode parses frame into p, overwriting every field of p. It checks
// structure and lengths, not the ICRC (see CheckICRC), and never allocates.
// A frame whose outermost DSCP is TRIMMED or TRIMMED_LASTHOP and that ends
// right after the headers decodes with Trimmed set and an empty payload.
// Payload plus pad must fill whole 4-byte words (IBTA), and a packet kind
// without payload must have pad count 0 and nothing between its headers and
// the ICRC. Reserved bits and fields are ignored; docs/wire-format.md
// ("Canonical form") lists what a re-encode normalises.
func (d Decoder) Decode(frame []byte, p *Packet) error {
	*p = Packet{}
	if len(frame) < EthLen+IPv6Len {
		return ErrTruncated
	}
	eth := Eth(frame)
	if eth.EtherType() != EtherTypeIPv6 {
		return ErrNotIPv6
	}
	p.DstMAC, p.SrcMAC = eth.Dst(), eth.Src()
	off := EthLen
	outer := IPv6(frame[off:])
	if outer.Version() != 6 {
		return ErrNotIPv6
	}
	if int(outer.PayloadLen()) != len(frame)-off-IPv6Len {
		return ErrLength
	}
	p.DSCP, p.ECN, p.HopLimit = outer.DSCP(), outer.ECN(), outer.HopLimit()
	ip := outer
	if outer.NextHeader() == ProtoIPv6 {
		p.Encap = true
		p.OuterSrc, p.OuterDst = outer.Src(), outer.Dst()
		off += IPv6Len
		if len(frame) < off+IPv6Len {
			return ErrTruncated
		}
		ip = IPv6(frame[off:])
		if ip.Version() != 6 {
			return ErrNotIPv6
		}
		if int(ip.PayloadLen()) != len(frame)-off-IPv6Len {
			return ErrLength
		}
	}
	if ip.NextHeader() != ProtoUDP {
		return ErrNotUDP
	}
	p.InnerOff = off
	p.Src, p.Dst = ip.Src(), ip.Dst()
	flow := ip.FlowLabel()
	off += IPv6Len
	if len(frame) < off+UDPLen+BTHLen {
		return ErrTruncated
	}
	u := UDP(frame[off:])
	port := u.DstPort()
	if d.Port != 0 {
		if port != d.Port {
			return ErrPort
		}
	} else if port != UDPPortRoCEv2 && port != UDPPortAlias {
		return ErrPort
	}
	if int(u.Length()) != len(frame)-off {
		return ErrLength
	}
	p.DstPort = port
	p.EV = EVFromWire(u.SrcPort(), flow)
	off += UDPLen

	h := BTH(frame[off:])
	p.BTHOff = off
	p.Opcode = h.Opcode()
	if !p.Opcode.Known() {
		return ErrOpcode
	}
	p.SE, p.MigReq, p.PadCount = h.SE(), h.MigReq(), h.PadCount()
	p.PKey, p.DestQP, p.PSN = h.PKey(), h.DestQP(), h.PSN()
	p.AckReq, p.R, p.Rtx = h.AckReq(), h.R(), h.Rtx()
	p.HasTS = h.TS() && p.Opcode.IsData()
	off += BTHLen
	need := extLen(p.Opcode)
	if p.HasTS {
		need += TSETHLen
	}
	if len(frame) < off+need {
		return ErrTruncated
	}
	switch op := p.Opcode; {
	case op.IsData():
		m := METH(frame[off:])
		p.RQMSN, p.MSN = m.RQMSN(), m.MSN()
		off += METHLen
		if p.HasTS {
			t := TSETH(frame[off:])
			p.TS, p.TSR, p.FType = t.Timestamp(), t.TSR(), t.FType()
			off += TSETHLen
		}
		r := RETH(frame[off:])
		p.VA, p.RKey, p.DMALen = r.VA(), r.RKey(), r.DMALen()
		off += RETHLen
		if op.HasImm() {
			p.Imm = ImmDt(frame[off:]).Imm()
			off += ImmDtLen
		}
	case op == OpAck:
		a := AETH(frame[off:])
		p.Syndrome, p.AckMSN = a.Syndrome(), a.MSN()
		off += AETHLen
	case op == OpSACK:
		x := SETH(frame[off:])
		c := CCState(frame[off+SETHLen:])
		p.SACK = SACKFields{
			M: x.M(), Probe: x.Probe(), AckPSNOffset: x.AckPSNOffset(), Entropy: x.Entropy(),
			SPDCID: x.SPDCID(), DPDCID: x.DPDCID(), CackPSN: x.CackPSN(),
			CCType: x.CCType(), CCFlags: x.CCFlags(), MPR: x.MPR(), SackOffset: x.SackOffset(),
			Bitmap: x.Bitmap(), TSEcho: c.Timestamp(), OOOCount: c.OOOCount(),
			RestoreCwnd: c.RestoreCwnd(), RcvCwndPen: c.RcvCwndPen(), RcvdBytes: c.RcvdBytes(),
		}
		off += SETHLen + CCStateLen
	case op == OpNACK:
		x := NETH(frame[off:])
		p.NACK = NACKFields{
			Reason: x.Reason(), Vendor: x.Vendor(), Entropy: x.Entropy(), SPDCID: x.SPDCID(),
			DPDCID: x.DPDCID(), NackPSN: x.NackPSN(), CCType: x.CCType(), CCFlags: x.CCFlags(),
			Timestamp: x.Timestamp(),
		}
		off += NETHLen
	case op == OpCNP:
		off += CNPLen // reserved: ignored on receipt
	case op == OpProbe:
		x := PETH(frame[off:])
		p.Probe = ProbeFields{
			ProbeID: x.ProbeID(), SPDCID: x.SPDCID(), DPDCID: x.DPDCID(), Timestamp: x.Timestamp(),
			TSR: x.TSR(), FType: x.FType(), Vendor: x.Vendor(),
		}
		off += PETHLen
	case op == OpEndpointReq:
		x := ERTH(frame[off:])
		p.Endpoint = EndpointFields{Op: x.Op(), PortStatusMask: x.PortStatusMask(), Timestamp: x.Timestamp(), Vendor: x.Vendor()}
		off += ERTHLen
	case op == OpEndpointResp:
		x := EETH(frame[off:])
		p.Endpoint = EndpointFields{Op: x.Op(), PortStatusMask: x.PortStatusMask(), Timestamp: x.Timestamp(), Vendor: x.Vendor()}
		off += EETHLen
	}
	p.PayOff = off
	rest := len(frame) - off
	if rest == 0 && p.Opcode.IsData() && (p.DSCP == DSCPTrimmed || p.DSCP == DSCPTrimmedLastHop) {
		p.Trimmed = true
		p.Payload = frame[off:off]
		p.ICRC = 0
		return nil
	}
	if rest < ICRCLen {
		return ErrTruncated
	}
	if !p.Opcode.IsData() && (rest != ICRCLen || p.PadCount != 0) {
		return ErrPayload
	}
	if rest < ICRCLen+int(p.PadCount) {
		return ErrTruncated
	}
	if (rest-ICRCLen)&3 != 0 {
		return ErrLength
	}
	pay := rest - ICRCLen - int(p.PadCount)
	p.Payload = frame[off : off+pay]
	p.ICRC = le.Uint32(frame[len(frame)-ICRCLen:])
	return nil
}
