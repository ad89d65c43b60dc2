package mrc

import "github.com/softmrc/softmrc/internal/wire"

// EVCounters are the per-EV counters of one QP.
type EVCounters struct {
	Sent         uint64 // data packets sent on the EV (first transmissions and retransmissions)
	Acked        uint64 // of those, acknowledged
	ECN          uint64 // SACKs reflecting the EV with M=SKIP_ONCE (CE on the forward path)
	Trims        uint64 // NACK TRIMMED
	TrimsLastHop uint64 // NACK TRIMMED_LASTHOP
	Losses       uint64 // untrimmed losses detected from SACK holes
	Timeouts     uint64 // per-packet ACK timeouts
	Probes       uint64 // probes sent on the EV
	ProbesOK     uint64 // probes answered
	// Transitions[from][to] counts every state change.
	Transitions [numEVStates][numEVStates]uint64
}

// EVSnapshot is one EV as seen by Snapshot.
type EVSnapshot struct {
	EV     wire.EV
	Plane  wire.Plane
	State  EVState
	Active bool // in the rotation (false: reserve)
	Slots  int  // rotation slots it holds: 0 reserve, more than 1 reused for a plane whose reserve ran out
	EVCounters
}

// QPCounters are the per-QP counters.
type QPCounters struct {
	TxData, TxRtx, TxBytes   uint64
	TxSACK, TxNACK, TxProbe  uint64
	RxData, RxBytes, RxDup   uint64
	RxOOO, RxTrimmed         uint64
	RxSACK, RxNACK, RxProbe  uint64
	NACKsSent, NACKsRcvd     [256]uint64 // by reason
	Timeouts, Losses         uint64
	Retries                  uint64
	MsgsSent, MsgsReceived   uint64
	ImmDelivered             uint64
	BadRKey, BadVA, BadLen   uint64
	PSNOutOfWindow           uint64
	WImmRejected             uint64
	NoEVStalls               uint64 // send attempts with no usable EV
	SendBlockedFail          uint64 // QP errors after RetryTimeout with work queued and nothing sendable (send.go runTimers)
	LastEVKept               uint64 // losses on the last usable EV, SKIP, taken as congestion: it stays SKIP (evset.go lastCongested)
	PathFlapHolds            uint64 // paths (EV groups: plane and T1) held out of use as flapping (damp.go pathDamp)
	ReverseProbes, RevProbOK uint64
	PortStatusRcvd           uint64
	AlwaysSkipSent           uint64 // SACKs with M=ALWAYS_SKIP (responder)
	TxAck, RxAck             uint64 // Transport ACKs (AETH), Config.TransportACK
	// AckedBytes is the payload acknowledged by the peer, each packet
	// counted once at its first acknowledgement (cumulative or selective);
	// when every posted message has completed it equals their total length.
	// RtxBytes is the payload of retransmissions (TxBytes includes it).
	AckedBytes, RtxBytes uint64
	// InFlightAtBad sums, over every transition of one of the QP's EVs to
	// ASSUMED_BAD, the data packets whose latest transmission was on that
	// EV and that were not yet acknowledged at that moment (in flight, or
	// already found lost and waiting for retransmission): what the bad
	// path had taken when it was declared bad, the bound of S9's claim
	// that a QP loses no more than that (docs/telemetry.md).
	InFlightAtBad uint64
	EVTransitions [numEVStates][numEVStates]uint64 // sum over the QP's EVs
}

// QPSnapshot is a copy of a QP's state for tools (mrcctl) and tests.
type QPSnapshot struct {
	QPN        wire.QPN
	State      QPState
	Status     Status    // how it failed (the status of the WR it failed on)
	FailCause  FailCause // which rule put it in error
	Transport  Transport
	Peer       QPInfo
	SRTT       Time
	RTTVar     Time
	Cwnd       int // bytes, of the QP's destination
	InFlight   int // bytes, of the QP's destination
	SndUna     wire.PSN
	SndNxt     wire.PSN
	RcvCack    wire.PSN
	RemoteUp   uint32 // peer's port-status mask
	Counters   QPCounters
	EVs        []EVSnapshot // appended to the caller's slice
	ReverseEVs []wire.EV
	RoCE       *RoCESnapshot // RoCE transport only
}

// EngineCounters are node-wide counters (mostly drops of frames that never
// reached a QP).
type EngineCounters struct {
	RxFrames, TxFrames uint64
	RxDecodeErr        uint64 // malformed or truncated frames
	RxBadICRC          uint64
	RxUnknownQP        uint64
	RxNotReady         uint64 // QP not connected or in error
	RxPortDown         uint64 // frames handed in on a port that is down
	RxEndpoint         uint64
	RxNoPeer           uint64 // endpoint op from an unknown address
	CtrlDropped        uint64 // control queue overflow
	TxNoRoute          uint64 // no path for a control packet
	TxDenied           uint64 // packets not sent because the denylist denies their EV (deny.go)
	// TxDataByPlane and TxCtrlByPlane count the frames sent per plane:
	// data (and their retransmissions), and everything else (SACK, NACK,
	// ACK, probes, port status and its answers).
	TxDataByPlane   [wire.MaxPlanes]uint64
	TxCtrlByPlane   [wire.MaxPlanes]uint64
	TxNoBuffer      uint64 // PollInto: the caller had no (big enough) buffer; the frame was dropped
	PortStatusSent  uint64
	PortStatusStale uint64 // port-status updates older than the last applied one (ignored)
	// FlapHolds counts ports that came up and were held out of use as
	// flapping (damp.go): local ports (carrier) and peers' ports (port status).
	FlapHolds    uint64
	CQOverflow   uint64
	TxCNP, RxCNP uint64 // RoCE transport: CNPs sent and received, all QPs (roce.go)
}

// FailCause says which rule put a QP in error: a Status tells the
// application what failed, the cause tells the operator why (mrc-nicd logs
// it with the QP's counters when the QP fails).
type FailCause uint8

const (
	FailNone FailCause = iota
	// FailRetryTimeout: data outstanding and nothing newly acknowledged for
	// RetryTimeout.
	FailRetryTimeout
	// FailSendBlocked: work queued, nothing outstanding, and nothing could
	// be sent (no usable EV, closed window, no port room) for RetryTimeout.
	FailSendBlocked
	// FailRetryLimit: a packet timed out RetryLimit times and no usable EV
	// was left.
	FailRetryLimit
	// FailNoEV: data to send and no usable EV for NoEVTimeout.
	FailNoEV
	// FailRoCERetries: a RoCE QP's transport timer or NAKs exceeded
	// RetryLimit without progress.
	FailRoCERetries
	// FailRemote: the peer answered with an error (access, invalid
	// request, too many Write-with-Immediate in flight).
	FailRemote
)

func (c FailCause) String() string {
	return [...]string{"none", "nothing acknowledged for retry_timeout", "send blocked for retry_timeout",
		"a packet timed out retry_limit times with no usable EV left", "no usable EV for no_ev_timeout",
		"RoCE retry count exceeded", "the peer answered with an error", "?"}[min(int(c), 7)]
}
