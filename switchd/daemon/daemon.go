// Package daemon is mrc-switchd's core: it programs the XDP switch from a
// config, keeps it pinned so a restart adopts it without a forwarding gap,
// and serves the control socket and Prometheus metrics.
package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/softmrc/softmrc/switchd/config"
	"github.com/softmrc/softmrc/switchd/dataplane"
)

// Options configure a Daemon. Only Config is required.
type Options struct {
	Config *config.Config
	Logger *slog.Logger
	// Backend opens the data plane; zero value: BPF (the real XDP switch).
	Backend Backend
	// Links reads and changes interfaces; nil: Netlink.
	Links Links
	// AttachMode for the switch program; zero value: native, else generic.
	AttachMode dataplane.AttachMode
	// AnyPinDir skips the check that PinDir is on bpffs (for tests with a
	// fake Backend).
	AnyPinDir bool
}

// Daemon runs one switch.
type Daemon struct {
	cfg       *config.Config
	log       *slog.Logger
	be        Backend
	links     Links
	mode      dataplane.AttachMode
	anyPinDir bool

	mu          sync.Mutex
	plane       Plane
	ready       bool
	adopted     bool
	started     time.Time
	ports       []Link // resolved interfaces, by port index
	metricsAddr string
	detached    chan struct{}
	closeOnce   sync.Once
	// teleDropped counts telemetry batches dropped because a subscriber
	// read too slowly (telemetry.go).
	teleDropped atomic.Uint64
}

// New checks opts and returns a Daemon ready to Run.
func New(opts Options) (*Daemon, error) {
	if opts.Config == nil {
		return nil, errors.New("daemon: no config")
	}
	cfg := opts.Config.WithDefaults()
	if err := config.Validate(&cfg); err != nil {
		return nil, err
	}
	if err := CheckLimits(&cfg); err != nil {
		return nil, err
	}
	d := &Daemon{
		cfg:       &cfg,
		log:       opts.Logger,
		be:        opts.Backend,
		links:     opts.Links,
		mode:      opts.AttachMode,
		anyPinDir: opts.AnyPinDir,
		detached:  make(chan struct{}),
	}
	if d.log == nil {
		d.log = slog.Default()
	}
	d.log = d.log.With("switch", cfg.Name)
	if d.be.Load == nil || d.be.Adopt == nil {
		d.be = BPF
	}
	if d.links == nil {
		d.links = Netlink{}
	}
	return d, nil
}

// CheckLimits reports config values the data plane cannot hold.
func CheckLimits(c *config.Config) error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, &config.Error{Field: field, Msg: fmt.Sprintf(format, args...)})
	}
	if n := len(c.Ports); n > dataplane.MaxPorts {
		bad("ports", "%d ports: the data plane has %d port slots", n, dataplane.MaxPorts)
	}
	if n := len(c.USIDs); n > dataplane.MaxOwnUSIDs {
		bad("usids", "%d own uSIDs: the data plane holds at most %d", n, dataplane.MaxOwnUSIDs)
	}
	if n := len(c.FIB); n > dataplane.MaxRoutes {
		bad("fib", "%d routes: the data plane FIB holds at most %d", n, dataplane.MaxRoutes)
	}
	if n := len(c.ECMPGroups); n > dataplane.MaxGroups {
		bad("ecmp_groups", "%d groups: the data plane holds at most %d", n, dataplane.MaxGroups)
	}
	for i, g := range c.ECMPGroups {
		if n := len(g.Ports); n > dataplane.MaxGroupMembers {
			bad(fmt.Sprintf("ecmp_groups[%d].ports", i), "%d members: a group holds at most %d", n, dataplane.MaxGroupMembers)
		}
	}
	for i, p := range c.Ports {
		if p.Model != nil && p.Model.CapacityBps > dataplane.MaxCapacityBps {
			bad(fmt.Sprintf("ports[%d].model.capacity_bps", i), "%d bit/s is above the model's limit of %d bit/s", p.Model.CapacityBps, uint64(dataplane.MaxCapacityBps))
		}
	}
	return errors.Join(errs...)
}

// Config returns the config the daemon runs (defaults applied).
func (d *Daemon) Config() *config.Config { return d.cfg }

// Run serves until ctx ends (the switch keeps forwarding from its pins) or a
// detach request removes it. The control socket answers from the start;
// "ready" turns true once the data plane is programmed and attached.
func (d *Daemon) Run(ctx context.Context) error {
	d.started = time.Now()
	ln, err := listenControl(d.cfg.Control)
	if err != nil {
		return err
	}
	srv := newControlServer(d, ln)
	go srv.serve()
	defer srv.close()

	var ms *metricsServer
	if d.cfg.Metrics != "" {
		ms, err = startMetrics(d, d.cfg.Metrics)
		if err != nil {
			return err
		}
		defer ms.close()
		d.mu.Lock()
		d.metricsAddr = ms.addr
		d.mu.Unlock()
		d.log.Info("metrics", "addr", ms.addr)
	}

	if err := d.setup(); err != nil {
		d.mu.Lock()
		if d.plane != nil {
			if d.adopted {
				// The previous, complete programming keeps forwarding.
				d.plane.Close()
			} else if derr := d.plane.Destroy(); derr != nil {
				// Leave nothing half-programmed forwarding behind.
				d.log.Warn("remove the partly set-up switch", "err", derr)
			}
			d.plane = nil
		}
		d.mu.Unlock()
		return err
	}
	d.log.Info("ready", "adopted", d.adopted, "control", d.cfg.Control, "ports", len(d.cfg.Ports), "routes", len(d.cfg.FIB))

	select {
	case <-ctx.Done():
		d.mu.Lock()
		defer d.mu.Unlock()
		d.ready = false
		if d.plane != nil {
			// Close only the file descriptors: the pinned links keep
			// forwarding until the next mrc-switchd adopts them.
			if err := d.plane.Close(); err != nil {
				d.log.Warn("close data plane", "err", err)
			}
			d.plane = nil
		}
		d.log.Info("stopped; forwarding continues from the pins", "pin_dir", d.cfg.PinDir)
		return nil
	case <-d.detached:
		d.log.Info("detached: programs, links and pins removed")
		return nil
	}
}

// setup opens (or adopts) the data plane and programs it.
func (d *Daemon) setup() error {
	// Resolve interfaces first: a wrong interface name should fail before
	// anything is loaded.
	ports := make([]Link, len(d.cfg.Ports))
	for i, p := range d.cfg.Ports {
		l, err := d.links.Lookup(p.Interface)
		if err != nil {
			return fmt.Errorf("ports[%d] (%s): %w", i, p.Name, err)
		}
		ports[i] = l
	}

	if !d.anyPinDir {
		if err := checkBPFFS(d.cfg.PinDir); err != nil {
			return err
		}
	}
	plane, adopted, err := d.open()
	if err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.plane, d.adopted, d.ports = plane, adopted, ports
	// Faults live only in the pinned faults map. Read them before program()
	// rewrites the port slots, keyed by interface, so that a fault follows
	// its interface when the config reorders ports.
	var faults map[int]dataplane.Fault
	if adopted {
		for _, a := range plane.StaleLinks() {
			d.log.Warn("dropped pinned link whose interface is gone", "ifindex", a.Ifindex, "program", a.Kind.String())
		}
		var err error
		if faults, err = d.pinnedFaults(); err != nil {
			return err
		}
	}
	if err := d.program(faults); err != nil {
		return err
	}
	if err := d.attach(); err != nil {
		return err
	}
	d.ready = true
	return nil
}

// open adopts pins left by a previous process when there are any, else loads
// a fresh data plane.
func (d *Daemon) open() (Plane, bool, error) {
	dir := d.cfg.PinDir
	if ents, err := os.ReadDir(dir); err == nil && len(ents) > 0 {
		p, err := d.be.Adopt(dir)
		if err == nil {
			d.log.Info("adopted pinned data plane", "pin_dir", dir)
			return p, true, nil
		}
		// The pins are unusable (e.g. left by an incompatible version):
		// start over. Forwarding stops until the new program is attached.
		d.log.Warn("cannot adopt pins; removing them and loading afresh (forwarding pauses)", "pin_dir", dir, "err", err)
		if err := os.RemoveAll(dir); err != nil {
			return nil, false, fmt.Errorf("remove stale pins in %s: %w", dir, err)
		}
	}
	p, err := d.be.Load(dataplane.LoadOptions{PinDir: dir})
	if err != nil {
		return nil, false, fmt.Errorf("load switch data plane (pins in %s): %w", dir, err)
	}
	return p, false, nil
}

func dpRole(r config.Role) dataplane.Role {
	if r == config.RoleHost {
		return dataplane.RoleHostFacing
	}
	return dataplane.RoleFabric
}

func dpMode(m config.Mode) dataplane.Mode {
	if m == config.ModeECMP {
		return dataplane.ModeECMP
	}
	return dataplane.ModeSRv6
}

// pinnedFaults reads the faults of every configured port slot of an adopted
// data plane, by the slot's interface index.
func (d *Daemon) pinnedFaults() (map[int]dataplane.Fault, error) {
	out := map[int]dataplane.Fault{}
	for i := dataplane.PortID(0); i < dataplane.MaxPorts; i++ {
		p, ok, err := d.plane.Port(i)
		if err != nil {
			return nil, fmt.Errorf("read back port slot %d: %w", i, err)
		}
		if !ok {
			continue
		}
		f, err := d.plane.Fault(i)
		if err != nil {
			return nil, fmt.Errorf("read back fault of port slot %d: %w", i, err)
		}
		if f != (dataplane.Fault{}) {
			out[p.Ifindex] = f
		}
	}
	return out, nil
}

// program writes the config into the maps. It is idempotent: on adoption it
// rewrites identical values (no gap) and removes what the config dropped.
// faults are the adopted faults by ifindex (nil for a fresh data plane).
func (d *Daemon) program(faults map[int]dataplane.Fault) error {
	c, pl := d.cfg, d.plane
	sc := dataplane.SwitchConfig{BlockBits: c.Block.Bits(), Block: c.Block, Mode: dpMode(c.Mode)}
	if !c.Block.IsValid() {
		sc.BlockBits = 32
	}
	for _, u := range c.USIDs {
		sc.OwnUSIDs = append(sc.OwnUSIDs, uint16(u))
	}
	if err := pl.SetSwitchConfig(sc); err != nil {
		return fmt.Errorf("program switch config: %w", err)
	}
	for i, p := range c.Ports {
		dp := dataplane.Port{
			Ifindex:  d.ports[i].Index,
			NeighMAC: p.NeighbourMAC.HardwareAddr(), // the BPF map edge
			OwnMAC:   d.ports[i].MAC,
			Role:     dpRole(p.Role),
		}
		if m := p.Model; m != nil {
			dp.Model = dataplane.PortModel{CapacityBps: m.CapacityBps, MarkBytes: m.ECNThreshold, TrimBytes: m.TrimThreshold, BufferBytes: m.Buffer, HostECN: m.HostECN,
				MarkMaxBytes: m.ECNMax, MarkProb: m.ECNPMax}
		}
		if err := pl.SetPort(dataplane.PortID(i), dp); err != nil {
			return fmt.Errorf("program ports[%d] (%s on %s): %w", i, p.Name, p.Interface, err)
		}
	}
	if d.adopted {
		for i := len(c.Ports); i < dataplane.MaxPorts; i++ {
			if err := pl.DelPort(dataplane.PortID(i)); err != nil {
				d.log.Debug("clear unused port slot", "port", i, "err", err)
			}
		}
	}
	for gi, g := range c.ECMPGroups {
		members := make([]dataplane.PortID, len(g.Ports))
		for k, pn := range g.Ports {
			idx, _ := c.PortIndex(pn)
			members[k] = dataplane.PortID(idx)
		}
		if err := pl.SetECMPGroup(dataplane.GroupID(gi), members); err != nil {
			return fmt.Errorf("program ecmp_groups[%d] (%s): %w", gi, g.Name, err)
		}
	}
	want := map[string]bool{}
	for i, r := range c.FIB {
		nh := dataplane.NextHop{}
		if r.Group != "" {
			for gi, g := range c.ECMPGroups {
				if g.Name == r.Group {
					nh = dataplane.NextHop{Group: true, GroupID: dataplane.GroupID(gi)}
				}
			}
		} else {
			idx, _ := c.PortIndex(r.Port)
			nh = dataplane.NextHop{Port: dataplane.PortID(idx)}
		}
		if err := pl.AddRoute(r.Prefix, nh); err != nil {
			return fmt.Errorf("program fib[%d] (%s -> %s): %w", i, r.Prefix, r.Target(), err)
		}
		want[r.Prefix.String()] = true
	}
	if d.adopted {
		have, err := pl.Routes()
		if err != nil {
			return fmt.Errorf("read back FIB: %w", err)
		}
		for _, r := range have {
			if !want[r.Prefix.String()] {
				if err := pl.DelRoute(r.Prefix); err != nil {
					return fmt.Errorf("remove route %s that the config no longer has: %w", r.Prefix, err)
				}
				d.log.Info("removed stale route", "prefix", r.Prefix)
			}
		}
	}
	// The switch's own addresses go to the kernel (NDP, ping, management).
	for i, p := range c.Ports {
		addrs, err := d.links.Addrs(p.Interface)
		if err != nil {
			return fmt.Errorf("ports[%d] (%s): %w", i, p.Name, err)
		}
		for _, a := range addrs {
			if a.IsLinkLocalUnicast() {
				continue // the program passes fe80::/10 to the kernel anyway
			}
			if err := pl.AddLocalAddr(a); err != nil {
				d.log.Warn("local address not passed to the kernel", "addr", a, "port", p.Name, "err", err)
			}
		}
	}
	// Faults: a fresh data plane starts healthy; an adopted one keeps what
	// its maps hold (an unchanged flap keeps its phase). The hang flag is
	// left alone: SetSwitchConfig keeps it and a fresh one starts clear.
	for i := range c.Ports {
		f := faults[d.ports[i].Index]
		if err := pl.SetFault(dataplane.PortID(i), f); err != nil {
			return fmt.Errorf("program fault of ports[%d] (%s): %w", i, c.Ports[i].Name, err)
		}
		if !f.Down && !d.ports[i].Up {
			if err := d.links.SetUp(c.Ports[i].Interface, true); err != nil {
				return fmt.Errorf("ports[%d] (%s): %w", i, c.Ports[i].Name, err)
			}
		}
	}
	return nil
}

// attach puts the switch program on every port and the XDP_PASS program on
// veth peers in this namespace; links the config no longer wants (switch or
// pass) go away.
func (d *Daemon) attach() error {
	sw := func(ifx int) dataplane.Attachment {
		return dataplane.Attachment{Ifindex: ifx, Kind: dataplane.LinkSwitch}
	}
	pass := func(ifx int) dataplane.Attachment {
		return dataplane.Attachment{Ifindex: ifx, Kind: dataplane.LinkPass}
	}
	have := map[dataplane.Attachment]bool{}
	for _, a := range d.plane.Attached() {
		have[a] = true
	}
	// detach removes our link(s) on ifx before the interface changes role
	// (an interface holds one XDP program).
	detach := func(ifx int, why string) error {
		if err := d.plane.Detach(ifx); err != nil {
			return fmt.Errorf("detach %s link on ifindex %d: %w", why, ifx, err)
		}
		delete(have, sw(ifx))
		delete(have, pass(ifx))
		return nil
	}
	wanted := map[dataplane.Attachment]bool{}
	isPort := map[int]bool{}
	for _, l := range d.ports {
		isPort[l.Index] = true
	}
	// Pass programs first: a redirect into a veth whose peer has neither
	// XDP nor GRO is lost silently (SRV6-XDP-FACTS §3).
	for i, l := range d.ports {
		p := d.cfg.Ports[i]
		switch {
		case l.Peer != 0 && isPort[l.Peer]:
			// Both ends are ports of this switch: the switch program is there.
		case l.Peer != 0 && have[pass(l.Peer)]:
			wanted[pass(l.Peer)] = true
		case l.Peer != 0 && l.PeerHasXDP && !have[sw(l.Peer)]:
			d.log.Debug("veth peer already runs XDP", "port", p.Name, "peer", l.PeerName)
		case l.Peer != 0:
			if have[sw(l.Peer)] {
				// The peer was a port of ours and is not any more.
				if err := detach(l.Peer, "former port"); err != nil {
					return err
				}
			}
			if err := d.plane.AttachPass(l.Peer); err != nil {
				return fmt.Errorf("attach XDP_PASS to %s (veth peer of ports[%d] %s): %w", l.PeerName, i, p.Name, err)
			}
			wanted[pass(l.Peer)] = true
			d.log.Info("attached XDP_PASS to veth peer", "port", p.Name, "peer", l.PeerName)
		case l.PeerNetNS:
			d.log.Debug("veth peer is in another namespace; its owner must run XDP or enable GRO there", "port", p.Name)
		}
	}
	for i, l := range d.ports {
		wanted[sw(l.Index)] = true
		if have[pass(l.Index)] {
			// Was the veth peer of a port, is a port now.
			if err := detach(l.Index, "XDP_PASS"); err != nil {
				return err
			}
		}
		if have[sw(l.Index)] && l.XDP == "" {
			// An adopted link whose interface shows no XDP program: its
			// device is gone although the data plane did not notice at
			// adoption (the namespace was rebuilt, the ifindex reused).
			// Replace it.
			d.log.Warn("adopted link is not attached any more; re-attaching", "port", d.cfg.Ports[i].Name, "ifindex", l.Index)
			if err := detach(l.Index, "stale"); err != nil {
				return err
			}
		}
		if have[sw(l.Index)] {
			continue
		}
		if err := d.plane.Attach(l.Index, d.mode); err != nil {
			p := d.cfg.Ports[i]
			return fmt.Errorf("attach switch program to %s (ports[%d] %s): %w", p.Interface, i, p.Name, err)
		}
	}
	for a := range have {
		if !wanted[a] && have[a] {
			if err := detach(a.Ifindex, "unused "+a.Kind.String()); err != nil {
				return err
			}
			d.log.Info("detached link the config no longer needs", "ifindex", a.Ifindex, "program", a.Kind.String())
		}
	}
	return nil
}

// detach removes everything (control request): links, programs, pins, state.
func (d *Daemon) detach() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.plane == nil {
		return errors.New("data plane not loaded")
	}
	// Links we took down for a "down" fault come back up.
	for i := range d.cfg.Ports {
		if f, err := d.plane.Fault(dataplane.PortID(i)); err == nil && f.Down {
			if err := d.links.SetUp(d.cfg.Ports[i].Interface, true); err != nil {
				d.log.Warn("bring port up on detach", "port", d.cfg.Ports[i].Name, "err", err)
			}
		}
	}
	if err := d.plane.Destroy(); err != nil {
		return fmt.Errorf("destroy data plane: %w", err)
	}
	d.plane = nil
	d.ready = false
	return nil
}

// finishDetach ends Run; the control server calls it after answering.
func (d *Daemon) finishDetach() { d.closeOnce.Do(func() { close(d.detached) }) }
