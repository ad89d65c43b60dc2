package fabricsim

import (
	"fmt"

	"github.com/softmrc/softmrc/internal/pathtmpl"
	"github.com/softmrc/softmrc/internal/wire"
)

// Template is host h's path template (internal/pathtmpl) for this fabric:
// its T0 and the T1 uSIDs per plane, and one peer row per other host, named
// "h<N>". It is what the testbed writes for the same topology.
func (c *Config) Template(h int) (*pathtmpl.Template, error) {
	if err := c.fill(); err != nil {
		return nil, err
	}
	nT1 := c.T1s
	if nT1 == 0 {
		nT1 = 1 // single-T0 fabric: every peer is T0-local, the T1 field is unused
	}
	t := &pathtmpl.Template{
		Version: pathtmpl.Version, Block: c.Block.String(), BlockBits: 32,
		Planes: c.Planes, T1Count: nT1,
		Local: pathtmpl.Local{Name: fmt.Sprintf("h%d", h)},
	}
	k, _ := c.HostT0(h)
	for pi := 0; pi < c.Planes; pi++ {
		p := wire.Plane(pi)
		lp := pathtmpl.LocalPlane{Plane: pi, Addr: c.HostAddr(h, p).String(), T0: pathtmpl.T0USID(k, p)}
		for j := 0; j < nT1; j++ {
			u := pathtmpl.T1USID(j, p)
			lp.T1 = append(lp.T1, u)
		}
		t.Local.Planes = append(t.Local.Planes, lp)
	}
	for o := 0; o < c.Hosts(); o++ {
		if o == h {
			continue
		}
		ok, dl := c.HostT0(o)
		pr := pathtmpl.Peer{Name: fmt.Sprintf("h%d", o), T0Local: ok == k}
		for pi := 0; pi < c.Planes; pi++ {
			p := wire.Plane(pi)
			pr.Planes = append(pr.Planes, pathtmpl.PeerPlane{Plane: pi, Addr: c.HostAddr(o, p).String(),
				T0: pathtmpl.T0USID(ok, p), Downlink: pathtmpl.DownlinkUSID(dl, p)})
		}
		t.Peers = append(t.Peers, pr)
	}
	if err := t.Validate(); err != nil {
		return nil, err
	}
	return t, nil
}

// HostAddrs is host h's address on every plane (zero beyond Planes), the
// shape the engine's configuration takes.
func (c *Config) HostAddrs(h int) (a [wire.MaxPlanes]wire.Addr128) {
	for p := 0; p < c.Planes; p++ {
		a[p] = c.HostAddr(h, wire.Plane(p))
	}
	return a
}
