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
	if q.cfg.Transport.inOrder() {
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
// EV of the transmission being repeated) unless it is the only one. A GOOD
// EV carries the packet. A SKIP EV carries a share of what a GOOD EV carries,
// its weight w (deficit round robin: each visit adds w to its credit, a
// credit of 1 buys a packet); marks cut w, clean acknowledgements raise it
// back to 1 and the EV to GOOD (skipEV, unskip). When no EV has credit within
// two passes, the SKIP EV with the most credit carries the packet rather
// than stalling the QP.
func (q *qp) pickEV(avoid int32) int32 {
	n := len(q.order)
	fallback := int32(-1)
	best := int32(-1)
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
			x.credit += x.w
			if x.credit >= 1 && idx != avoid {
				x.credit--
				return idx
			}
			if best < 0 || x.credit > q.evs[best].credit {
				best = idx
			}
		}
	}
	if fallback < 0 && best >= 0 {
		x := &q.evs[best]
		x.credit = max(x.credit-1, 0)
		return best
	}
	return fallback
}

// skipEV handles a congestion mark on an EV (an ECN echo, a TRIMMED NACK):
// it goes SKIP with weight skipCut; a further mark multiplies the weight by
// skipCut again (down to minSkipW), at most once per 5/4 srtt; unskip
// multiplies it by skipRec per clean acknowledgement, and at 1 the EV is
// GOOD again. skipCut and skipRec are skipDecrease and skipRecover scaled to
// the set size (skipRefEVs).
//
// Why weights and not "skip one pass" (SKIP_ONCE read literally): with a
// small EV set a pass is far shorter than the RTT the next echo needs, so
// each mark moved one packet. In the fabric simulator's ECN balance scenario
// (seven of eight EVs on one path) that kept 77 % of the packets on the
// congested path and each flow at 32 % of the capacity; skips held for a
// fixed time made the two paths' queues take turns (one full, one empty).
// Why once per RTT: while a queue is above the ECN threshold every packet in
// flight through it is marked, so per-mark cuts drove the weights of the
// marked path to the floor within one RTT and the load swung whole from one
// path to the other (antiphase queues, 34–41 % per flow); one cut per RTT
// answers one RTT of marks with one step (46–50 % per flow). 5/4 srtt is the
// middle of the range that met the scenario (1 to 1.5 srtt).
func (q *qp) skipEV(idx int32) {
	x := &q.evs[idx]
	now := q.e.now
	if x.state == EVGood {
		q.setState(idx, EVSkip)
		x.lastCut = now
	} else if now-x.lastCut >= q.srtt*5/4 {
		x.w = max(x.w*q.skipCut, minSkipW)
		x.lastCut = now
	}
}

// unskip handles an unmarked acknowledgement of a packet sent on the EV.
func (q *qp) unskip(idx int32) {
	x := &q.evs[idx]
	if x.w >= 1 {
		return
	}
	x.w *= q.skipRec
	if x.w >= 1 {
		x.w = 1
		if x.state == EVSkip {
			q.setState(idx, EVGood)
		}
	}
}

// SKIP weights (skipEV, unskip).
const (
	skipDecrease = 0.5        // weight factor per mark
	skipRecover  = 1 + 1.0/16 // weight factor per clean acknowledgement
	minSkipW     = 1.0 / 64   // least weight: a SKIP EV keeps being tested
)

// skipRefEVs is the set size up to which a mark and a clean
// acknowledgement move an EV's weight by skipDecrease and skipRecover. In a
// larger set of n EVs each EV sees only 1/n of the QP's marks and
// acknowledgements and the factors are raised to the power skipRefEVs/n
// (qp.skipCut, qp.skipRec): the load of a path then moves by about as much
// per RTT of marks as in a small set, by many small cuts averaged over the
// path's EVs instead of a halving of each. Why: with 128 EVs and whole
// halvings, the fabric simulator's incast victim (one flow, ~100 packets
// per RTT over four T1→T0 links shared with the incast) cut nearly every
// EV of whichever T1 was marked, recovered each one only from its own rare
// clean acknowledgements (~1 per EV per 5 RTT), and its weights drifted
// apart: its split between the two T1s of a plane was 12 % off over 10 µs
// windows (7–8 % without ECN skips) and it kept 88–90 % of its rate; scaled
// (with the last-hop cap, cc.go) 96.7–97.7 %. Reference 8 gave 96.2–96.8 %,
// 16 95.4–96.9 %; 4 also helped the 8-EV ECN balance scenario (weaker flow
// 45.9 % of the capacity on average over six seeds, 45.1 % unscaled).
const skipRefEVs = 4

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
	switch s {
	case EVGood:
		x.w = 1
	case EVSkip:
		x.w, x.credit = q.skipCut, 0
	}
	x.c.Transitions[old][s]++
	q.stats.EVTransitions[old][s]++
	if old == EVAssumedBad {
		q.nBad--
	}

	if s == EVAssumedBad {
		q.nBad++
		q.stats.InFlightAtBad += uint64(q.unackedOn(idx))
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

// replace refills every rotation slot held by an EV that left service
// (ASSUMED_BAD, DENIED), from its own plane, in this order:
//   - a GOOD reserve EV: preferably of the same group (plane and T1), which
//     keeps the set's load spread evenly over the T1s, unless that group is
//     suspect (an EV of it failed on a packet sent after the group's latest
//     acknowledged one: a dead link or switch, where a reserve through it
//     would only lose more packets); then a reserve of a group that is not
//     suspect, marked borrowed so that it gives the slot back when an EV of
//     the original group recovers;
//   - else, when x's group is suspect (a lasting failure: a dead link or
//     switch), a GOOD active EV of the plane (a clean group, the one holding
//     the fewest slots) reused: it then holds two slots and carries their
//     share;
//   - else the slot keeps the unusable EV and the rotation skips it (the
//     plane has no working path, or the loss was a random one: the EV is
//     probed back within a probe interval).
//
// Why reuse: with the slot left dead, a plane whose reserve ran out carried
// fewer EVs than the others and so a smaller share of the packets (a dead
// T1 of two per plane left 20 of 32 slots usable and the plane 17 % of the
// packets instead of 25 %): unequal loads across planes, the false incast
// the brief warns about. Why only for suspect groups: under random loss
// (5 % per link) every EV keeps failing and coming back after one probe
// interval, on every plane alike; reusing there piled the load onto fewer
// EVs, whose failures then emptied more slots, and cut the fabric
// simulator's goodput from 61.0 % to 57.2 % of loss-free. (Always preferring
// another T1 for the reserve was
// tried: under random loss it piled the set onto fewer T1s and cut goodput
// at 5 % loss from 61 % to 39 %.)
func (q *qp) replace(idx int32) {
	x := &q.evs[idx]
	for s := range q.order {
		if x.slots == 0 {
			return
		}
		if q.order[s] != idx {
			continue
		}
		if pick := q.reservePick(x); pick >= 0 {
			y := &q.evs[pick]
			borrowed := y.grp != x.grp || x.borrowed
			q.install(int32(s), pick)
			y.borrowed = borrowed
		} else if q.grps[x.grp].fails > 0 {
			if pick := q.reusePick(x.plane); pick >= 0 {
				q.install(int32(s), pick)
			}
		}
	}
}

// reservePick is the reserve EV to take over a slot of x (replace), or -1.
func (q *qp) reservePick(x *evEntry) int32 {
	suspect := q.grps[x.grp].fails > 0
	pick := int32(-1)
	for j := range q.evs {
		y := &q.evs[j]
		if y.active || y.plane != x.plane || y.state != EVGood || q.grps[y.grp].fails > 0 {
			continue
		}
		if y.grp == x.grp && !suspect {
			return int32(j)
		}
		if pick < 0 && y.grp != x.grp {
			pick = int32(j)
		}
	}
	return pick
}

// reusePick is the GOOD active EV of plane, in a group that is not suspect,
// holding the fewest slots (replace), or -1.
func (q *qp) reusePick(plane wire.Plane) int32 {
	pick := int32(-1)
	for j := range q.evs {
		y := &q.evs[j]
		if !y.active || y.plane != plane || y.state != EVGood || q.grps[y.grp].fails > 0 {
			continue
		}
		if pick < 0 || y.slots < q.evs[pick].slots {
			pick = int32(j)
		}
	}
	return pick
}

// install puts EV idx into rotation slot s, taking the slot from the EV
// that held it (which goes to the reserve when that was its last slot).
func (q *qp) install(s, idx int32) {
	old := q.order[s]
	q.order[s] = idx
	if o := &q.evs[old]; o != &q.evs[idx] {
		o.slots--
		if o.slots == 0 {
			o.active, o.pos, o.borrowed = false, -1, false
		} else if o.pos == s {
			for k, v := range q.order {
				if v == old {
					o.pos = int32(k)
					break
				}
			}
		}
	}
	y := &q.evs[idx]
	y.slots++
	if !y.active {
		y.active, y.pos = true, s
	}
}

// promote puts a recovered reserve EV back into a slot of its plane that
// holds an unusable EV, else into one that reuses an EV holding several
// slots, else into one lent to another group's EV (which returns to the
// reserve): the set goes back to its original spread over the T1s.
// A SKIP EV is promoted too: a probe answered with M=SKIP_ONCE brings an
// EV back as SKIP (its path works but is congested), and only an active
// EV sends, so only an active one can be acknowledged clean and return to
// GOOD (unskip). Promoting GOOD EVs alone left every EV of a path that
// came back congested a SKIP reserve for good: in mrc-lab S5 and S10 one
// T0–T1 path of 16 stayed unused for seconds after its T1 was repaired
// (TestPathOutageNotHeldAfterRepair).
func (q *qp) promote(idx int32) {
	y := &q.evs[idx]
	if y.active || y.state != EVGood && y.state != EVSkip {
		return
	}
	lent, reused, borrowed := int32(-1), int32(-1), int32(-1)
	for s, o := range q.order {
		x := &q.evs[o]
		if x.plane != y.plane {
			continue
		}
		if x.state == EVAssumedBad || x.state == EVDenied {
			lent = int32(s)
			break
		}
		if x.slots > 1 && (reused < 0 || x.slots > q.evs[q.order[reused]].slots) {
			reused = int32(s)
		}
		if borrowed < 0 && x.borrowed && x.grp != y.grp {
			borrowed = int32(s)
		}
	}
	if lent < 0 {
		lent = reused
	}
	if lent < 0 {
		lent = borrowed
	}
	if lent < 0 {
		return
	}
	q.install(lent, idx)
	y.borrowed = false
}

func (q *qp) setEVAdmin(ev wire.EV, deny bool) {
	idx, ok := q.evIdx[ev]
	if !ok {
		return
	}
	x := &q.evs[idx]
	x.byQP = deny
	if deny {
		q.setState(idx, EVDenied)
	} else if x.state == EVDenied && !x.byList {
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
//
// pathFailedAt is the same for a packet sent at sent: when nothing sent
// through the EV's group at or after it has been acknowledged, the group
// counts the failure, and at groupFails such failures (distinct EVs) every
// other EV of the group, active or reserve, is ASSUMED_BAD too: a dead T0–T1
// link or a hung T1 is then left after the second EV instead of after each
// EV has lost its own packets, and no reserve through it is swapped in.
// Under random loss a later packet through the group is nearly always
// acknowledged before a loss is declared, so this does not fire there.
func (q *qp) pathFailedAt(idx int32, sent Time) {
	if idx < 0 || q.cfg.Transport.inOrder() {
		return
	}
	x := &q.evs[idx]
	if !q.planeOK(x.plane) || x.state == EVDenied {
		return
	}
	if q.lastCongested(idx) {
		return
	}
	g := &q.grps[x.grp]
	if sent > g.lastAckSent && x.state != EVAssumedBad {
		g.fails++
		if g.fails >= groupFails && !g.dead {
			g.dead, g.deadAt, g.probeAt, g.probeMiss, g.lost = true, q.e.now, 0, 0, 0 // probed as one path from now (probeBad)
		}
	}
	q.setState(idx, EVAssumedBad)
	hold := q.pathKnownFlapping(x.grp)
	if g.fails >= groupFails || hold {
		for j := range q.evs {
			if y := &q.evs[j]; y.grp == x.grp && (y.state == EVGood || y.state == EVSkip) {
				q.setState(int32(j), EVAssumedBad)
			}
		}
	}
	if hold {
		q.holdPath(x.grp, q.flapUntil(g))
	}
}

func (q *qp) pathFailed(idx int32) {
	if idx < 0 || q.cfg.Transport.inOrder() {
		return
	}
	x := &q.evs[idx]
	if !q.planeOK(x.plane) || x.state == EVDenied || q.lastCongested(idx) {
		return
	}
	q.setState(idx, EVAssumedBad)
}

// lastCongested handles a loss (or an ALWAYS_SKIP echo) on an EV that is
// SKIP, i.e. known to deliver but congested, and is the QP's last usable
// EV: the loss is taken as congestion (its weight is cut, it stays SKIP)
// and not as a failed path. It reports whether it did so.
//
// Why: a QP pinned to one congested path (mrc-lab S6: flow 2 on EV-A
// alone, behind a queue full of another flow's packets) lost packets to
// the queue, took its one EV to ASSUMED_BAD and could send nothing until a
// probe got through the same queue: no_ev_stalls and timeouts climbed to
// RETRY_EXCEEDED. SKIP must never starve a QP; a path that is truly dead
// still ends the QP through RetryTimeout, as nothing is acknowledged.
func (q *qp) lastCongested(idx int32) bool {
	x := &q.evs[idx]
	if x.state != EVSkip {
		return false
	}
	for _, j := range q.order {
		if y := &q.evs[j]; j != idx && (y.state == EVGood || y.state == EVSkip) && q.planeOK(y.plane) {
			return false
		}
	}
	x.w = max(x.w*q.skipCut, minSkipW)
	x.lastCut = q.e.now
	q.stats.LastEVKept++
	return true
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
		if !r.valid || !q.planeOK(r.ev.Plane()) || q.e.evDenied(q.peer, r.ev) {
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

// unackedOn counts the sent, unacknowledged packets whose latest
// transmission went on EV idx. O(window); it runs only when an EV turns
// ASSUMED_BAD.
func (q *qp) unackedOn(idx int32) int {
	n := 0
	for psn := q.sndUna; psn != q.sndNxt; psn = psn.Add(1) { // PSN arithmetic: the window may cross the 24-bit wrap
		pk := q.slot(psn)
		if pk.ev == idx && pk.flags&pktSent != 0 && pk.flags&pktAcked == 0 {
			n++
		}
	}
	return n
}
