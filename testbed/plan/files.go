package plan

import (
	"fmt"
	"path/filepath"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/softmrc/softmrc/internal/pathtmpl"
	"github.com/softmrc/softmrc/internal/wire"
	nicconfig "github.com/softmrc/softmrc/nic/config"
	"github.com/softmrc/softmrc/switchd/config"
	"github.com/softmrc/softmrc/testbed/topo"
)

// File is one file of the run directory.
type File struct {
	Path string
	Data []byte
}

// SwitchConfigRenderer turns a planned switch into the bytes of its
// mrc-switchd config file. Render uses DefaultSwitchConfig unless a caller
// (or the switchd/config adapter) installs another one.
type SwitchConfigRenderer func(p *Plan, s *Switch) ([]byte, error)

// Files returns every file of the run directory, in a stable order: the plan
// itself, per switch its mrc-switchd config, per host its NIC config and EV→uSID
// template.
func (p *Plan) Files(render SwitchConfigRenderer) ([]File, error) {
	if render == nil {
		render = DefaultSwitchConfig
	}
	var out []File
	b, err := p.YAML()
	if err != nil {
		return nil, err
	}
	out = append(out, File{filepath.Join(p.RunDir, "plan.yaml"), b})
	for i := range p.Switches {
		s := &p.Switches[i]
		b, err := render(p, s)
		if err != nil {
			return nil, fmt.Errorf("switch %s config: %w", s.Name, err)
		}
		out = append(out, File{s.Config, b})
	}
	for i := range p.Hosts {
		h := &p.Hosts[i]
		nc := p.NICConfig(h)
		if err := nc.Validate(); err != nil {
			return nil, fmt.Errorf("host %s NIC config: %w", h.Name, err)
		}
		b, err := nc.Marshal()
		if err != nil {
			return nil, err
		}
		out = append(out, File{h.NICConfig, b})
		tpl, err := p.Template(h)
		if err != nil {
			return nil, err
		}
		if b, err = tpl.Marshal(); err != nil {
			return nil, err
		}
		out = append(out, File{h.Template, b})
	}
	return out, nil
}

// YAML is the whole plan as YAML (what `mrc-testbed plan` prints).
func (p *Plan) YAML() ([]byte, error) { return yaml.Marshal(p) }

// SwitchdConfig is the mrc-switchd configuration of a planned switch, in
// switchd/config's types (ports in the plan's order are the data-plane port
// indexes).
func SwitchdConfig(p *Plan, s *Switch) *config.Config {
	c := &config.Config{Name: p.Prefix + "-" + s.Name, Block: p.Block, Mode: config.Mode(p.Mode),
		PinDir: s.PinDir, Control: s.CtlSock}
	if p.Mode == topo.ModeSRv6 {
		c.USIDs = []wire.USID{s.USID}
	}
	for _, pt := range s.Ports {
		cp := config.Port{Name: pt.Ifname, Interface: pt.Ifname, NeighbourMAC: pt.PeerMAC, Role: config.Role(pt.Role)}
		if m := pt.Model; m.CapacityBps > 0 {
			cp.Model = &config.PortModel{CapacityBps: m.CapacityBps, ECNThreshold: uint32(m.ECNThreshold),
				ECNMax: uint32(m.ECNMax), ECNPMax: m.ECNPMax,
				TrimThreshold: uint32(m.TrimThreshold), Buffer: uint32(m.Buffer), HostECN: m.HostECN}
		}
		c.Ports = append(c.Ports, cp)
	}
	for _, r := range s.Routes {
		c.FIB = append(c.FIB, config.Route{Prefix: r.Dst, Port: r.Port, Group: r.Group})
	}
	for _, g := range s.Groups {
		c.ECMPGroups = append(c.ECMPGroups, config.ECMPGroup{Name: g.Name, Ports: g.Ports})
	}
	return c
}

// DefaultSwitchConfig validates SwitchdConfig and renders it as YAML.
func DefaultSwitchConfig(p *Plan, s *Switch) ([]byte, error) {
	c := SwitchdConfig(p, s)
	if err := config.Validate(c); err != nil {
		return nil, err
	}
	b, err := config.Marshal(c)
	if err != nil {
		return nil, err
	}
	return append([]byte("# mrc-switchd config written by mrc-testbed (docs/switchd.md)\n"), b...), nil
}

// NICConfig returns the mrc-nicd config of a host (nic/config): one port per
// plane with its MAC, the T0 port's MAC, its inner address and locator; the
// device socket in the run directory; the links' host capacity as pacing
// (or NICPacingBps when set).
func (p *Plan) NICConfig(h *Host) *nicconfig.Config {
	pacing := p.HostCapacityBps
	if p.NICPacingBps > 0 {
		pacing = p.NICPacingBps
	}
	c := &nicconfig.Config{Host: h.Name, Mode: nicconfig.Mode(p.Mode), MTU: p.RoCEMTU,
		DeviceSocket: filepath.Join(filepath.Dir(h.NICConfig), h.Name+".sock")}
	if p.Mode == topo.ModeSRv6 {
		c.Template = h.Template
	}
	for _, hp := range h.Ports {
		port := nicconfig.Port{Name: hp.Ifname, Interface: hp.Ifname, Plane: hp.Plane, Address: hp.Addr.Addr(),
			Locator: hp.Locator, PacingBps: pacing, MAC: hp.MAC, NeighborMAC: hp.GatewayMAC,
			Delay: time.Duration(hp.DelayUS) * time.Microsecond}
		c.Ports = append(c.Ports, port)
	}
	c.RoCE.DCQCNScale = p.NICDCQCNScale
	c.CC.Scale = p.NICCCScale
	c.Threads = p.NICThreads
	c.PathProbes = p.NICPathProbes
	c.RoCE.AckTimeout = p.NICRoCEAckTimeout // 0: mrc-nicd's default
	c.RoCE.DCQCNTarget = p.NICDCQCNTarget   // "": mrc-nicd's default
	c.SetDefaults()
	return c
}

// Template returns the EV→uSID path template of a host in
// internal/pathtmpl's format (docs/template.md), validated.
//
// pathtmpl needs at least one T1 per plane. The pair preset has none (every
// peer is T0-local, so no path uses a T1); it lists the uSID T1 0 would have.
func (p *Plan) Template(h *Host) (*pathtmpl.Template, error) {
	t := &pathtmpl.Template{Version: pathtmpl.Version, Block: p.Block.Addr().String(), BlockBits: p.Block.Bits(),
		Planes: p.Planes, T1Count: max(p.T1PerPlane, 1)}
	t.Local.Name = h.Name
	for pl := 0; pl < p.Planes; pl++ {
		lp := pathtmpl.LocalPlane{Plane: pl, Addr: h.Ports[pl].Addr.Addr().String(), T0: pathtmpl.T0USID(h.T0, wire.Plane(pl))}
		for j := 0; j < t.T1Count; j++ {
			lp.T1 = append(lp.T1, pathtmpl.T1USID(j, wire.Plane(pl)))
		}
		t.Local.Planes = append(t.Local.Planes, lp)
	}
	for _, o := range p.Hosts {
		if o.Name == h.Name {
			continue
		}
		peer := pathtmpl.Peer{Name: o.Name, T0Local: o.T0 == h.T0}
		for pl := 0; pl < p.Planes; pl++ {
			peer.Planes = append(peer.Planes, pathtmpl.PeerPlane{Plane: pl, Addr: o.Ports[pl].Addr.Addr().String(),
				T0: pathtmpl.T0USID(o.T0, wire.Plane(pl)), Downlink: o.Ports[pl].DownlinkUSID})
		}
		t.Peers = append(t.Peers, peer)
	}
	if err := t.Validate(); err != nil {
		return nil, fmt.Errorf("path template of %s: %w", h.Name, err)
	}
	return t, nil
}
