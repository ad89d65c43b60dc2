// Package telemetry is the sample record that mrc-nicd and mrc-switchd
// stream to subscribers (mrcctl watch, mrc-switchd watch, mrc-lab) and its
// JSON Lines encoding.
//
// A Sample is one object's counters at one instant: a QP or a NIC port of a
// host's mrc-nicd, or a port of an mrc-switchd. Its time T is read from
// CLOCK_MONOTONIC (Now), the one clock every process on the machine shares
// (and the clock of bpf_ktime_get_ns), so series from different daemons line
// up without any offset. Counters are cumulative since the object was made;
// a consumer takes differences between samples for rates. Gauges (queue
// depth, congestion window, EV states, carrier) are values at T.
//
// The package does no I/O besides encoding; the daemons and the clients
// (nic/verbs Watch, switchd/ctl Watch, internal/telemetry/watch) carry the
// lines over the control sockets. docs/telemetry.md lists every field.
package telemetry

import (
	"fmt"
	"strings"
	"time"
)

// Sample is one object's counters at one instant.
type Sample struct {
	// T is CLOCK_MONOTONIC in nanoseconds when the counters were read.
	T int64 `json:"t"`
	// Source is the daemon: a host name ("h0", mrc-nicd) or a switch name
	// ("p0-t0-0", mrc-switchd).
	Source string `json:"src"`
	// Kind is KindQP, KindNICPort or KindSwitchPort.
	Kind string `json:"kind"`
	// ID names the object within its source: a QPN ("0x0101"), a NIC port
	// ("p0") or a switch port ("d0", "u1").
	ID string `json:"id"`
	// Values are the object's counters and gauges by key (the Key*
	// constants and EVStateKey).
	Values map[string]float64 `json:"v"`
}

// Kinds of sample.
const (
	KindQP         = "qp"      // a QP of mrc-nicd
	KindNICPort    = "nicport" // a NIC port (one per plane) of mrc-nicd
	KindSwitchPort = "swport"  // a port of mrc-switchd
)

// Value keys. Counters (cumulative) unless marked gauge.
const (
	// QP (sender side unless noted).
	KeyAckedBytes = "acked_bytes"  // payload bytes acknowledged by the peer, each packet once
	KeyTxBytes    = "tx_bytes"     // payload bytes sent, first transmissions and retransmissions (also ports)
	KeyRtxBytes   = "rtx_bytes"    // payload bytes retransmitted
	KeyTxPackets  = "tx_pkts"      // data packets sent (also ports: frames)
	KeyRtxPackets = "rtx_pkts"     // data packets retransmitted
	KeyRxBytes    = "rx_bytes"     // payload bytes received (responder; ports: frame bytes)
	KeyLosses     = "losses"       // packets declared lost from SACK holes
	KeyTimeouts   = "timeouts"     // per-packet ACK timeouts
	KeyNACKs      = "nacks"        // NACKs received, any reason
	KeyTrims      = "trims"        // NACKs TRIMMED and TRIMMED_LASTHOP received
	KeyECNEchoes  = "ecn_echoes"   // SACKs echoing a CE mark (M = SKIP_ONCE or ALWAYS_SKIP)
	KeyNoEVStalls = "no_ev_stalls" // send attempts that found no usable EV
	// KeyInFlightAtBad sums, over the QP's EVs' transitions to ASSUMED_BAD,
	// the packets unacknowledged on the EV at that moment (S9's bound).
	KeyInFlightAtBad = "inflight_at_bad"
	KeyMsgsSent      = "msgs_sent"      // messages completed (all packets acknowledged)
	KeyCwnd          = "cwnd_bytes"     // gauge: congestion window of the QP's destination
	KeyInFlight      = "inflight_bytes" // gauge: bytes in flight to the QP's destination
	KeySRTT          = "srtt_ns"        // gauge: smoothed RTT
	KeyQPState       = "state"          // gauge: 0 INIT, 1 READY, 2 ERROR
	KeyFinal         = "final"          // 1 in a QP's last sample, sent when the QP is destroyed (absent otherwise)

	// NIC port.
	KeyRxPackets = "rx_pkts" // frames received (also switch ports)
	KeyCarrier   = "carrier" // gauge: 1 carrier up, 0 down
	KeyPlane     = "plane"   // gauge: the port's plane

	// Switch port.
	KeyDrops      = "drops"        // frames dropped for any reason (on ingress or egress of the port)
	KeyDropBuffer = "drops_buffer" // of those: the port model's buffer was full
	KeyDropFault  = "drops_fault"  // of those: an injected fault (down, blackhole, loss, flap, hang)
	KeyECNMarked  = "ecn_marked"   // data packets CE-marked on egress
	KeyTrimmed    = "trimmed"      // packets trimmed on egress
	KeyQueueBytes = "queue_bytes"  // gauge: the port model's virtual-queue backlog in bytes
	KeyFaultDown  = "fault_down"   // gauge: 1 while a down, blackhole or hang fault stops the port
)

// EV states as they appear in keys, in the engine's order
// (GOOD, SKIP, ASSUMED_BAD, DENIED).
var EVStates = [...]string{"good", "skip", "assumed_bad", "denied"}

// EVStateKey is the key of the gauge counting a QP's EVs of plane that are
// in state (one of EVStates): "ev_p0_good", "ev_p1_assumed_bad".
func EVStateKey(plane int, state string) string {
	return fmt.Sprintf("ev_p%d_%s", plane, state)
}

// ParseEVStateKey is the inverse of EVStateKey.
func ParseEVStateKey(key string) (plane int, state string, ok bool) {
	rest, found := strings.CutPrefix(key, "ev_p")
	if !found {
		return 0, "", false
	}
	num, st, found := strings.Cut(rest, "_")
	if !found || num == "" {
		return 0, "", false
	}
	for _, c := range num {
		if c < '0' || c > '9' {
			return 0, "", false
		}
		plane = plane*10 + int(c-'0')
	}
	for _, s := range EVStates {
		if s == st {
			return plane, st, true
		}
	}
	return 0, "", false
}

// Sampling intervals a daemon accepts.
const (
	MinInterval     = time.Millisecond
	DefaultInterval = 10 * time.Millisecond
	MaxInterval     = 10 * time.Second
)

// CheckInterval returns the interval a subscription asked for: 0 means
// DefaultInterval; outside [MinInterval, MaxInterval] is an error saying
// what is allowed.
func CheckInterval(d time.Duration) (time.Duration, error) {
	if d == 0 {
		return DefaultInterval, nil
	}
	if d < MinInterval || d > MaxInterval {
		return 0, fmt.Errorf("telemetry interval %v: want %v to %v (0 means %v)", d, MinInterval, MaxInterval, DefaultInterval)
	}
	return d, nil
}
