package mrc

import "github.com/softmrc/softmrc/internal/wire"

// shuffle re-draws the rotation order (Fisher-Yates with the engine's rng).
func (q *qp) shuffle() {
	o := q.order
	for i := len(o) - 1; i > 0; i-- {
		j := q.e.rng.IntN(i + 1)
		o[i], o[j] = o[j], o[i]
	}
	for i, idx := range o {
		q.evs[idx].pos = int32(i)
	}
	q.cur = 0
}

func (q *qp) planeOK(pl wire.Plane) bool { return q.e.planeUsable(q.peer, pl) }

func (q *qp) usable(idx int32) bool {
	x := &q.evs[idx]
	return x.state == EVGood && q.planeOK(x.plane)
}

// anyUsableEV reports whether a data packet could be sent now (a SKIP EV
// counts: the rotation restores it).
func (q *qp) anyUsableEV() bool {
	if q.cfg.Transport == GoBackN {
		return q.gbnPick() != -1
	}
	for _, idx := range q.order {
		x := &q.evs[idx]
		if (x.state == EVGood || x.state == EVSkip) && q.planeOK(x.plane) {
			return true
		}
	}
	return false
}

// pickEV advances the rotation to the next usable EV, avoiding avoid (the
// EV of the transmission being repeated) unless it is the only one. A SKIP
// EV met on the way goes back to GOOD but is not used for this packet, and at
// most one is restored per packet (MRC-PUBLIC-FACTS §1.16).
func (q *qp) pickEV(avoid int32) int32 {
	n := len(q.order)
	restored := false
	fallback := int32(-1)
	for i := 0; i < 2*n; i++ {
		if q.cur >= n {
			q.shuffle()
		}
		idx := q.order[q.cur]
		q.cur++
		x := &q.evs[idx]
		if !q.planeOK(x.plane) || !q.e.portRoom(x.plane) {
			continue
		}
		switch x.state {
		case EVGood:
			if idx == avoid {
				fallback = idx
				continue
			}
			return idx
		case EVSkip:
			if !restored {
				q.setState(idx, EVGood)
				restored = true
			}
		}
	}
	return fallback
}

// gbnPick is the go-back-N path: the primary plane's single EV, or the first
// usable plane's if the primary cannot be used (a bonded RoCE port fails
// over the same way). EV states play no part.
func (q *qp) gbnPick() int32 {
	if idx := q.gbnEV[q.gbnPrimary]; idx >= 0 && q.evs[idx].state != EVDenied && q.planeOK(q.gbnPrimary) {
		if !q.e.portRoom(q.gbnPrimary) {
			return -2
		}
		return idx
	}
	for pl, idx := range q.gbnEV {
		if idx >= 0 && q.evs[idx].state != EVDenied && q.planeOK(wire.Plane(pl)) {
			if !q.e.portRoom(wire.Plane(pl)) {
				return -2
			}
			return idx
		}
	}
	return -1
}

// setState changes an EV's state, counting the transition, and keeps the
// active set whole: an EV that leaves service is replaced from the reserve
// of its own plane.
func (q *qp) setState(idx int32, s EVState) {
	x := &q.evs[idx]
	old := x.state
	if old == s {
		return
	}
	x.state = s
	x.c.Transitions[old][s]++
	q.stats.EVTransitions[old][s]++
	if old == EVAssumedBad {
		q.nBad--
	}
	if s == EVAssumedBad {
		q.nBad++
		x.probeOK = 0
		x.nextProbe = q.e.now + q.probeInterval()
		if x.nextProbe < q.nextProbeScan || q.nBad == 1 {
			q.nextProbeScan = x.nextProbe
		}
	}
	if (s == EVAssumedBad || s == EVDenied) && x.active && q.cfg.Transport == MRC {
		q.replace(idx)
	}
}

// replace swaps an active EV for a GOOD reserve EV of the same plane. With
// no reserve left the slot keeps the unusable EV (the rotation skips it), so
// the plane carries fewer paths rather than borrowing another plane's.
// (Preferring a reserve EV through another T1 was tried: it made a dead link
// cost two fewer packets but, under random loss, piled the set onto fewer
// T1s and cut goodput at 5 % loss from 61 % to 39 % of loss-free.)
func (q *qp) replace(idx int32) {
	x := &q.evs[idx]
	for j := range q.evs {
		y := &q.evs[j]
		if !y.active && y.plane == x.plane && y.state == EVGood {
			y.active, y.pos = true, x.pos
			q.order[x.pos] = int32(j)
			x.active, x.pos = false, -1
			return
		}
	}
}

// promote puts a recovered reserve EV back into a slot of its plane that
// holds an unusable EV.
func (q *qp) promote(idx int32) {
	y := &q.evs[idx]
	if y.active || y.state != EVGood {
		return
	}
	for _, o := range q.order {
		x := &q.evs[o]
		if x.plane == y.plane && (x.state == EVAssumedBad || x.state == EVDenied) {
			y.active, y.pos = true, x.pos
			q.order[x.pos] = idx
			x.active, x.pos = false, -1
			return
		}
	}
}

func (q *qp) setEVAdmin(ev wire.EV, deny bool) {
	idx, ok := q.evIdx[ev]
	if !ok {
		return
	}
	if deny {
		q.setState(idx, EVDenied)
	} else if q.evs[idx].state == EVDenied {
		q.setState(idx, EVGood)
		q.promote(idx)
	}
}

func (q *qp) setPlaneAdmin(pl wire.Plane, deny bool) {
	for i := range q.evs {
		if q.evs[i].plane == pl {
			q.setEVAdmin(q.evs[i].ev, deny)
		}
	}
}

// evFromWire finds an EV of the set (-1 if the peer reflected something else).
func (q *qp) evFromWire(ev wire.EV) int32 {
	if idx, ok := q.evIdx[ev]; ok {
		return idx
	}
	return -1
}

// pathFailed handles evidence that an EV's path lost a packet without a trim
// (a SACK hole or a timeout): ASSUMED_BAD at once. Losses on a plane that is
// down (locally or at the peer) say nothing about the path and are ignored.
func (q *qp) pathFailed(idx int32) {
	if idx < 0 || q.cfg.Transport == GoBackN {
		return
	}
	x := &q.evs[idx]
	if !q.planeOK(x.plane) || x.state == EVDenied {
		return
	}
	q.setState(idx, EVAssumedBad)
}

func (q *qp) probeInterval() Time {
	if q.cfg.ProbeInterval > 0 {
		return q.cfg.ProbeInterval
	}
	return max(q.srtt, minProbeInterval)
}

// ctrlEV picks the EV for a SACK/NACK: a GOOD active EV when this QP sends
// data (its health is known), otherwise the reverse set, validated entries
// first.
func (q *qp) ctrlEV() (wire.EV, bool) {
	if q.cfg.Transport == MRC && q.sndUna != q.sndNxt {
		n := len(q.order)
		for i := 0; i < n; i++ {
			q.ctrlCur = (q.ctrlCur + 1) % n
			if idx := q.order[q.ctrlCur]; q.usable(idx) {
				return q.evs[idx].ev, true
			}
		}
	}
	fb := wire.EV(0)
	found := false
	n := len(q.rev)
	for i := 0; i < n; i++ {
		q.revCur = (q.revCur + 1) % n
		r := &q.rev[q.revCur]
		if !r.valid || !q.planeOK(r.ev.Plane()) {
			continue
		}
		if r.ok {
			return r.ev, true
		}
		if !found {
			fb, found = r.ev, true
		}
	}
	if !found {
		// Every reverse EV is on a dead plane: any up plane will do.
		return q.e.randomEV(q.peer, q.e.localUp&q.peer.remoteUp)
	}
	return fb, true
}

// requeueDeadPlanes is called when the peer's port mask changes: packets in
// flight on a plane now down are resent at once elsewhere, without blaming
// their EVs (the port-status update explains the loss).
func (q *qp) requeueDeadPlanes() {
	for psn := q.sndUna; psn.Before(q.sndNxt); psn = psn.Add(1) {
		pk := &q.pkts[uint32(psn)&q.wmask]
		if pk.flags&pktInFlight != 0 && pk.ev >= 0 && !q.planeOK(q.evs[pk.ev].plane) {
			q.markLost(psn, pk)
		}
	}
}
