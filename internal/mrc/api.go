package mrc

import (
	"cmp"
	"errors"
	"fmt"
	"math"

	"github.com/softmrc/softmrc/internal/dcqcn"
	"github.com/softmrc/softmrc/internal/pathtmpl"
	"github.com/softmrc/softmrc/internal/wire"
)

// Time is a monotonic clock reading in nanoseconds. The engine never reads a
// clock itself: every entry point is handed the current time by its caller
// (the daemon's run loop or the fabric simulator).
type Time int64

// Common durations in Time units.
const (
	Nanosecond  Time = 1
	Microsecond Time = 1000
	Millisecond Time = 1000 * Microsecond
	Second      Time = 1000 * Millisecond
)

// Never is the deadline returned when nothing is scheduled.
const Never Time = 1<<63 - 1

// RoutingMode selects how a packet's path is named.
type RoutingMode uint8

const (
	// SRv6 (default): the outer IPv6 destination is a uSID container computed
	// from the EV through the path template (internal/pathtmpl).
	SRv6 RoutingMode = iota
	// ECMP: no outer header; the EV rides only in the UDP source port and the
	// flow label and switches hash it. The NIC port is the EV's plane.
	ECMP
)

func (m RoutingMode) String() string {
	if m == ECMP {
		return "ecmp"
	}
	return "srv6"
}

// TimeoutMode selects how the per-packet ACK timeout grows with retries.
type TimeoutMode uint8

const (
	// TimeoutExponential doubles the timeout per retry up to MaxAckTimeout.
	TimeoutExponential TimeoutMode = iota
	// TimeoutLinear keeps the timeout fixed.
	TimeoutLinear
)

// Transport selects the reliability scheme of a QP. Both ends must agree.
type Transport uint8

const (
	// MRC: spraying over an EV set, SACK/NACK selective retransmission, EV states.
	MRC Transport = iota
	// GoBackN: RoCEv2 RC behaviour on one path for baseline comparisons: the
	// receiver accepts only the next PSN, answers a gap with a NAK-sequence
	// (AETH syndrome 0x60) and the sender resends everything from the hole.
	GoBackN
	// RoCE: the RoCEv2 RC baseline (docs/roce.md): GoBackN's reliability on
	// exactly one path for the QP's life (the EV, hence UDP source port and
	// flow label, derived from the QPN pair as RoCE NICs do, roce.go), paced
	// by DCQCN (internal/dcqcn) instead of the window congestion control.
	RoCE
)

func (t Transport) String() string {
	switch t {
	case GoBackN:
		return "gobackn"
	case RoCE:
		return "roce"
	}
	return "mrc"
}

// inOrder reports whether t delivers in order with go-back-N recovery.
func (t Transport) inOrder() bool { return t == GoBackN || t == RoCE }

// Config configures an Engine (one soft NIC with one port per plane).
type Config struct {
	// Planes is the number of planes (= NIC ports), 1..wire.MaxPlanes.
	Planes int
	// Mode is the routing mode (SRv6 default).
	Mode RoutingMode
	// Template names paths in SRv6 mode (required there).
	Template *pathtmpl.Template
	// Addrs is this NIC's inner IPv6 address per plane.
	Addrs [wire.MaxPlanes]wire.Addr128
	// PortMAC and NextHopMAC are the Ethernet source and destination per port.
	PortMAC, NextHopMAC [wire.MaxPlanes]wire.MAC
	// MTU is the payload bytes per data packet: 1024, 2048 (default) or 4096.
	MTU int
	// UDPPort is the destination port sent (default 4791).
	UDPPort uint16
	// QPNShards and QPNShard split the QP numbers between the engines of
	// one NIC (mrc-nicd's --threads): this engine gives its QPs only
	// numbers n with n % QPNShards == QPNShard, so a frame's destination QP
	// names the engine that owns it. 0 or 1 shards: every number.
	QPNShards, QPNShard int

	// SACK coalescing (receiver): a SACK goes out after AckEvery data packets
	// (default 4) or AckDelay after the first unacknowledged one (default
	// 2 µs), and immediately for CE-marked, retransmitted, out-of-order or
	// AckReq packets (docs/engine.md).
	AckEvery int
	AckDelay Time
	// CoalesceHoles counts a packet that opens a new hole (arrives ahead of
	// a lower PSN still missing) toward the coalesced SACK instead of
	// answering it at once. A sender spraying over several planes reorders
	// every burst, so answered at once, holes cost mrc-nicd one SACK per
	// 2-3 data packets through clos-2p (a kick on the receiver, a receive
	// and a SACK walk on the sender each); coalesced, the sender's RACK
	// loss detection learns of a hole at most AckDelay later. Late
	// arrivals (more than 63 PSNs behind the highest, outside the bitmap of
	// a SACK at the top) are coalesced among themselves: a run of them
	// shares one SACK whose bitmap ends at the highest of them, sent after
	// AckEvery of them, AckDelay after the first, or when the next no
	// longer fits that bitmap (answered at once, they were another SACK
	// per 10 data packets through clos-2p). CE, retransmissions and AckReq
	// are still answered at once.
	CoalesceHoles bool

	// AlwaysSkipMarks is the responder's ALWAYS_SKIP threshold: when this
	// many consecutive data packets of one EV arrive CE-marked, spread over
	// at least one RTT, the SACK for the last one carries M=ALWAYS_SKIP (the
	// path is persistently congested; the sender takes the EV out of the
	// rotation and probes it back). Default 128; negative: never. (32
	// fired on the ordinary congestion of the fabric simulator's ECN
	// balance scenario and cut its flows to 30–38 % of the capacity.)
	AlwaysSkipMarks int
	// TransportACK makes the responder also send a RoCEv2 Transport ACK
	// (opcode 0xD1, AETH syndrome 0x1F, BTH PSN = cumulative ack, MSN =
	// messages completed) for every data packet with AckReq, for
	// compatibility with RoCE tooling. Off by default: SACKs carry all of
	// it, and the ACK doubles the control packets of small messages.
	TransportACK bool

	// PortRate is each port's line rate in bits per nanosecond (100 =
	// 100 Gb/s); 0 means unlimited. When set, the engine sends on a port only
	// while its backlog is under PortQueue (default 2 µs of line time): the
	// spec's "EV whose plane's port has TX room" (GetSendParams), which also
	// keeps the NIC's own queue out of the RTT.
	PortRate  float64
	PortQueue Time
	// PortRates, when an entry is non-zero, is that plane's port rate
	// (bits per ns) instead of PortRate: ports of different speeds, or a
	// testbed's per-port pacing. Zero entries take PortRate; Config()
	// reports the resulting rate of every plane.
	PortRates [wire.MaxPlanes]float64
	// SharedPorts, when set, is the ports' line time shared with other
	// engines sending on the same ports (PortClock); nil: this engine's
	// own. Only with PortRates (or PortRate) set does it matter.
	SharedPorts *PortClock

	// Flap damping of ports, local (carrier, SetPortState) and the peers'
	// (port-status updates): a port that went down FlapWindow-close twice
	// or more in a row is held out of use when it comes up, FlapHold
	// (doubled per further down, at most FlapHoldMax) before its EVs carry
	// traffic again; a single down and up is not held. Defaults 1 s,
	// 100 ms, 500 ms; FlapHold negative: no damping (docs/engine.md,
	// "Flap damping").
	FlapWindow  Time
	FlapHold    Time
	FlapHoldMax Time

	// MaxBurst bounds the data packets one Poll emits (default 64), so that
	// a run loop interleaves receiving with sending.
	MaxBurst int

	// CtrlQueue is the capacity of the control-packet queue (default 1024);
	// overflow is counted and the packets dropped (SACKs are cumulative).
	CtrlQueue int

	// CC holds the congestion-control constants (zero fields take defaults).
	CC CCConfig
}

// DefaultNumEVs and MaxNumEVs are QPConfig.NumEVs' default and upper limit;
// configuration files are validated against them.
const (
	DefaultNumEVs = defaultNumEVs
	MaxNumEVs     = maxNumEVs
)

// QPConfig configures one queue pair. Zero fields take the documented defaults.
type QPConfig struct {
	Transport Transport
	// PD is the QP's protection domain: the engine resolves its lkeys and
	// the rkeys of writes arriving on it only among the regions Memory
	// holds for this domain (mrc-nicd: one per application).
	PD uint32
	// NumEVs is the active EV set size (default 128, at most 256), split
	// equally across planes.
	NumEVs int
	// ReservePerPlane is the backup EVs kept per plane (default 8).
	ReservePerPlane int
	// Window is the MPR in packets: a multiple of 128, power of two, default
	// 1024, at most 8192. The receiver tracks PSNs inside it; the sender never
	// sends beyond cumulative ack + Window.
	Window int
	// MaxWImm caps in-flight Write-with-Immediate messages (default 64).
	MaxWImm int
	// SendQueue is the capacity of posted, uncompleted work requests (default 1024).
	SendQueue int
	// The per-packet ACK timeout (RTO) is adaptive by default:
	// clamp(srtt + 4·rttvar + srtt, MinRTO, MaxRTO) once an RTT
	// sample exists, AckTimeout before; a retry multiplies it by 2 per
	// earlier try (TimeoutExponential, default) up to MaxAckTimeout, or
	// keeps it (TimeoutLinear). FixedRTO uses AckTimeout as the base always
	// (the spec's fixed ack_timeout). docs/engine.md explains the choice.
	AckTimeout    Time // initial RTO, and the base with FixedRTO (default 1 ms)
	MinRTO        Time // floor of the adaptive RTO (default 20 µs)
	MaxRTO        Time // ceiling of the adaptive RTO before backoff (default 64 ms)
	MaxAckTimeout Time // ceiling with backoff (default max(64 × AckTimeout, MaxRTO))
	TimeoutMode   TimeoutMode
	FixedRTO      bool
	// RetryLimit is the per-packet retry count after which, if no usable EV
	// remains, the QP fails with StatusRetryExceeded (default 7; 32 or more =
	// retry forever).
	RetryLimit int
	// RetryTimeout: a QP with unacknowledged data that has had nothing
	// acknowledged for this long goes to error with StatusRetryExceeded,
	// flushing its WRs (RC's retry count × timeout: a peer that is gone
	// is not retried forever). Default max(1 s, MaxAckTimeout); negative:
	// never. Not for RoCE QPs: IBTA RC ends a QP by its retry count only
	// (RetryLimit transport timeouts or NAKs without progress), so a
	// RoCE QP waits out its ACK timeout however long (TestRoCERetryTimeout).
	RetryTimeout Time
	// NoEVTimeout: a QP with data to send and no usable EV for this long goes
	// to error (default 100 ms).
	NoEVTimeout Time
	// ProbeInterval is the spacing of probes of one ASSUMED_BAD EV (default
	// max(srtt, 10 µs) when zero) and ProbeSuccesses the consecutive answered
	// probes that return it to service (default 1).
	ProbeInterval  Time
	ProbeSuccesses int
	// KeepAlive is the reverse-probe period of a QP that is completely
	// idle (nothing posted or unacknowledged, nothing received lately):
	// one probe of one reverse EV per period (default 100 ms; negative:
	// none). Busier QPs probe only without recent evidence
	// (docs/engine.md, "Reverse path").
	KeepAlive Time
	// ReorderWindow: a hole is declared lost once a packet sent this much
	// later has been acknowledged (default max(¾·srtt+4·rttvar, 4 µs) when zero).
	ReorderWindow Time
	// EVs, when set, is the active EV set (an EXPLICIT profile: used as
	// given, NumEVs ignored) and Reserve its backup EVs; planes must exist on
	// both ends. Otherwise the set is GENERATED at Connect from the rng.
	EVs     []wire.EV
	Reserve []wire.EV
	// Deny lists EVs that start DENIED (the controller's denylist).
	Deny []wire.EV
	// StartPSN is the first PSN this QP sends; random when zero.
	StartPSN wire.PSN
	// DCQCN configures the RoCE transport's congestion control (zero
	// fields: the mlx5 defaults; LineRate 0: the plane's port rate, or
	// 100 Gb/s on an unpaced engine). Ignored by the other transports.
	DCQCN dcqcn.Config
}

// CCConfig are the NSCC-style constants (docs/engine.md explains them).
type CCConfig struct {
	InitCwnd     int     // bytes (default 64 × MTU)
	MinCwnd      int     // bytes (default 1 × MTU)
	MaxCwnd      int     // bytes (default Window × MTU of the QP)
	TargetQDelay Time    // target queueing delay above base RTT (default 6 µs)
	PropGain     float64 // start-phase proportional (multiplicative) increase gain (default 0.5)
	PropInc      float64 // proportional increase after the start phase, MTUs per RTT at an empty queue (default 8)
	FairInc      float64 // fair increase, MTUs per RTT (default 1)
	MDGain       float64 // multiplicative decrease gain (default 0.5)
	MDFloor      float64 // least factor one decrease may apply (default 0.5)
	TrimDecrease float64 // factor on a TRIMMED NACK (a fabric queue), once per RTT (default 1: none, the EV goes SKIP)
	// LastHopDecrease is the factor on a TRIMMED_LASTHOP NACK (the
	// receiver's downlink), once per RTT (default 0.7).
	LastHopDecrease float64
	// LastHopInc is the increase, MTUs per RTT, that replaces the
	// proportional one for LastHopHold RTTs after a TRIMMED_LASTHOP NACK
	// (defaults 1 and 128).
	LastHopInc  float64
	LastHopHold int
	Disable     bool // fixed window = InitCwnd (for experiments)
}

// DefaultTargetQDelay is CCConfig.TargetQDelay's default: 6 µs, a queue of
// 75 KB (about 37 packets of 2 KiB) at 100 Gb/s.
const DefaultTargetQDelay = 6 * Microsecond

// Scaled is c with its time constants k times longer, for a fabric emulated
// at 1/k of the 100 Gb/s the defaults are made for (mrc-nicd's cc.scale,
// the counterpart of roce.dcqcn_scale). The only time constant is
// TargetQDelay (zero: DefaultTargetQDelay): a target of N packets queued at
// 100 Gb/s, k times longer, is the same N packets at 100 Gb/s ÷ k. Every
// other rule is per RTT or per acknowledged byte and so already follows the
// emulated RTT (docs/engine.md, "Time scale"). k <= 0 or 1 leaves c as it is.
func (c CCConfig) Scaled(k float64) CCConfig {
	if k <= 0 || k == 1 {
		return c
	}
	c.TargetQDelay = Time(math.Round(float64(cmp.Or(c.TargetQDelay, DefaultTargetQDelay)) * k))
	return c
}

// QPInfo is what the two ends of a connection exchange out of band (there is
// no RDMA-CM): Info returns it, Connect takes the peer's.
type QPInfo struct {
	QPN       wire.QPN
	StartPSN  wire.PSN
	Addrs     [wire.MaxPlanes]wire.Addr128 // inner address per plane (zero = no port there)
	Window    int
	MaxWImm   int
	MTU       int
	Transport Transport
}

// Op is a work-request operation. Only Write and WriteImm are supported;
// the others exist so that callers get ErrUnsupportedOp rather than a silent
// fallback.
type Op uint8

const (
	OpWrite Op = iota
	OpWriteImm
	OpSend
	OpSendImm
	OpRead
	OpAtomicCAS
	OpAtomicFAA
)

func (o Op) String() string {
	return [...]string{"WRITE", "WRITE_IMM", "SEND", "SEND_IMM", "READ", "ATOMIC_CAS", "ATOMIC_FAA", "?"}[min(int(o), 7)]
}

// WR is a work request: write Len bytes of local memory to RemoteVA under RKey.
type WR struct {
	ID uint64
	Op Op
	// Local, when non-nil, is the source bytes; the engine keeps the slice
	// until the WR completes (the caller must not change it meanwhile).
	// Otherwise the source is (LKey, Addr, Len) in a registered region.
	Local []byte
	LKey  uint32
	Addr  uint64
	Len   uint32

	RemoteVA uint64
	RKey     uint32
	Imm      uint32 // OpWriteImm only
	// Unsignaled: no completion when the WR succeeds (errors and flushes
	// still complete), as verbs' unsignaled send. A completion of a later
	// WR of the QP then stands for it. On an MRC QP its last packet asks
	// for an immediate SACK (AckReq) only when no WR is queued behind it:
	// in a stream nobody waits for its completion, and the coalesced SACKs
	// acknowledge it (one SACK per message had been the receiver's and the
	// sender's largest per-message cost for small messages).
	Unsignaled bool
}

// CompKind says what a completion reports.
type CompKind uint8

const (
	// CompSend: a posted WR completed (all its packets acknowledged) or failed.
	CompSend CompKind = iota
	// CompRecvImm: a Write-with-Immediate landed, with every earlier message.
	CompRecvImm
	// CompQPError: the QP went to error (Status says why).
	CompQPError
)

// Status of a completion.
type Status uint8

const (
	StatusOK Status = iota
	StatusRetryExceeded
	StatusRemoteAccess  // peer NACKed UNEXP_EVENT (bad rkey/VA/length)
	StatusWImmLimit     // peer NACKed WIMM_LIMIT
	StatusFlushed       // QP in error, WR not executed
	StatusNoPath        // no usable EV for NoEVTimeout
	StatusRemoteInvalid // malformed request from the peer (receiver side)
)

func (s Status) String() string {
	return [...]string{"OK", "RETRY_EXCEEDED", "REMOTE_ACCESS", "WIMM_LIMIT", "FLUSHED", "NO_PATH", "REMOTE_INVALID", "?"}[min(int(s), 7)]
}

// Completion is one CQ entry.
type Completion struct {
	Kind   CompKind
	Status Status
	QPN    wire.QPN
	WRID   uint64 // CompSend
	Imm    uint32 // CompRecvImm
	Len    uint32 // CompSend: bytes; CompRecvImm: the message length (the RETH's DMA length)
	RQMSN  wire.MSN
}

// QPState is the state of a QP.
type QPState uint8

const (
	QPInit  QPState = iota // created, not connected
	QPReady                // connected (RTS)
	QPError                // failed; posted WRs are flushed
)

func (s QPState) String() string { return [...]string{"INIT", "READY", "ERROR"}[min(int(s), 2)] }

// EVState is the state of one EV in a QP's set (MRC-PUBLIC-FACTS §1.16).
type EVState uint8

const (
	EVGood EVState = iota
	EVSkip
	EVAssumedBad
	EVDenied
	numEVStates
)

func (s EVState) String() string {
	return [...]string{"GOOD", "SKIP", "ASSUMED_BAD", "DENIED"}[min(int(s), 3)]
}

// Access rights of a registered region, as in verbs (ibv_access_flags).
// Reading a region locally (the source of a posted write) is always allowed
// in verbs; AccessLocalRead stays a flag so that a Memory can still withhold
// it. MRC carries only RDMA Writes, so nothing in the engine writes into a
// region locally: AccessLocalWrite is recorded for verbs compatibility.
type Access uint8

const (
	AccessLocalRead Access = 1 << iota
	AccessRemoteWrite
	AccessLocalWrite
)

// Region is registered memory: Buf holds bytes [Base, Base+len(Buf)).
type Region struct {
	Base   uint64
	Buf    []byte
	Access Access
}

// Slice returns the region's bytes [va, va+n), capped so that an append
// cannot reach past them, or false when the range is not wholly inside the
// region. It is the one range check of registered memory: the engine's
// placement of incoming writes, its reading of posted ones and the daemon's
// checks all use it. An empty range at either end of the region is inside.
func (r Region) Slice(va uint64, n uint32) ([]byte, bool) {
	size := uint64(len(r.Buf))
	if va < r.Base || va-r.Base > size || uint64(n) > size-(va-r.Base) {
		return nil, false
	}
	off := va - r.Base
	end := off + uint64(n)
	return r.Buf[off:end:end], true
}

// KeyKind says which key space a key belongs to: verbs keeps local keys
// (lkeys, naming the source of a posted write) and remote keys (rkeys, which
// a peer names as the target of its writes) apart.
type KeyKind uint8

const (
	LocalKey KeyKind = iota
	RemoteKey
)

func (k KeyKind) String() string {
	if k == RemoteKey {
		return "rkey"
	}
	return "lkey"
}

// Memory resolves keys to registered regions inside one protection domain
// (QPConfig.PD): an lkey for a posted write's source, an rkey for an
// incoming write's target. A key of another protection domain, or of the
// other kind, must not resolve. It must not allocate; the engine calls it
// per packet.
type Memory interface {
	Region(pd uint32, key uint32, kind KeyKind) (Region, bool)
}

// Errors returned by the API. Wrapped errors keep these identities.
var (
	ErrUnsupportedOp = errors.New("mrc: only RDMA Write and Write-with-Immediate are supported (no Send, Read or Atomic)")
	ErrUnknownQP     = errors.New("mrc: unknown QP number")
	ErrQPState       = errors.New("mrc: QP is not in a state that allows this")
	ErrQueueFull     = errors.New("mrc: send queue full; poll the CQ and retry")
	ErrWImmLimit     = errors.New("mrc: in-flight Write-with-Immediate limit reached; wait for completions")
	ErrLocalAccess   = errors.New("mrc: local buffer is not inside a registered region with local-read access")
	ErrConfig        = errors.New("mrc: invalid configuration")
	ErrNoPeer        = errors.New("mrc: peer not found in the path template")
	ErrTooLarge      = errors.New("mrc: message longer than 2^31 bytes")
)

func configErr(format string, a ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrConfig}, a...)...)
}
