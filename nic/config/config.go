// Package config is the mrc-nicd configuration: the NIC's ports (one per
// plane), the uSID template the sender turns EVs into SRv6 paths with, the
// forwarding mode, the EV set size, congestion control, per-port pacing, the
// device socket applications open and the metrics address.
//
// The file is YAML. The testbed writes one per host (Marshal, Write) and
// mrc-nicd reads it (Load). Validate says what is wrong and how to fix it.
//
//	version: 1
//	host: h0
//	mode: srv6                      # or ecmp
//	template: /run/mrc/tb/h0.tmpl.yaml
//	evs: 128                        # EV set size of each QP (1..256)
//	mtu: 2048                       # RoCE MTU (payload bytes per packet)
//	cc: {algorithm: default}
//	qp: {ack_timeout: 20ms, min_rto: 200us, no_ev_timeout: 2s, retry_timeout: 4s}
//	device_socket: /run/mrc/tb/h0.sock
//	metrics: "[::1]:9470"           # empty: no metrics endpoint
//	ports:
//	  - name: p0
//	    interface: eth0
//	    plane: 0
//	    mac: 02:00:00:00:01:00
//	    neighbor_mac: 02:00:00:00:10:00
//	    address: fd00:1:0::1
//	    locator: 5f00:1:c000::/48    # srv6: the port's downlink uSID prefix
//	    pacing_bps: 0                # 0: no pacing
//	    delay: 0s                    # one-way wire delay held in the NIC (docs/nic.md)
package config

import (
	"bytes"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/softmrc/softmrc/internal/mrc"

	"github.com/softmrc/softmrc/internal/wire"
)

// Version is the config file format version; bump it with any field change.
const Version = 1

// Mode is the fabric forwarding mode the NIC builds packets for.
type Mode string

// Modes.
const (
	// ModeSRv6 sends IPv6-in-IPv6 with the uSID container of the EV's path as
	// the outer destination (needs a template).
	ModeSRv6 Mode = "srv6"
	// ModeECMP sends plain IPv6/UDP; the EV only picks the port (plane) and
	// the switches hash on it.
	ModeECMP Mode = "ecmp"
)

// Defaults used by Load when a field is left out.
const (
	DefaultEVs          = mrc.DefaultNumEVs // the brief's 128–256 EVs per QP
	DefaultMTU          = mrc.DefaultMTU
	DefaultDeviceSocket = "/run/mrc/nic.sock"
	// DefaultBusyPoll is busy_poll when the file leaves it out: long
	// enough to outlast half a round trip through a fabric of veths (50-90
	// µs on the machines measured), where shorter spins bought nothing
	// (docs/performance.md, "Busy polling on a quiet machine"); the spin
	// gate stops it while the host is short of CPU.
	DefaultBusyPoll = 200 * time.Microsecond
	// DefaultMaxWindow is cc.max_window when the file leaves it out: the
	// engine's own ceiling is the QP's window in packets (1024 × MTU, 4 MiB
	// at RoCE MTU 4096). A soft NIC's receiver drains a few Gb/s, so what
	// a window holds beyond the path's bandwidth-delay product (tens to a
	// hundred KB on these fabrics) queues in its receive ring, where the
	// last packets of a burst wait past their per-packet ACK timers: at
	// MTU 4096 through clos-2p 22-26 % of the data packets timed out
	// (spuriously; their EVs went ASSUMED_BAD and the sender stalled),
	// 3-6 % with 1 MiB (docs/performance.md).
	DefaultMaxWindow = 1 << 20
	// MaxThreads bounds threads: the steering program's socket map has 64
	// queues, and the hand-off buffers (one outbox per ordered pair of
	// threads) grow with the square.
	MaxThreads = 16
)

// ThreadCount is threads with 0 read as 1.
func (c *Config) ThreadCount() int { return max(c.Threads, 1) }

// Config is one mrc-nicd configuration.
type Config struct {
	Version int    `yaml:"version"`
	Host    string `yaml:"host,omitempty"`
	Mode    Mode   `yaml:"mode"`
	// Template is the EV→uSID path template file (internal/pathtmpl); required
	// in srv6 mode. A relative path is taken from the config file's folder.
	Template string `yaml:"template,omitempty"`
	// Denylist, when set, is a denylist file (nic/denylist: one entry per
	// line, ev EV | path PLANE,T1 | link NAME | plane P) loaded at start;
	// relative to the config's folder. An entry that does not resolve
	// stops the daemon.
	Denylist string `yaml:"denylist,omitempty"`
	// PathProbes, when non-zero, is the interval of the path-probe agent
	// (srv6 only): every interval one OAM loop probe to each of the NIC's
	// T0s and through each T0 to each T1 and back (docs/operations.md).
	// At least 1ms.
	PathProbes time.Duration `yaml:"path_probes,omitempty"`
	// EVs is the number of EVs (paths) each QP sprays over.
	EVs int `yaml:"evs"`
	// MTU is the RoCE MTU: payload bytes per data packet (1024, 2048, 4096).
	MTU int `yaml:"mtu"`
	CC  CC  `yaml:"cc"`
	// QP holds the reliability timers of every QP.
	QP QPOptions `yaml:"qp"`
	// RoCE configures QPs of the RoCE baseline transport (docs/roce.md).
	RoCE RoCEOptions `yaml:"roce,omitempty"`
	// DeviceSocket is the unix socket applications (nic/verbs) and mrcctl
	// connect to.
	DeviceSocket string `yaml:"device_socket"`
	// Metrics is the listen address of the Prometheus endpoint (/metrics);
	// empty disables it.
	Metrics string `yaml:"metrics,omitempty"`
	// Attach is the XDP attach mode of the steering program: auto, native or
	// generic.
	Attach string `yaml:"attach,omitempty"`
	// LogLevel is debug, info, warn or error.
	LogLevel string `yaml:"log_level,omitempty"`
	// BusyPoll is how long the run loop keeps polling its rings and
	// requests after the last work before it sleeps in ppoll; 0 sleeps at
	// once, left out (nil) is DefaultBusyPoll. Polling saves a scheduler
	// wakeup per message (lower latency) and costs that much CPU per idle
	// period. A pointer because 0 (never spin) and left out differ.
	BusyPoll *time.Duration `yaml:"busy_poll,omitempty"`
	// BusyPollAlways keeps busy_poll on while the run loop's thread waits
	// for a CPU. By default the loop stops spinning while it has waited
	// for more than a quarter of the last 10 ms (the spin takes a CPU
	// another thread needs) and spins again below a tenth.
	BusyPollAlways bool `yaml:"busy_poll_always,omitempty"`
	// StallClock takes the time the run loop's thread was kept off the CPU
	// (beyond 500 µs, with a receive backlog and data in flight) off the
	// engine's clock, so that a stall does not fire the timers of packets
	// whose ACKs wait in the ring (nic/daemon/rx.go, docs/nic.md). Off by
	// default: with it, S5's repaired share was 3-4 % short in the lab
	// (docs/engine.md "Spurious timeouts, the daemon's side").
	StallClock bool `yaml:"stall_clock,omitempty"`
	// KickThread moves each port's transmit kicks (sendto) to a thread of
	// their own (nic/xsk, SocketConfig.KickThread). In copy mode the kick
	// is the transmit itself, so the engine's encode and the kernel's copy
	// then run on two cores; it costs a thread per port and a wakeup when
	// a sleeping kick thread gets new frames.
	KickThread bool `yaml:"kick_thread,omitempty"`
	// LoopNice is the nice value of the run loop's thread (-20..19; 0
	// leaves it as started). A NIC's data path does not wait for the host's
	// CPU; a soft NIC's does, and on a host whose applications keep every
	// CPU busy a negative value lets the loop preempt them when a frame or
	// a post wakes it (the kernel's own Soft-RoCE runs in softirq, above
	// every process). Only the loop's thread: the sessions' goroutines and
	// the telemetry encoder stay at the daemon's priority. Below 0 needs
	// CAP_SYS_NICE; without it the daemon logs a warning and runs on.
	LoopNice int `yaml:"loop_nice,omitempty"`
	// Threads is the number of engine threads (shards): each runs its own
	// engine on its own locked OS thread with its own AF_XDP socket on
	// queue Queue+i of every port, and owns the QPs whose number is i
	// modulo Threads. Each new QP goes to the thread with the fewest QPs
	// (a session's work requests and completions are passed between its
	// threads); a frame received on another thread's queue is handed
	// over. Each interface needs Queue+Threads queues (ip link add ...
	// numrxqueues N numtxqueues N). 0 or 1: one thread (docs/nic.md "More
	// than one core").
	Threads int    `yaml:"threads,omitempty"`
	Ports   []Port `yaml:"ports"`
	// EngineThread is set by mrc-nicd on each engine thread's copy of the
	// config (0..Threads-1); never read from a file.
	EngineThread int `yaml:"-"`
	// EnginePorts, when set (by mrc-nicd, for threads > 1), is the ports'
	// line time every engine thread paces against; nil: each thread
	// paces its ports at 1/Threads of their rate. Never read from a file.
	EnginePorts *mrc.PortClock `yaml:"-"`
}

// CC are the congestion-control options handed to the engine.
type CC struct {
	// Algorithm names the engine's algorithm; "default" or empty lets the
	// engine choose, "none" turns window limits off (testing only).
	Algorithm string `yaml:"algorithm,omitempty"`
	// InitialWindow and MaxWindow are per-destination windows in bytes
	// (the QPs to one peer share them). 0: the engine's initial window (64
	// packets) and DefaultMaxWindow, raised to InitialWindow when that is
	// larger.
	InitialWindow int `yaml:"initial_window,omitempty"`
	MaxWindow     int `yaml:"max_window,omitempty"`
	// Scale makes the CC's time constants k times longer (mrc.CCConfig
	// Scaled: the target queueing delay, 6 µs × k) for a fabric emulated at
	// 1/k of the 100 Gb/s they are made for, as roce.dcqcn_scale does for
	// DCQCN: 1250 for 80 Mbit/s per host. 0 or 1: the defaults as they are.
	Scale float64 `yaml:"scale,omitempty"`
}

// QPOptions are per-QP reliability settings handed to the engine.
//
// The defaults are for software NICs: on a shared VM a round trip through
// two AF_XDP daemons and XDP switches takes 0.2-2 ms, so the hardware-style
// 500 µs ACK timeout of the engine would retransmit (and finally fail QPs)
// spuriously.
type QPOptions struct {
	// AckTimeout caps the adaptive per-packet ACK timeout before backoff.
	AckTimeout time.Duration `yaml:"ack_timeout"`
	// MinRTO is the floor of the adaptive timeout.
	MinRTO time.Duration `yaml:"min_rto"`
	// RetryLimit is the retries of one packet before the QP fails (32 or
	// more: retry forever); 0 = engine default.
	RetryLimit int `yaml:"retry_limit,omitempty"`
	// NoEVTimeout fails a QP that has had no usable path this long.
	NoEVTimeout time.Duration `yaml:"no_ev_timeout"`
	// RetryTimeout fails a QP (RETRY_EXCEEDED, as RC's retry count does)
	// whose unacknowledged data has seen no acknowledgement for this long:
	// the peer is gone or every path to it is dead. A soft NIC on a shared
	// host can be descheduled for hundreds of milliseconds, so the default
	// is several times the engine's 1 s.
	RetryTimeout time.Duration `yaml:"retry_timeout"`
}

// RoCEOptions configure the QPs created with the RoCE transport.
type RoCEOptions struct {
	// AckTimeout is their fixed local ACK timeout (IBTA: 4.096 µs ·
	// 2^timeout, no adaptation); 0 = DefaultRoCEAckTimeout.
	AckTimeout time.Duration `yaml:"ack_timeout,omitempty"`
	// DCQCNScale slows DCQCN down k times (every period × k, every rate
	// step ÷ k; internal/dcqcn Config.Scaled) for a fabric emulated at 1/k
	// of a real one's speed, e.g. 100 for 1 Gb/s links standing for
	// 100 Gb/s ones. 0 or 1: the mlx5 defaults as they are.
	DCQCNScale float64 `yaml:"dcqcn_scale,omitempty"`
	// DCQCNTarget is DCQCN's target-rate rule on a cut (docs/roce.md):
	// "paper" (or empty) sets the target to the current rate on every cut,
	// as the DCQCN paper does; "mlx5" only when the increase timer fired
	// since the previous cut (mlx5's defaults rp_clamp_tgt_rate 0,
	// rp_clamp_tgt_rate_ati 1), so a burst of CNPs leaves the target at
	// the rate before it. mlx5's rule is what NICs run behind PFC; on a
	// lossy fabric it loses more (docs/roce.md).
	DCQCNTarget string `yaml:"dcqcn_target,omitempty"`
}

// DCQCN target rules (RoCEOptions.DCQCNTarget).
const (
	DCQCNTargetPaper = "paper"
	DCQCNTargetMLX5  = "mlx5"
)

// DefaultRoCEAckTimeout is 4.096 µs · 2^14, the timeout perftest's
// ib_write_bw gives its QPs.
const DefaultRoCEAckTimeout = 4096 << 14 * time.Nanosecond

// NCCLRoCEAckTimeout is 4.096 µs · 2^20 (4.295 s), the local ACK timeout
// NCCL gives its QPs (NCCL_IB_TIMEOUT's default in NCCL's net_ib.cc): the
// one collectives over RoCE run with, where perftest's 67 ms is exhausted by
// eight timeouts without progress in half a second.
const NCCLRoCEAckTimeout = 4096 << 20 * time.Nanosecond

// Default QP timers (see QPOptions).
const (
	DefaultAckTimeout   = 20 * time.Millisecond
	DefaultMinRTO       = 200 * time.Microsecond
	DefaultNoEVTimeout  = 2 * time.Second
	DefaultRetryTimeout = 4 * time.Second
)

// Port is one NIC port: one interface in one plane.
type Port struct {
	// Name is the port's name in logs, metrics and mrcctl; empty means the
	// interface name.
	Name      string `yaml:"name,omitempty"`
	Interface string `yaml:"interface"`
	// Queue is the interface queue the AF_XDP socket binds (veth: 0).
	Queue int `yaml:"queue,omitempty"`
	Plane int `yaml:"plane"`
	// MAC is the port's own MAC; NeighborMAC the MAC of the T0 port (or the
	// peer NIC) it is cabled to, the destination of every frame sent.
	MAC         wire.MAC `yaml:"mac"`
	NeighborMAC wire.MAC `yaml:"neighbor_mac"`
	// Address is the port's own (inner) IPv6 address in its plane.
	Address netip.Addr `yaml:"address"`
	// Locator is the uSID prefix whose IPv6-in-IPv6 frames the port steers to
	// the NIC (srv6 mode: block:downlink-uSID::/48).
	Locator netip.Prefix `yaml:"locator"`
	// PacingBps limits the port's transmit rate in bit/s (L2 bytes); 0 = off.
	PacingBps uint64 `yaml:"pacing_bps,omitempty"`
	// Delay is the one-way propagation delay of the port's wire, held in
	// the NIC (nic/delayline): frames the port transmits leave Delay later
	// and frames it receives reach the engine Delay later, so a round trip
	// over this wire gains 2 × Delay. 0 = none. For testbeds whose kernel
	// has no sch_netem and whose switches (XDP) cannot hold a frame.
	Delay time.Duration `yaml:"delay,omitempty"`
	// DelayFrames is the delay line's pool per direction, in frames
	// (0 = DefaultDelayFrames): a frame that finds it full is dropped and
	// counted (delay_dropped), never waited for.
	DelayFrames int `yaml:"delay_frames,omitempty"`
}

// DefaultDelayFrames is a delay line's pool per direction when a port gives
// none: 10 ms of full 4 KiB-MTU frames at 1 Gbit/s is ~300 frames, and
// ACKs are many more, smaller ones.
const DefaultDelayFrames = 2048

// MaxDelay bounds a port's delay: a wire longer than this is a typo.
const MaxDelay = 10 * time.Second

// PortName is p.Name or, when empty, the interface name.
func (p Port) PortName() string {
	if p.Name != "" {
		return p.Name
	}
	return p.Interface
}

// Parse reads a config from YAML; source names it in errors. Unknown fields
// are errors (a typo must not silently fall back to a default). Defaults are
// filled in, then the result is validated.
func Parse(b []byte, source string) (*Config, error) {
	var c Config
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&c); err != nil {
		// yaml.v3 refuses a bare number for a duration ("busy_poll: 0")
		// with a message about Go types; say what to write instead.
		if strings.Contains(err.Error(), "into time.Duration") {
			err = fmt.Errorf("%w (a duration needs its unit: 0s, 200us, 20ms)", err)
		}
		return nil, fmt.Errorf("nic config %s: %w", source, err)
	}
	c.SetDefaults()
	if err := c.Validate(); err != nil {
		return nil, fmt.Errorf("nic config %s: %w", source, err)
	}
	return &c, nil
}

// Load reads and validates the config file at path. A relative Template is
// resolved against the file's folder.
func Load(path string) (*Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read nic config: %w", err)
	}
	c, err := Parse(b, path)
	if err != nil {
		return nil, err
	}
	if c.Template != "" && !filepath.IsAbs(c.Template) {
		c.Template = filepath.Join(filepath.Dir(path), c.Template)
	}
	if c.Denylist != "" && !filepath.IsAbs(c.Denylist) {
		c.Denylist = filepath.Join(filepath.Dir(path), c.Denylist)
	}
	return c, nil
}

// SetDefaults fills the fields left zero.
func (c *Config) SetDefaults() {
	if c.Version == 0 {
		c.Version = Version
	}
	if c.Mode == "" {
		c.Mode = ModeSRv6
	}
	if c.EVs == 0 {
		c.EVs = DefaultEVs
	}
	if c.MTU == 0 {
		c.MTU = DefaultMTU
	}
	if c.DeviceSocket == "" {
		c.DeviceSocket = DefaultDeviceSocket
	}
	if c.QP.AckTimeout == 0 {
		c.QP.AckTimeout = DefaultAckTimeout
	}
	if c.QP.MinRTO == 0 {
		c.QP.MinRTO = DefaultMinRTO
	}
	if c.QP.NoEVTimeout == 0 {
		c.QP.NoEVTimeout = DefaultNoEVTimeout
	}
	if c.QP.RetryTimeout == 0 {
		c.QP.RetryTimeout = DefaultRetryTimeout
	}
	if c.RoCE.AckTimeout == 0 {
		c.RoCE.AckTimeout = DefaultRoCEAckTimeout
	}
	if c.Attach == "" {
		c.Attach = "auto"
	}
	if c.BusyPoll == nil {
		d := DefaultBusyPoll
		c.BusyPoll = &d
	}
	if c.LogLevel == "" {
		c.LogLevel = "info"
	}
}

// BusyPollFor is busy_poll: DefaultBusyPoll when it was left out.
func (c *Config) BusyPollFor() time.Duration {
	if c.BusyPoll == nil {
		return DefaultBusyPoll
	}
	return *c.BusyPoll
}

// Validate checks c and returns every problem found, joined.
func (c *Config) Validate() error {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	if c.Version != Version {
		bad("version %d: this build reads version %d; regenerate the file (mrc-testbed up)", c.Version, Version)
	}
	switch c.Mode {
	case ModeSRv6:
		if c.Template == "" {
			bad("mode srv6 needs template: the uSID template file written by mrc-testbed")
		}
	case ModeECMP:
	default:
		bad("mode %q: want srv6 or ecmp", c.Mode)
	}
	if c.EVs < 1 || c.EVs > mrc.MaxNumEVs {
		bad("evs %d: want 1..%d EVs per QP (the engine's limit)", c.EVs, mrc.MaxNumEVs)
	}
	if !mrc.ValidMTU(c.MTU) {
		bad("mtu %d: want 1024, 2048 or 4096 (RoCE MTU, payload bytes per packet)", c.MTU)
	}
	if c.CC.InitialWindow < 0 || c.CC.MaxWindow < 0 || (c.CC.MaxWindow > 0 && c.CC.InitialWindow > c.CC.MaxWindow) {
		bad("cc: initial_window %d and max_window %d must be >= 0 with initial <= max", c.CC.InitialWindow, c.CC.MaxWindow)
	}
	if c.CC.Scale < 0 || c.CC.Scale > 1e6 {
		bad("cc: scale %v: want 0 (none) up to 1e6, e.g. 1250 for 80 Mbit/s host links standing for 100 Gb/s", c.CC.Scale)
	}
	if c.QP.RetryTimeout < 0 || (c.QP.AckTimeout > 0 && c.QP.RetryTimeout > 0 && c.QP.RetryTimeout < c.QP.AckTimeout) {
		bad("qp: retry_timeout %v: want 0 (default %v) or at least ack_timeout %v", c.QP.RetryTimeout, DefaultRetryTimeout, c.QP.AckTimeout)
	}
	if c.QP.AckTimeout < 0 || c.QP.MinRTO < 0 || c.QP.NoEVTimeout < 0 || c.QP.RetryLimit < 0 ||
		(c.QP.AckTimeout > 0 && c.QP.MinRTO > c.QP.AckTimeout) {
		bad("qp: ack_timeout %v, min_rto %v, no_ev_timeout %v, retry_limit %d: want >= 0 and min_rto <= ack_timeout",
			c.QP.AckTimeout, c.QP.MinRTO, c.QP.NoEVTimeout, c.QP.RetryLimit)
	}
	if c.RoCE.AckTimeout < 0 || c.RoCE.DCQCNScale < 0 || c.RoCE.DCQCNScale > 1e6 {
		bad("roce: ack_timeout %v, dcqcn_scale %v: want ack_timeout >= 0 and dcqcn_scale 0..1e6", c.RoCE.AckTimeout, c.RoCE.DCQCNScale)
	}
	if t := c.RoCE.DCQCNTarget; t != "" && t != DCQCNTargetPaper && t != DCQCNTargetMLX5 {
		bad("roce: dcqcn_target %q: want %q (the target rate follows every cut, the default) or %q (only after a timer increase, mlx5's default)", t, DCQCNTargetPaper, DCQCNTargetMLX5)
	}
	if c.LoopNice < -20 || c.LoopNice > 19 {
		bad("loop_nice %d: want -20 (most favoured) .. 19, or 0 to leave the thread as started", c.LoopNice)
	}
	if b := c.BusyPollFor(); b < 0 || b > time.Second {
		bad("busy_poll %v: want 0 (sleep at once) up to 1s, typically 20us-200us (left out: %v)", b, DefaultBusyPoll)
	}
	if c.DeviceSocket == "" {
		bad("device_socket is empty: give the unix socket path applications open")
	} else if len(c.DeviceSocket) > 107 {
		bad("device_socket %q is %d bytes; unix socket paths are limited to 107", c.DeviceSocket, len(c.DeviceSocket))
	}
	switch c.Attach {
	case "auto", "native", "generic":
	default:
		bad("attach %q: want auto, native or generic", c.Attach)
	}
	switch strings.ToLower(c.LogLevel) {
	case "debug", "info", "warn", "error":
	default:
		bad("log_level %q: want debug, info, warn or error", c.LogLevel)
	}
	if len(c.Ports) == 0 {
		bad("no ports: give one port per plane")
	}
	if c.Threads < 0 || c.Threads > MaxThreads {
		bad("threads %d: want 1..%d engine threads (0 means 1)", c.Threads, MaxThreads)
	}
	names := map[string]bool{}
	planes := map[int]bool{}
	for i, p := range c.Ports {
		where := fmt.Sprintf("ports[%d] (%s)", i, p.PortName())
		if p.Interface == "" {
			bad("%s: interface is empty", where)
		}
		if names[p.PortName()] {
			bad("%s: name used twice", where)
		}
		names[p.PortName()] = true
		if p.Plane < 0 || p.Plane >= 16 {
			bad("%s: plane %d: want 0..15 (4-bit EV plane field)", where, p.Plane)
		}
		if planes[p.Plane] {
			bad("%s: plane %d has two ports; one port per plane", where, p.Plane)
		}
		planes[p.Plane] = true
		if p.Queue < 0 {
			bad("%s: queue %d < 0", where, p.Queue)
		}
		if p.Delay < 0 || p.Delay > MaxDelay || p.DelayFrames < 0 || p.DelayFrames > 1<<20 {
			bad("%s: delay %v, delay_frames %d: want delay 0..%v (e.g. 5ms) and delay_frames 0 (default %d) up to %d",
				where, p.Delay, p.DelayFrames, MaxDelay, DefaultDelayFrames, 1<<20)
		}
		if p.MAC.IsZero() {
			bad("%s: mac is missing", where)
		}
		if p.NeighborMAC.IsZero() {
			bad("%s: neighbor_mac is missing (MAC of the T0 port it is cabled to)", where)
		}
		if !p.Address.Is6() || p.Address.Is4In6() {
			bad("%s: address %v: want the port's IPv6 address", where, p.Address)
		}
		if c.Mode == ModeSRv6 && (!p.Locator.IsValid() || !p.Locator.Addr().Is6()) {
			bad("%s: srv6 mode needs locator, the port's downlink uSID prefix (block:uSID::/48)", where)
		}
	}
	return errors.Join(errs...)
}

// Port returns the port of plane, or false.
func (c *Config) Port(plane int) (Port, bool) {
	for _, p := range c.Ports {
		if p.Plane == plane {
			return p, true
		}
	}
	return Port{}, false
}

// Marshal writes c as YAML.
func (c *Config) Marshal() ([]byte, error) {
	var buf bytes.Buffer
	buf.WriteString("# mrc-nicd configuration (nic/config, version 1)\n")
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(c); err != nil {
		return nil, fmt.Errorf("marshal nic config: %w", err)
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// Write validates c and writes it to path (mode 0644).
func (c *Config) Write(path string) error {
	if err := c.Validate(); err != nil {
		return fmt.Errorf("nic config %s: %w", path, err)
	}
	b, err := c.Marshal()
	if err != nil {
		return err
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		return fmt.Errorf("write nic config: %w", err)
	}
	return nil
}
