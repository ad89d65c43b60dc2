package daemon

import (
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/softmrc/softmrc/internal/mrc"
	"github.com/softmrc/softmrc/internal/pathtmpl"
	"github.com/softmrc/softmrc/internal/wire"
	"github.com/softmrc/softmrc/nic/config"
)

// Engine is what the run loop needs of the MRC engine; *mrc.Engine is one.
// Only the loop goroutine calls it.
type Engine interface {
	CreateQP(c mrc.QPConfig) (wire.QPN, error)
	Info(qpn wire.QPN) (mrc.QPInfo, error)
	Connect(qpn wire.QPN, remote mrc.QPInfo) error
	SetEVs(qpn wire.QPN, active, reserve []wire.EV) error
	DestroyQP(qpn wire.QPN) error
	PostWrite(qpn wire.QPN, wr mrc.WR) error
	PollCQ(dst []mrc.Completion) int
	// HandlePacket may write into frame during the call (restoring it
	// before it returns) and does not keep it.
	HandlePacket(now mrc.Time, port wire.Plane, frame []byte)
	// Poll emits the frames due at now; emit copies them.
	Poll(now mrc.Time, emit func(port wire.Plane, frame []byte))
	// PollInto is Poll encoding each frame into dst(port), then commit.
	PollInto(now mrc.Time, dst func(port wire.Plane) []byte, commit func(port wire.Plane, n int))
	NextDeadline() mrc.Time
	// HoldTimers stops or restarts Poll's running of the QPs' timers.
	HoldTimers(held bool)
	SetPortState(now mrc.Time, port wire.Plane, up bool)
	Deny(qpn wire.QPN, ev wire.EV) error
	Allow(qpn wire.QPN, ev wire.EV) error
	DenyPlane(qpn wire.QPN, plane wire.Plane) error
	AllowPlane(qpn wire.QPN, plane wire.Plane) error
	// SetDenylist replaces the engine-wide denylist (every QP, now and later).
	SetDenylist(rules []mrc.DenyRule) error
	Snapshot(qpn wire.QPN, s *mrc.QPSnapshot) error
	Counters() mrc.EngineCounters
}

var _ Engine = (*mrc.Engine)(nil)

// EngineConfig turns the NIC config into the engine's. The template is
// loaded in srv6 mode. Ports must cover planes 0..n-1.
func EngineConfig(cfg *config.Config) (mrc.Config, error) {
	ec := mrc.Config{Planes: len(cfg.Ports), MTU: cfg.MTU, Mode: mrc.SRv6}
	if cfg.Mode == config.ModeECMP {
		ec.Mode = mrc.ECMP
	}
	// The engine is the one pacer: each plane at its port's own rate. It
	// defers a data packet until its port has room (a packet it defers is
	// not sent: no timer runs for it), and the loop sends what it emits at
	// once, so a packet's ACK timer starts when it leaves.
	//
	// With engine threads each owns every n-th QP number. They pace each
	// port at its whole rate against one shared clock of the line time
	// all of them took (EnginePorts), or, without one, each at 1/n of the
	// rate (a static split: an idle thread's share is not lent to a busy
	// one).
	n := cfg.ThreadCount()
	split := 1.0
	if n > 1 {
		ec.QPNShards, ec.QPNShard = n, cfg.EngineThread
		if ec.SharedPorts = cfg.EnginePorts; ec.SharedPorts == nil {
			split = float64(n)
		}
	}
	var slowest uint64
	for _, p := range cfg.Ports {
		if p.PacingBps > 0 && p.Plane < len(ec.PortRates) {
			ec.PortRates[p.Plane] = float64(p.PacingBps) / 1e9 / split // bits per ns
			if slowest == 0 || p.PacingBps < slowest {
				slowest = p.PacingBps
			}
		}
	}
	if slowest > 0 {
		// PortQueue is the burst: how far ahead of its rate a port may
		// send. 32 KiB of line time at the slowest paced port, and at
		// least 4 frames': longer than the loop's wake-up slack (~50 µs)
		// at testbed rates, so a late wake-up loses no line time, and
		// short enough that a burst stays a few frames.
		burst := max(32<<10, 4*(cfg.MTU+256)) * 8
		ec.PortQueue = mrc.Time(float64(burst) * 1e9 / float64(slowest))
	}
	for _, p := range cfg.Ports {
		if p.Plane >= len(cfg.Ports) {
			return ec, fmt.Errorf("port %s is in plane %d but there are %d ports: planes must be 0..%d", p.PortName(), p.Plane, len(cfg.Ports), len(cfg.Ports)-1)
		}
		ec.Addrs[p.Plane] = wire.Addr128FromNetip(p.Address)
		ec.PortMAC[p.Plane] = p.MAC
		ec.NextHopMAC[p.Plane] = p.NeighborMAC
	}
	if ec.Mode == mrc.SRv6 {
		t, err := pathtmpl.Load(cfg.Template)
		if err != nil {
			return ec, fmt.Errorf("path template: %w", err)
		}
		ec.Template = t
	}
	switch cfg.CC.Algorithm {
	case "", "default", "nscc":
	case "none":
		ec.CC.Disable = true
	default:
		return ec, fmt.Errorf("cc algorithm %q: want default (nscc) or none", cfg.CC.Algorithm)
	}
	ec.CC.InitCwnd = cfg.CC.InitialWindow
	ec.CC.MaxCwnd = cfg.CC.MaxWindow
	if ec.CC.MaxCwnd == 0 {
		ec.CC.MaxCwnd = max(config.DefaultMaxWindow, cfg.CC.InitialWindow)
	}
	ec.CC = ec.CC.Scaled(cfg.CC.Scale)
	ec.AckEvery, ec.AckDelay = AckEvery, AckDelay
	// Spraying over planes reorders every burst; a SACK per new hole was
	// one per 4 data packets through clos-2p (docs/performance.md).
	ec.CoalesceHoles = true
	return ec, nil
}

// SACK coalescing of the soft NIC (the engine's defaults, 4 packets or
// 2 µs, are a hardware NIC's). Here every SACK costs the receiver a
// copy-mode transmit in its kick (about 2 µs of kernel time per frame on a
// veth) and the sender a receive and a SACK walk: with 4, the receiver spent
// 29 % of its CPU in SACK kicks under mrc-write-bw 64 KiB. One SACK per 16
// data packets, or 20 µs after the first unanswered one, cut CPU per GB to
// 0.87x (sender) and 0.80x (receiver) in the same run (docs/performance.md).
// 20 µs is far below min_rto (200 µs) and the loop's RTTs (0.2-2 ms), and
// SACKs that carry news (a hole, CE, a retransmission, AckReq: the last
// packet of every message) still go at once, so loss recovery and latency
// do not wait for it.
const (
	AckEvery = 16
	AckDelay = 20 * mrc.Microsecond
)

// NewMRCEngine builds the MRC engine for cfg over mem, seeded from the
// clock (a daemon is not a replayable simulation).
func NewMRCEngine(cfg *config.Config, mem mrc.Memory) (Engine, error) {
	ec, err := EngineConfig(cfg)
	if err != nil {
		return nil, err
	}
	seed := uint64(time.Now().UnixNano())
	return mrc.New(ec, mem, rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)))
}
