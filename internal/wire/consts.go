package wire

// Opcode is the BTH opcode. MRC uses the manufacturer-specific block
// 0xC0-0xDF so that plain RoCE receivers do not claim its packets; the values
// are the Python OCP MRC 1.0 emulator's (MRC-PUBLIC-FACTS §1.2).
type Opcode uint8

// MRC opcodes.
const (
	OpWriteFirst   Opcode = 0xC6
	OpWriteMiddle  Opcode = 0xC7
	OpWriteLast    Opcode = 0xC8
	OpWriteLastImm Opcode = 0xC9
	OpWriteOnly    Opcode = 0xCA
	OpWriteOnlyImm Opcode = 0xCB
	OpAck          Opcode = 0xD1
	OpEndpointReq  Opcode = 0xD8
	OpEndpointResp Opcode = 0xD9
	OpSACK         Opcode = 0xDC
	OpNACK         Opcode = 0xDD
	OpProbe        Opcode = 0xDE

	// OpCNP is RoCEv2's Congestion Notification Packet (IBTA RoCEv2
	// annex A17.9.2: BTH opcode 1000_0001b, 16 reserved bytes, ICRC). The
	// notification point (receiver) of the RoCE baseline transport sends it
	// to the reaction point (sender) QP named in BTH.DestQP when data
	// arrives CE-marked; DCQCN acts on it (docs/roce.md).
	OpCNP Opcode = 0x81
)

// IsData reports whether op is an RDMA Write packet (METH, RETH follow).
func (op Opcode) IsData() bool { return op >= OpWriteFirst && op <= OpWriteOnlyImm }

// HasImm reports whether op carries an ImmDt.
func (op Opcode) HasImm() bool { return op == OpWriteLastImm || op == OpWriteOnlyImm }

// IsFirst reports whether op starts a message.
func (op Opcode) IsFirst() bool {
	return op == OpWriteFirst || op == OpWriteOnly || op == OpWriteOnlyImm
}

// IsLast reports whether op ends a message.
func (op Opcode) IsLast() bool {
	return op == OpWriteLast || op == OpWriteLastImm || op == OpWriteOnly || op == OpWriteOnlyImm
}

// Known reports whether op is an MRC opcode this package can decode.
func (op Opcode) Known() bool {
	switch op {
	case OpWriteFirst, OpWriteMiddle, OpWriteLast, OpWriteLastImm, OpWriteOnly, OpWriteOnlyImm,
		OpAck, OpEndpointReq, OpEndpointResp, OpSACK, OpNACK, OpProbe, OpCNP:
		return true
	}
	return false
}

func (op Opcode) String() string {
	switch op {
	case OpWriteFirst:
		return "WRITE_FIRST"
	case OpWriteMiddle:
		return "WRITE_MIDDLE"
	case OpWriteLast:
		return "WRITE_LAST"
	case OpWriteLastImm:
		return "WRITE_LAST_IMM"
	case OpWriteOnly:
		return "WRITE_ONLY"
	case OpWriteOnlyImm:
		return "WRITE_ONLY_IMM"
	case OpAck:
		return "ACK"
	case OpEndpointReq:
		return "ENDPOINT_REQ"
	case OpEndpointResp:
		return "ENDPOINT_RESP"
	case OpSACK:
		return "SACK"
	case OpNACK:
		return "NACK"
	case OpProbe:
		return "PROBE"
	case OpCNP:
		return "CNP"
	}
	return "UNKNOWN"
}

// Header sizes in bytes.
const (
	EthLen     = 14
	IPv6Len    = 40
	UDPLen     = 8
	BTHLen     = 12
	METHLen    = 4
	TSETHLen   = 4
	RETHLen    = 16
	ImmDtLen   = 4
	AETHLen    = 4
	SETHLen    = 28
	CCStateLen = 8
	NETHLen    = 20
	PETHLen    = 16
	ERTHLen    = 16
	EETHLen    = 36
	CNPLen     = 16 // the CNP's reserved bytes after BTH
	ICRCLen    = 4
)

// EtherTypeIPv6 and the IPv6 next-header values used here.
const (
	EtherTypeIPv6 = 0x86DD
	ProtoUDP      = 17
	ProtoIPv6     = 41 // IPv6-in-IPv6 (SRv6 encapsulation)
)

// UDP ports. 4791 is RoCEv2's; the MRC 1.0 text reportedly prints 4971,
// which receivers accept as an alias (MRC-PUBLIC-FACTS §1.1).
const (
	UDPPortRoCEv2 = 4791
	UDPPortAlias  = 4971
)

// DSCP classes (docs/conventions.md). The spec names them; numbers are ours.
const (
	DSCPTrimmable      = 10
	DSCPTrimmableRetx  = 12
	DSCPNoTrim         = 14
	DSCPControl        = 46
	DSCPTrimmed        = 40
	DSCPTrimmedLastHop = 41
)

// ECN codepoints.
const (
	ECNNotECT = 0
	ECNECT1   = 1
	ECNECT0   = 2
	ECNCE     = 3
)

// NackReason is a NETH reason code; the numbers are UET's (MRC-PUBLIC-FACTS §1.8).
type NackReason uint8

// NACK reasons used by MRC.
const (
	NackTrimmed        NackReason = 0x01
	NackTrimmedLastHop NackReason = 0x02
	NackNoBitmap       NackReason = 0x06
	NackNoPktBuffer    NackReason = 0x07
	NackNoResource     NackReason = 0x0A
	NackPSNOutOfWindow NackReason = 0x0B
	NackUnexpEvent     NackReason = 0x19
	// NackWImmLimit is "in-flight Write-with-Immediate limit exceeded". The spec's
	// value is not public; 0x80 sits in the vendor range UET leaves unused.
	NackWImmLimit NackReason = 0x80
)

func (r NackReason) String() string {
	switch r {
	case NackTrimmed:
		return "TRIMMED"
	case NackTrimmedLastHop:
		return "TRIMMED_LASTHOP"
	case NackNoBitmap:
		return "NO_BITMAP"
	case NackNoPktBuffer:
		return "NO_PKT_BUFFER"
	case NackNoResource:
		return "NO_RESOURCE"
	case NackPSNOutOfWindow:
		return "PSN_OOR_WINDOW"
	case NackUnexpEvent:
		return "UNEXP_EVENT"
	case NackWImmLimit:
		return "WIMM_LIMIT"
	}
	return "UNKNOWN"
}

// Retried reports whether the sender retransmits after this NACK (all but
// UNEXP_EVENT and the WriteImm limit, which move the QP to error).
func (r NackReason) Retried() bool { return r != NackUnexpEvent && r != NackWImmLimit }

// MultipathVerdict is the SETH M field: what the responder says of the
// reflected EV.
type MultipathVerdict uint8

// M values.
const (
	MNone       MultipathVerdict = 0
	MSkipOnce   MultipathVerdict = 1
	MAlwaysSkip MultipathVerdict = 2
)

// EndpointOp is the ERTH/EETH op field.
type EndpointOp uint8

// Endpoint operations.
const (
	EPPortStatusUpdate EndpointOp = 0
	EPEVProbe          EndpointOp = 1
)

// TSETH ftype values.
const FTypeTimestamp = 0x1

// AETH syndromes (IBTA): 0x00-0x1F ACK with credit field; 0x1F = no credit info.
const AETHSyndromeACK = 0x1F
