package daemon

import (
	"fmt"
	"strings"

	"github.com/softmrc/softmrc/internal/mrc"
	"github.com/softmrc/softmrc/internal/wire"
	"github.com/softmrc/softmrc/nic/denylist"
	"github.com/softmrc/softmrc/nic/service"
	"github.com/softmrc/softmrc/nic/vproto"
)

// The daemon's denylist: entries by EV, path, link or plane that hold for
// every QP of the NIC for the daemon's life (QPs created later included),
// edited by `mrcctl deny|allow` without a QPN and optionally loaded from
// the config's denylist file at start. The engine enforces them for every
// packet it sends (mrc.Engine.SetDenylist).

// loadDenylist builds the list and loads the config's file into it (New).
func (d *Daemon) loadDenylist() error {
	d.deny = denylist.NewList(denylist.NewFabric(len(d.ports), d.tmpl))
	if d.cfg.Denylist == "" {
		return nil
	}
	es, err := denylist.ReadFile(d.cfg.Denylist)
	if err != nil {
		return err
	}
	for _, e := range es {
		if _, err := d.deny.Add(e); err != nil {
			return fmt.Errorf("denylist file %s: %w", d.cfg.Denylist, err)
		}
	}
	if err := d.eng.SetDenylist(d.deny.Rules()); err != nil {
		return fmt.Errorf("denylist file %s: %w", d.cfg.Denylist, err)
	}
	d.log.Info("denylist loaded", "file", d.cfg.Denylist, "entries", len(es))
	return nil
}

func (d *Daemon) denyRows() []vproto.DenyRow {
	rows := []vproto.DenyRow{}
	for _, e := range d.deny.Entries() {
		r, _ := d.deny.Fabric().Resolve(e)
		rows = append(rows, vproto.DenyRow{Entry: e.String(), Rules: len(r)})
	}
	return rows
}

// ctlDeny answers deny/allow: on one QP with a QPN (ev or plane, as
// before the denylist existed), else on the daemon's denylist.
func (d *Daemon) ctlDeny(caller service.Caller, req vproto.CtlRequest) (any, error) {
	deny := req.Cmd == vproto.CtlDeny
	if req.QPN != 0 {
		if _, err := d.ctlQP(caller, req.Cmd, req.QPN); err != nil {
			return nil, err
		}
		return d.ctlDenyQP(req, deny)
	}
	if !caller.Admin {
		// The device socket is open to every local user; the denylist
		// changes the paths of every application.
		d.c.badOwner.Add(1)
		return nil, fmt.Errorf("%s without a QPN edits the denylist of every application's QPs: %w", req.Cmd, ErrNotAdmin)
	}
	var e denylist.Entry
	switch req.Scope {
	case vproto.ScopeEV:
		e = denylist.Entry{Kind: denylist.KindEV, EV: req.EV}
	case vproto.ScopePath:
		e = denylist.Entry{Kind: denylist.KindPath, Plane: req.Plane, T1: req.T1}
	case vproto.ScopeLink:
		e = denylist.Entry{Kind: denylist.KindLink, Link: req.Link}
	case vproto.ScopePlane:
		e = denylist.Entry{Kind: denylist.KindPlane, Plane: req.Plane}
	default:
		return nil, fmt.Errorf("%s: scope %q: want ev, path, link or plane", req.Cmd, req.Scope)
	}
	result := "ok"
	if deny {
		added, err := d.deny.Add(e)
		if err != nil {
			return nil, fmt.Errorf("deny: %w", err)
		}
		if !added {
			result = "already in the denylist"
		}
	} else if err := d.deny.Remove(e); err != nil {
		return nil, fmt.Errorf("allow: %w", err)
	}
	if err := d.eng.SetDenylist(d.deny.Rules()); err != nil {
		// Resolve checked the entry against this NIC; the engine
		// refusing it is a bug. Undo so the list matches the engine.
		if deny {
			_ = d.deny.Remove(e)
		} else {
			_, _ = d.deny.Add(e)
		}
		return nil, fmt.Errorf("%s %v: engine refused the list: %w", req.Cmd, e, err)
	}
	d.log.Info("denylist changed", "op", req.Cmd, "entry", e.String(), "entries", len(d.deny.Entries()))
	return vproto.CtlResult{Result: result}, nil
}

// ctlDenyQP denies or allows an EV or a plane on one QP. An EV the QP does
// not hold is an error naming how many it holds and where to see them.
func (d *Daemon) ctlDenyQP(req vproto.CtlRequest, deny bool) (any, error) {
	qpn := wire.QPN(req.QPN)
	if d.qps[qpn] == nil {
		return nil, fmt.Errorf("QP %#06x does not exist (mrcctl qps lists them)", req.QPN)
	}
	var err error
	switch req.Scope {
	case vproto.ScopeEV:
		var s mrc.QPSnapshot
		if err := d.eng.Snapshot(qpn, &s); err != nil {
			return nil, err
		}
		found := false
		for _, x := range s.EVs {
			found = found || x.EV == wire.EV(req.EV)
		}
		if !found {
			var some []string
			for i, x := range s.EVs {
				if i == 4 {
					some = append(some, "…")
					break
				}
				some = append(some, x.EV.String())
			}
			return nil, fmt.Errorf("%s: QP %#06x has no EV %v: it holds %d EVs (%s; mrcctl evs %#x lists them)",
				req.Cmd, req.QPN, wire.EV(req.EV), len(s.EVs), strings.Join(some, ", "), req.QPN)
		}
		if deny {
			err = d.eng.Deny(qpn, wire.EV(req.EV))
		} else {
			err = d.eng.Allow(qpn, wire.EV(req.EV))
		}
	case vproto.ScopePlane:
		if req.Plane < 0 || req.Plane >= len(d.ports) {
			return nil, fmt.Errorf("%s: plane %d: this NIC has planes 0..%d", req.Cmd, req.Plane, len(d.ports)-1)
		}
		if deny {
			err = d.eng.DenyPlane(qpn, wire.Plane(req.Plane))
		} else {
			err = d.eng.AllowPlane(qpn, wire.Plane(req.Plane))
		}
	default:
		return nil, fmt.Errorf("%s: scope %q on one QP: want ev or plane (path and link entries go in the daemon's denylist: leave out the QPN)", req.Cmd, req.Scope)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", req.Cmd, err)
	}
	return vproto.CtlResult{Result: "ok"}, nil
}

// engineCounters is the engine's counters by name, with the per-plane
// ones (arrays, which CounterMap skips) as NAME.planeN for this NIC's planes.
func (d *Daemon) engineCounters() map[string]uint64 {
	c := d.eng.Counters()
	m := vproto.CounterMap(c)
	for pl := range d.ports {
		m[fmt.Sprintf("TxDataByPlane.plane%d", pl)] = c.TxDataByPlane[pl]
		m[fmt.Sprintf("TxCtrlByPlane.plane%d", pl)] = c.TxCtrlByPlane[pl]
	}
	return m
}
