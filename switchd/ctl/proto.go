// Package ctl is the control protocol of mrc-switchd and its client.
//
// The daemon listens on a unix stream socket (default
// /run/softmrc/<switch>.sock). A client writes one JSON Request per line and
// reads one JSON Response per line; a connection may carry many requests.
// The CLI (mrc-switchd fault|stats|routes|detach) and the testbed use Client.
package ctl

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/softmrc/softmrc/internal/probability"
)

// Commands.
const (
	CmdReady  = "ready"  // is the switch programmed and forwarding?
	CmdStats  = "stats"  // per-port counters, faults, switch state
	CmdRoutes = "routes" // FIB as read back from the data plane
	CmdFault  = "fault"  // inject or clear a fault
	CmdDetach = "detach" // remove programs, links and pins, then exit
	CmdWatch  = "watch"  // stream telemetry samples (docs/telemetry.md)
)

// Request is one line sent to the daemon.
type Request struct {
	Cmd   string `json:"cmd"`
	Fault *Fault `json:"fault,omitempty"`
	// IntervalNS is CmdWatch's sampling interval (0: 10 ms; 1 ms to 10 s).
	// The daemon answers one Response, then writes one telemetry sample
	// per port per interval, one JSON object per line, until the client
	// closes the connection.
	IntervalNS int64 `json:"interval_ns,omitempty"`
}

// Response is one line sent back. Error is set when OK is false.
type Response struct {
	OK     bool    `json:"ok"`
	Error  string  `json:"error,omitempty"`
	Ready  *Ready  `json:"ready,omitempty"`
	Stats  *Stats  `json:"stats,omitempty"`
	Routes []Route `json:"routes,omitempty"`
}

// Ready answers CmdReady.
type Ready struct {
	Switch  string `json:"switch"`
	Ready   bool   `json:"ready"`
	Adopted bool   `json:"adopted"` // took over pins of a previous process
	PID     int    `json:"pid"`
	Metrics string `json:"metrics,omitempty"` // address metrics are served on
}

// Stats answers CmdStats.
type Stats struct {
	Switch   string      `json:"switch"`
	Mode     string      `json:"mode"`
	Hang     bool        `json:"hang"`
	Adopted  bool        `json:"adopted"`
	Started  time.Time   `json:"started"`
	Ports    []PortStats `json:"ports"`
	Unmapped Counters    `json:"unmapped"` // frames on interfaces that are not ports
	// TelemetryDropped counts telemetry batches (10 ms of samples) dropped
	// because a watch subscriber read too slowly.
	TelemetryDropped uint64 `json:"telemetry_dropped,omitempty"`
}

// PortStats is one port's state and counters.
type PortStats struct {
	Name      string     `json:"name"`
	Interface string     `json:"interface"`
	Index     int        `json:"index"`
	Role      string     `json:"role"`
	Attach    string     `json:"attach,omitempty"` // XDP mode on the interface: native, generic; "" none
	Fault     FaultState `json:"fault"`
	Counters  Counters   `json:"counters"`
}

// FaultState is the fault currently set on a port.
type FaultState struct {
	Down      bool    `json:"down,omitempty"`
	Blackhole bool    `json:"blackhole,omitempty"`
	Loss      float64 `json:"loss,omitempty"` // probability 0..1
	FlapOnNS  int64   `json:"flap_on_ns,omitempty"`
	FlapOffNS int64   `json:"flap_off_ns,omitempty"`
}

// String is a short human form: "ok", "down", "loss=0.01,blackhole", ...
func (f FaultState) String() string {
	var s []string
	if f.Down {
		s = append(s, "down")
	}
	if f.Blackhole {
		s = append(s, "blackhole")
	}
	if f.Loss > 0 {
		s = append(s, "loss="+strconv.FormatFloat(f.Loss, 'g', -1, 64))
	}
	if f.FlapOnNS > 0 && f.FlapOffNS > 0 {
		s = append(s, fmt.Sprintf("flap=%v/%v", time.Duration(f.FlapOnNS), time.Duration(f.FlapOffNS)))
	}
	if len(s) == 0 {
		return "ok"
	}
	return strings.Join(s, ",")
}

// Counters are a port's counters. Every frame the switch program sees is
// counted once as forwarded, passed to the kernel or dropped for a reason.
// The tags make the switch's per-port metrics, softmrc_switch_<metric>_total
// (internal/tagmetrics): a field added here with a metric and help tag is
// exported with no other edit.
type Counters struct {
	RxPackets uint64 `json:"rx_packets" metric:"rx_packets" help:"Frames received on the port and seen by the switch program."`
	RxBytes   uint64 `json:"rx_bytes" metric:"rx_bytes" help:"Bytes received on the port."`
	TxPackets uint64 `json:"tx_packets" metric:"tx_packets" help:"Frames sent out of the port."`
	TxBytes   uint64 `json:"tx_bytes" metric:"tx_bytes" help:"Bytes sent out of the port."`
	Forwarded uint64 `json:"forwarded" metric:"forwarded" help:"Frames forwarded out of the port."`
	Pass      uint64 `json:"pass" metric:"pass" help:"Frames received on the port and handed to the kernel."` // non-IPv6, own addresses
	ECNMarked uint64 `json:"ecn_marked" metric:"ecn_marked" help:"Frames CE-marked on the port."`
	Trimmed   uint64 `json:"trimmed" metric:"trimmed" help:"Frames trimmed on the port."`
	Drops     Drops  `json:"drops" metric:"dropped" help:"Frames dropped, by reason." label:"reason"`
}

// Drops are dropped frames by reason. The metric tag is the reason's label
// value in softmrc_switch_dropped_total (internal/tagmetrics).
type Drops struct {
	NoRoute        uint64 `json:"no_route" metric:"no_route"`
	HopLimit       uint64 `json:"hop_limit" metric:"hop_limit"`
	Fault          uint64 `json:"fault" metric:"fault"`
	Buffer         uint64 `json:"buffer" metric:"buffer"`
	Malformed      uint64 `json:"malformed" metric:"malformed"`
	EndOfContainer uint64 `json:"end_of_container" metric:"end_of_container"`
}

// Total is the sum of all drop reasons.
func (d Drops) Total() uint64 {
	return d.NoRoute + d.HopLimit + d.Fault + d.Buffer + d.Malformed + d.EndOfContainer
}

// Route is one FIB entry as the data plane holds it.
type Route struct {
	Prefix string   `json:"prefix"`
	Port   string   `json:"port,omitempty"`  // port name, for a port route
	Group  string   `json:"group,omitempty"` // group name, for an ECMP route
	Ports  []string `json:"ports,omitempty"` // members of Group
}

// Fault targets and actions.
const (
	TargetSwitch = "switch" // the whole switch (hang) or every port

	ActDown      = "down"      // port (or every port) drops everything; carrier off
	ActUp        = "up"        // undo down (and, for the switch, hang)
	ActBlackhole = "blackhole" // data plane drops, carrier stays up
	ActLoss      = "loss"      // random loss with probability Loss
	ActFlap      = "flap"      // alternate FlapOn up / FlapOff down
	ActHang      = "hang"      // switch only: forwarding stops, daemon answers
	ActClear     = "clear"     // remove every fault from the target
)

// Fault is a fault request: a target (port name or "switch") and an action.
type Fault struct {
	Target    string  `json:"target"`
	Action    string  `json:"action"`
	Loss      float64 `json:"loss,omitempty"`
	FlapOnNS  int64   `json:"flap_on_ns,omitempty"`
	FlapOffNS int64   `json:"flap_off_ns,omitempty"`
}

// String renders f as on the command line.
func (f Fault) String() string {
	switch f.Action {
	case ActLoss:
		return fmt.Sprintf("%s loss=%s", f.Target, strconv.FormatFloat(f.Loss, 'g', -1, 64))
	case ActFlap:
		return fmt.Sprintf("%s flap=%v/%v", f.Target, time.Duration(f.FlapOnNS), time.Duration(f.FlapOffNS))
	}
	return f.Target + " " + f.Action
}

// ParseFault parses the command-line form: target is a port name or
// "switch"; spec is down, up, blackhole, loss=P (P a probability 0..1 or a
// percentage like 5%), flap=ON/OFF (Go durations, e.g. 200ms/50ms), hang or
// clear.
func ParseFault(target, spec string) (Fault, error) {
	f := Fault{Target: target}
	if target == "" {
		return f, fmt.Errorf("fault: missing target: give a port name or %q", TargetSwitch)
	}
	name, arg, hasArg := strings.Cut(spec, "=")
	f.Action = name
	switch name {
	case ActDown, ActUp, ActBlackhole, ActClear:
	case ActHang:
		if target != TargetSwitch {
			return f, fmt.Errorf("fault %s hang: hang applies to the whole switch: use 'fault switch hang'", target)
		}
	case ActLoss:
		p, err := probability.Parse(arg)
		if err != nil || !hasArg {
			return f, fmt.Errorf("fault %s %s: want loss=P with P a probability in [0,1] (e.g. 0.01) or a percentage (e.g. 1%%)", target, spec)
		}
		f.Loss = p
		return f, nil
	case ActFlap:
		on, off, ok := strings.Cut(arg, "/")
		don, err1 := time.ParseDuration(on)
		doff, err2 := time.ParseDuration(off)
		if !hasArg || !ok || err1 != nil || err2 != nil || don <= 0 || doff <= 0 {
			return f, fmt.Errorf("fault %s %s: want flap=ON/OFF with positive durations, e.g. flap=200ms/50ms", target, spec)
		}
		f.FlapOnNS, f.FlapOffNS = int64(don), int64(doff)
		return f, nil
	default:
		return f, fmt.Errorf("fault %s %s: unknown fault: want down, up, blackhole, loss=P, flap=ON/OFF, hang (switch only) or clear", target, spec)
	}
	if hasArg {
		return f, fmt.Errorf("fault %s %s: %s takes no value", target, spec, name)
	}
	return f, nil
}
