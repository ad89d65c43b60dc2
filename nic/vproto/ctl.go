package vproto

import (
	"fmt"
	"net/netip"
	"reflect"
)

// CtlCmd is an mrcctl command (a Ctl request).
type CtlCmd string

// mrcctl commands. Any session may ask for the device-wide ones (ports,
// counters) and about its own QPs; other applications' QPs, every QP at
// once and the session list need an administrator: a caller whose user (by
// SO_PEERCRED) is root or the daemon's own.
const (
	CtlPorts    CtlCmd = "ports"     // []PortStatus
	CtlQPs      CtlCmd = "qps"       // []QPRow: the caller's QPs (an administrator: all)
	CtlEVs      CtlCmd = "evs"       // []EVRow of QPN
	CtlCounters CtlCmd = "counters"  // Counters
	CtlSessions CtlCmd = "sessions"  // []SessionInfo (an administrator: all; else the caller's)
	CtlDeny     CtlCmd = "deny"      // CtlResult: take an EV or plane out of use on QPN; without QPN: add to the denylist (administrators only)
	CtlAllow    CtlCmd = "allow"     // CtlResult: put it back (without QPN: remove from the denylist)
	CtlDenylist CtlCmd = "denylist"  // []DenyRow: the daemon's denylist
	CtlOAMTrace CtlCmd = "oam-trace" // []OAMHop: the hops of EV's path to Peer
	CtlOAMProbe CtlCmd = "oam-probe" // OAMResult: one uSID OAM probe along EV's path to Peer, cut at Hop
	CtlPaths    CtlCmd = "paths"     // []pathprobe.Stats: the path-probe agent's loops; Scope stop/start pauses it (administrators)
)

// CtlScope says what deny and allow act on.
type CtlScope string

// Scopes of deny and allow.
const (
	ScopeEV    CtlScope = "ev"
	ScopePlane CtlScope = "plane"
	ScopePath  CtlScope = "path" // Plane and T1 (denylist only)
	ScopeLink  CtlScope = "link" // Link (denylist only)
)

// CtlRequest is an mrcctl command.
type CtlRequest struct {
	Cmd CtlCmd `json:"cmd"`
	QPN uint32 `json:"qpn,omitempty"`
	// EV, Plane, T1 or Link select what deny/allow act on, by Scope.
	// Without a QPN deny and allow edit the daemon's denylist (every QP,
	// now and later; administrators only); with one, only ev and plane,
	// on that QP.
	EV    uint32   `json:"ev,omitempty"`
	Plane int      `json:"plane,omitempty"`
	T1    int      `json:"t1,omitempty"`
	Link  string   `json:"link,omitempty"`
	Scope CtlScope `json:"scope,omitempty"`
	// Peer, Hop and TimeoutMS are oam-probe's (Peer also oam-trace's):
	// the destination host (template name or any of its addresses), the
	// hop the probe is cut at (1-based; 0: the peer itself, an echo) and
	// how long to wait for it. EV names the path; QPN carries the probe's
	// sequence number.
	Peer      string `json:"peer,omitempty"`
	Hop       int    `json:"hop,omitempty"`
	TimeoutMS int    `json:"timeout_ms,omitempty"`
	// Reflect makes oam-probe (and the last hop of oam-trace) a round trip through Peer: out along EV's
	// path, reflected by Peer's NIC, back through T1 index Back on the
	// same plane (docs/operations.md).
	Reflect bool `json:"reflect,omitempty"`
	Back    int  `json:"back,omitempty"`
}

// DenyRow is one row of `mrcctl deny list`.
type DenyRow struct {
	Entry string `json:"entry"`
	// Rules is how many engine rules the entry resolves to (a link can
	// name several peers' paths).
	Rules int `json:"rules"`
}

// OAMHop is one hop of an EV's path (oam-trace): a switch, reached by a
// loop probe, or the peer itself, by an echo.
type OAMHop struct {
	Hop   int      `json:"hop"`
	Name  string   `json:"name"`
	USID  string   `json:"usid"`
	Via   []string `json:"via"`            // the probe's uSIDs
	Back  []string `json:"back,omitempty"` // a reflect probe's return container, from the peer back to this host
	Kind  string   `json:"kind"`
	Plane int      `json:"plane"`
	T1    int      `json:"t1"`
}

// OAMResult answers oam-probe.
type OAMResult struct {
	OK     bool    `json:"ok"`
	RTTus  float64 `json:"rtt_us"`
	Hop    OAMHop  `json:"hop"`
	Target string  `json:"target"` // the peer's address on the plane
}

// CtlResult answers deny and allow.
type CtlResult struct {
	Result string `json:"result"`
}

// PortStatus is one row of `mrcctl ports`. Stats are the port's counters
// by name (nic/xsk's Stats fields).
type PortStatus struct {
	Name      string            `json:"name"`
	Interface string            `json:"interface"`
	Plane     int               `json:"plane"`
	Address   netip.Addr        `json:"address"`
	Up        bool              `json:"up"`
	Stats     map[string]uint64 `json:"stats"`
}

// QPRow is one row of `mrcctl qps`.
type QPRow struct {
	QPN    uint32 `json:"qpn"`
	Owner  uint32 `json:"owner"`
	State  string `json:"state"`
	Status string `json:"status"`
	// FailCause is the rule that put the QP in error (mrc.FailCause), empty
	// while it is not.
	FailCause string `json:"fail_cause,omitempty"`
	Transport string `json:"transport"` // the engine's: mrc or roce
	// RoCE only: DCQCN's current rate and the CNPs received (as sender)
	// and sent (as receiver).
	RateGbps  float64 `json:"rate_gbps,omitempty"`
	CNPsRx    uint64  `json:"cnps_rx,omitempty"`
	CNPsTx    uint64  `json:"cnps_tx,omitempty"`
	RemoteQPN uint32  `json:"remote_qpn"`
	SRTTus    float64 `json:"srtt_us"`
	Cwnd      int     `json:"cwnd"`
	InFlight  int     `json:"in_flight"`
	Backlog   int     `json:"backlog"`
	TxData    uint64  `json:"tx_data"`
	TxRtx     uint64  `json:"tx_rtx"`
	TxBytes   uint64  `json:"tx_bytes"`
	RxData    uint64  `json:"rx_data"`
	RxBytes   uint64  `json:"rx_bytes"`
	Timeouts  uint64  `json:"timeouts"`
	Losses    uint64  `json:"losses"`
	EVs       int     `json:"evs"`
	GoodEVs   int     `json:"good_evs"`
	// Counters is every counter of the engine's QP (mrc.QPCounters'
	// uint64 fields) by snake_case name.
	Counters map[string]uint64 `json:"counters,omitempty"`
}

// EVRow is one row of `mrcctl evs QPN`.
type EVRow struct {
	EV    string `json:"ev"`
	Plane int    `json:"plane"`
	T1    int    `json:"t1"`
	Path  string `json:"path"`
	// Switches is the physical path: each uSID's switch, then the peer
	// (p0-t0-0 p0-t1-1 p0-t0-1 h3); empty without a fixed path (ecmp).
	Switches string `json:"switches,omitempty"`
	State    string `json:"state"`
	Active   bool   `json:"active"`
	// Slots is how many of the QP's rotation slots the EV holds: 0 in the
	// reserve, 1 normally, more when it stands in for EVs of its plane that
	// left service and the reserve ran out (its share of the packets
	// grows with it).
	Slots    int    `json:"slots"`
	Sent     uint64 `json:"sent"`
	Acked    uint64 `json:"acked"`
	ECN      uint64 `json:"ecn"`
	Trims    uint64 `json:"trims"`
	Losses   uint64 `json:"losses"`
	Timeouts uint64 `json:"timeouts"`
	Probes   uint64 `json:"probes"`
}

// Counters is the answer of `mrcctl counters`: the engine's, the run
// loop's and each port's counters by name.
type Counters struct {
	Engine map[string]uint64 `json:"engine"`
	// QPs sums every QP counter (mrc.QPCounters' uint64 fields, by
	// snake_case name) over the daemon's QPs, the destroyed ones included.
	QPs     map[string]uint64 `json:"qps,omitempty"`
	Daemon  map[string]uint64 `json:"daemon"`
	Ports   []PortStatus      `json:"ports"`
	Regions int               `json:"regions"`
	Bytes   uint64            `json:"region_bytes"`
}

// SessionInfo describes a session (an open device) for mrcctl.
type SessionInfo struct {
	ID     uint32 `json:"id"`
	Client string `json:"client"`
	PID    int    `json:"pid"` // from SO_PEERCRED
	UID    uint32 `json:"uid"` // from SO_PEERCRED
}

// CounterMap returns the uint64 fields of the struct counters (a value or
// a pointer; nested structs and arrays are skipped) by field name: the
// daemon's counter structs become Counters rows without a hand-kept list.
func CounterMap(counters any) map[string]uint64 {
	v := reflect.Indirect(reflect.ValueOf(counters))
	if v.Kind() != reflect.Struct {
		panic(fmt.Sprintf("vproto.CounterMap: %T is not a struct", counters))
	}
	m := make(map[string]uint64, v.NumField())
	for i := 0; i < v.NumField(); i++ {
		f := v.Type().Field(i)
		if f.IsExported() && f.Type.Kind() == reflect.Uint64 {
			m[f.Name] = v.Field(i).Uint()
		}
	}
	return m
}
