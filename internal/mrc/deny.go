package mrc

import (
	"fmt"

	"github.com/softmrc/softmrc/internal/wire"
)

// The engine-wide denylist (DENIED in MRC-PUBLIC-FACTS §1.16): rules set by
// the controller (mrc-nicd's `mrcctl deny`, a denylist file, the mapper)
// that hold for every QP, those connected now and those connected later,
// until they are lifted. A denied EV or plane carries nothing: no data, and
// no control packet either (SACK, NACK, probe, reverse probe, port status
// and its answer). The rules are matched once per peer into a table
// (peerDeny) so that the per-packet check is an index.

// AnyPeer, AnyT1 and AnyPlane are DenyRule wildcards.
const (
	AnyPeer  = -1
	AnyT1    = -1
	AnyPlane = -1
)

// DenyRule is one denylist rule. Exact rules deny one EV (toward every
// peer); the others deny every EV whose plane and T1 field (mod the
// template's T1 count) match, toward Peer (an index into the path
// template's peers) or every peer. A plane rule is Plane set, T1 AnyT1.
type DenyRule struct {
	Exact bool
	EV    wire.EV
	Plane int
	T1    int
	Peer  int
}

func (r DenyRule) String() string {
	if r.Exact {
		return "ev " + r.EV.String()
	}
	return fmt.Sprintf("plane %d t1 %d peer %d", r.Plane, r.T1, r.Peer)
}

// peerDeny is the denylist resolved for one peer.
type peerDeny struct {
	planes uint32           // bit p: every EV of plane p is denied
	grp    []bool           // [plane*nT1 + t1]: the (plane, T1) path is denied
	evs    map[wire.EV]bool // exact EVs
	nT1    int
}

// SetDenylist replaces the engine-wide denylist. Every QP's EVs that the new
// list denies go DENIED at once (active ones are replaced from the reserve,
// packets in flight on a newly denied plane are resent elsewhere); EVs the
// old list denied and the new one does not return to GOOD. QPs connected
// later start with the list applied. Rules naming planes the engine does
// not have are an error and change nothing.
func (e *Engine) SetDenylist(rules []DenyRule) error {
	for _, r := range rules {
		pl := r.Plane
		if r.Exact {
			pl = int(r.EV.Plane())
		}
		if pl != AnyPlane && (pl < 0 || pl >= e.cfg.Planes) {
			return configErr("deny rule %v: plane %d, the engine has planes 0..%d", r, pl, e.cfg.Planes-1)
		}
		if !r.Exact && pl == AnyPlane && r.T1 == AnyT1 && r.Peer == AnyPeer {
			return configErr("deny rule %v denies everything: name a plane, a T1 or a peer", r)
		}
	}
	e.deny = append(e.deny[:0], rules...)
	for _, p := range e.peers {
		e.resolveDeny(p)
	}
	for _, q := range e.qpList {
		if q.state == QPReady {
			q.applyDenylist()
		}
	}
	return nil
}

// Denylist returns a copy of the engine-wide denylist.
func (e *Engine) Denylist() []DenyRule { return append([]DenyRule(nil), e.deny...) }

// resolveDeny computes p.deny from the engine's rules.
func (e *Engine) resolveDeny(p *peer) {
	p.deny = nil
	if len(e.deny) == 0 {
		return
	}
	nT1 := 256
	if p.paths != nil {
		nT1 = p.paths.T1Count()
	}
	d := &peerDeny{grp: make([]bool, e.cfg.Planes*nT1), nT1: nT1}
	for _, r := range e.deny {
		if r.Peer != AnyPeer && r.Peer != p.tidx {
			continue
		}
		if r.Exact {
			if d.evs == nil {
				d.evs = map[wire.EV]bool{}
			}
			d.evs[r.EV] = true
			continue
		}
		for pl := 0; pl < e.cfg.Planes; pl++ {
			if r.Plane != AnyPlane && r.Plane != pl {
				continue
			}
			if r.T1 == AnyT1 {
				d.planes |= 1 << pl
				continue
			}
			if p.paths != nil && p.paths.T0Local() {
				// A T0-local peer's paths never reach a T1.
				continue
			}
			d.grp[pl*nT1+r.T1%nT1] = true
		}
	}
	p.deny = d
}

// evDenied reports whether ev may not carry anything to p.
func (e *Engine) evDenied(p *peer, ev wire.EV) bool {
	d := p.deny
	if d == nil {
		return false
	}
	pl := int(ev.Plane())
	if pl >= e.cfg.Planes || d.planes&(1<<pl) != 0 || d.grp[pl*d.nT1+int(ev.T1())%d.nT1] {
		return true
	}
	return d.evs != nil && d.evs[ev]
}

// planeDenied reports whether every EV of plane is denied toward p.
func (p *peer) planeDenied(plane wire.Plane) bool {
	return p.deny != nil && p.deny.planes&(1<<plane) != 0
}

// freshEV draws a random EV on plane pl toward p that the denylist allows
// (reverse-set candidates, control packets of no QP).
func (e *Engine) freshEV(p *peer, pl wire.Plane) (wire.EV, bool) {
	if p.planeDenied(pl) {
		return 0, false
	}
	nT1 := 256
	if p.paths != nil {
		nT1 = p.paths.T1Count()
	}
	// A few random draws, then every T1 in turn: the draw keeps control
	// traffic spread, the scan finds the one T1 a heavy list leaves.
	for i := 0; i < 4; i++ {
		// Two draws for the T1 with a template, as the engine has always
		// drawn: the same seed replays the same packets as before the
		// denylist existed (golden frames, fabricsim results).
		t1 := e.rng.IntN(256)
		if p.paths != nil {
			t1 = e.rng.IntN(nT1)
		}
		if ev := wire.MakeEV(pl, uint8(t1), e.rng.Uint32()); !e.evDenied(p, ev) {
			return ev, true
		}
	}
	for t1 := 0; t1 < nT1; t1++ {
		if ev := wire.MakeEV(pl, uint8(t1), e.rng.Uint32()); !e.evDenied(p, ev) {
			return ev, true
		}
	}
	return 0, false
}

// applyDenylist brings the QP's EV states in line with the engine's
// denylist: EVs it denies go DENIED (marked byList), EVs it denied before
// and no longer does return to GOOD, unless a per-QP Deny also holds them.
// Reverse-set entries it denies are dropped (probes refill them elsewhere).
func (q *qp) applyDenylist() {
	for i := range q.evs {
		x := &q.evs[i]
		want := q.e.evDenied(q.peer, x.ev)
		switch {
		case want && !x.byList:
			x.byList = true
			q.setState(int32(i), EVDenied)
		case !want && x.byList:
			x.byList = false
			if x.state == EVDenied && !x.byQP {
				q.setState(int32(i), EVGood)
				q.promote(int32(i))
			}
		}
	}
	for k := range q.rev {
		if r := &q.rev[k]; r.valid && q.e.evDenied(q.peer, r.ev) {
			*r = revEntry{}
		}
	}
	q.requeueDeadPlanes()
}

// countPlane counts the frame in e.tx, about to leave on port, per plane.
func (e *Engine) countPlane(port wire.Plane) {
	if e.tx.Opcode.IsData() {
		e.stats.TxDataByPlane[port]++
	} else {
		e.stats.TxCtrlByPlane[port]++
	}
}

// Denies reports whether r denies ev toward the template peer peer, whose
// paths are T0-local or not, with nT1 T1s per plane: the rule the engine
// applies (resolveDeny), for callers that check a list against the fabric.
func (r DenyRule) Denies(peer int, t0Local bool, nT1 int, ev wire.EV) bool {
	if r.Exact {
		return ev == r.EV
	}
	if r.Peer != AnyPeer && r.Peer != peer {
		return false
	}
	if r.Plane != AnyPlane && r.Plane != int(ev.Plane()) {
		return false
	}
	if r.T1 == AnyT1 {
		return true
	}
	return !t0Local && r.T1%nT1 == int(ev.T1())%nT1
}
