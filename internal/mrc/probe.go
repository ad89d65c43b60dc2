package mrc

import "github.com/softmrc/softmrc/internal/wire"

// Probes (PETH) test one EV: the peer answers with a SACK pr=1 that reflects
// the probe's EV and carries the probe id in ack_psn_offset. They serve two
// purposes: bringing ASSUMED_BAD EVs back (ProbeSuccesses consecutive
// answers), and validating the reverse EV set of a receive-only QP.

// probeTimeout is how long a probe's answer may take: three RTTs, and
// before any RTT sample the timeout data packets have then (initialRTO,
// backed off by unanswered probes as by unanswered packets).
// Why the second: with srtt 0 the 50 µs floor declared every probe of a
// longer path lost long before its answer could come, and the EV was
// probed again at once: thousands of probes an RTT (mrc-lab S7: 11 557 in
// 100 ms from one QP, filling 40 Mbit/s links; TestProbesBeforeRTTSample).
//
// And why the backoff: when every EV is ASSUMED_BAD, answers to probes are
// the only RTT samples left. A peer that became slow (a host starved of
// CPU: its answers 2 ms late after an srtt of 6 µs) then answered every
// probe after its 3·srtt timeout, the late answers matched no probe and
// measured nothing, srtt never grew, and the QP failed NO_PATH on paths
// that delivered everything (TestProbeTimeoutBacksOffWithoutEVs; a failure
// with these signs once in nic/e2e TestTestbedCollectives beside a parallel
// build: 1 225 probes in 2 s, none answered in time, docs/engine.md). As
// TCP backs its RTO off until a valid sample (RFC 6298 5.5), the probe
// timeout doubles per unanswered round while no EV is usable, up to
// MaxRTO (64 ms by default, not MaxAckTimeout: a probe lost in a dead link
// keeps its EV from the next probe until it times out, so the cap is also
// how late a path that comes back after a total outage can be seen).
func (q *qp) probeTimeout() Time {
	if q.srtt == 0 {
		return max(q.initialRTO(), 50*Microsecond)
	}
	to := max(3*q.srtt, 50*Microsecond)
	for i := uint8(0); i < q.probeBackoff && to < q.cfg.MaxRTO; i++ {
		to *= 2
	}
	return min(to, max(q.cfg.MaxRTO, 3*q.srtt))
}

// backOffProbes doubles the probe timeout after a probe sent at sentAt went
// unanswered while the QP has no usable EV; once per round, as
// backOffInitial: probes sent before the previous doubling had the shorter
// timeout.
func (q *qp) backOffProbes(sentAt Time) {
	if q.srtt == 0 || sentAt < q.probeBackoffAt || q.anyUsableEV() || q.probeTimeout() >= q.cfg.MaxRTO {
		return
	}
	q.probeBackoff++
	q.probeBackoffAt = q.e.now
}

// allocProbe takes the lowest free probe record; freeProbe gives it back.
// Records in use all lie below q.probeHi, so the scans for deadlines and
// answers (activeProbes) read a few records, not all maxProbes: a
// receiver keeps a reverse probe out most of the time and computed its
// deadline over all 64 records every turn of mrc-nicd's loop.
func (q *qp) allocProbe() *probeRec {
	if q.nProbes >= maxProbes {
		return nil
	}
	for i := range q.probes {
		if !q.probes[i].used {
			q.nProbes++
			q.probeHi = max(q.probeHi, i+1)
			return &q.probes[i]
		}
	}
	return nil
}

// freeProbe clears pr and gives its record back.
func (q *qp) freeProbe(pr *probeRec) {
	*pr = probeRec{}
	q.nProbes--
	if q.nProbes == 0 {
		q.probeHi = 0
	}
}

// activeProbes is the part of q.probes that holds every record in use.
func (q *qp) activeProbes() []probeRec { return q.probes[:q.probeHi] }

func (q *qp) sendProbe(ev wire.EV, pr *probeRec, emit func(wire.Plane, []byte)) bool {
	e := q.e
	e.resetTx()
	pl, ok := e.fillNet(q.peer, ev)
	if !ok {
		e.stats.TxNoRoute++
		return false
	}
	q.probeSeq++
	now := e.now
	pr.used, pr.id, pr.sentAt, pr.deadline = true, q.probeSeq, now, now+q.probeTimeout()
	t := &e.tx
	t.DSCP, t.ECN = wire.DSCPTrimmable, wire.ECNECT0
	t.Opcode, t.DestQP, t.PSN = wire.OpProbe, q.remote.QPN, 0
	t.Probe = wire.ProbeFields{ProbeID: pr.id, SPDCID: uint16(q.qpn), DPDCID: uint16(q.remote.QPN),
		Timestamp: ts16(now), FType: wire.FTypeTimestamp}
	q.stats.TxProbe++
	e.emitFrame(pl, emit)
	return true
}

// probeBad probes every ASSUMED_BAD EV that is due, except that a condemned
// group (a dead T0–T1 link or T1: pathFailedAt) is probed as one path: one
// probe for the whole group per groupProbeGap, on whichever of its EVs is
// due first, until one of its probes is answered. Its EVs share their first
// hops, so one answer says as much as all of theirs: after it (probeAnswered)
// the rest of the group is probed back within a probe interval.
//
// Why: probing each ASSUMED_BAD EV once per probe interval put one probe
// per EV per probe timeout into a dead link for as long as it stayed dead.
// On the clos-2p testbed (36 EVs per plane and T1, srtt 1–5 ms on a loaded
// machine) a blackholed T0–T1 link ate 6–7 thousand probes per second in
// each direction for the whole fault (54,794 fault drops in 4 s, ~1/4 of
// the packets sent, though no data went into it after detection);
// docs/engine.md has the numbers after.
func (q *qp) probeBad(now Time, emit func(wire.Plane, []byte)) {
	next := Never
	iv := q.probeInterval()
	if q.nPathHeld > 0 {
		next = q.releasePaths(now)
	}
	for i := range q.evs {
		x := &q.evs[i]
		if x.state != EVAssumedBad {
			continue
		}
		if x.nextProbe <= now {
			x.nextProbe = now + iv
			g := &q.grps[x.grp]
			condemned := g.dead || g.held
			if !x.probeOut && q.planeOK(x.plane) && (!condemned || g.probeAt <= now && (g.held || q.groupProbeRoom(g, now, iv))) {
				if pr := q.allocProbe(); pr != nil {
					pr.ev = int32(i)
					if q.sendProbe(x.ev, pr, emit) {
						x.probeOut = true
						x.c.Probes++
						if condemned {
							g.probeSentAt, g.probeData = now, q.planeSent[g.plane]
							g.probeAt = now + q.groupProbeGap(g, iv)
							if g.held {
								// Sparse probes can wait longer for their answer:
								// one late answer must not restart the hold.
								gap := q.heldProbeGap(iv)
								g.probeAt = now + gap
								pr.deadline = max(pr.deadline, now+gap/2)
							}
							g.probeMiss++ // until answered
						}
					} else {
						q.freeProbe(pr)
					}
				}
			}
		}
		next = min(next, x.nextProbe)
	}
	q.nextProbeScan = next
}

// probeAnswered handles a SACK pr=1 and returns the RTT it measured.
func (q *qp) probeAnswered(id uint16, ev wire.EV, m wire.MultipathVerdict) Time {
	for i := range q.activeProbes() {
		pr := &q.probes[i]
		if !pr.used || pr.id != id {
			continue
		}
		rtt := q.e.now - pr.sentAt
		if pr.ev >= 0 {
			x := &q.evs[pr.ev]
			if x.ev == ev {
				x.probeOut = false
				x.c.ProbesOK++
				// The group's path works: its other ASSUMED_BAD EVs are
				// probed each on its own again. Its failure count stays
				// (replace still treats it as suspect until data through it
				// is acknowledged): clearing it here too cut the fabric
				// simulator's goodput under 5 % random loss from 62.7 % to
				// 58.3 % of loss-free.
				g := &q.grps[x.grp]
				q.pathAnswered(x.grp, pr)
				g.dead, g.probeMiss, g.lost = false, 0, 0
				if g.held {
					x.probeOK = 0 // held as flapping: it stays out (pathDamp)
				} else if x.state == EVAssumedBad {
					x.probeOK++
					if x.probeOK >= q.cfg.ProbeSuccesses {
						// M=SKIP_ONCE on the answer: the path works but is
						// congested, so it comes back as SKIP.
						if m == wire.MSkipOnce {
							q.setState(pr.ev, EVSkip)
						} else {
							q.setState(pr.ev, EVGood)
						}
						q.promote(pr.ev)
					}
				}
			}
		} else if r := &q.rev[pr.rev]; pr.revEV == ev {
			q.stats.RevProbOK++
			*r = revEntry{ev: ev, ok: true, valid: true, at: q.e.now}
			q.revProbeOK = q.e.now
		}
		q.freeProbe(pr)
		q.probeBackoff = 0
		if rtt > 0 {
			q.updateRTT(rtt)
		}
		return rtt
	}
	return 0
}

func (q *qp) probeFailed(pr *probeRec) {
	q.backOffInitial(pr.sentAt)
	q.backOffProbes(pr.sentAt)
	if pr.ev >= 0 {
		x := &q.evs[pr.ev]
		x.probeOut = false
		x.probeOK = 0
		q.pathProbeLost(x.grp, pr)
	} else if r := &q.rev[pr.rev]; r.valid && r.ev == pr.revEV {
		// An unanswered reverse EV leaves the set; the slot is refilled
		// by a fresh candidate on the next probe.
		r.ok, r.valid = false, false
	}
	q.freeProbe(pr)
}

// groupProbeGap is the time from one probe of a condemned group to the
// next: a probe interval, doubled per probe of the group sent since its
// last answer or condemnation (outstanding ones count: the gap grows from
// the start, not a probe timeout late), up to maxGroupProbeGap intervals.
// Why a cap this low: the first answer after the link comes back is at most
// that many intervals late, and the whole group is GOOD about one interval
// later.
func (q *qp) groupProbeGap(g *evGroup, iv Time) Time {
	gap := iv
	for i := 0; i < g.probeMiss && gap < maxGroupProbeGap*iv; i++ {
		gap *= 2
	}
	return min(gap, maxGroupProbeGap*iv)
}

// groupProbeRoom reports whether a condemned group's next probe may go
// now, as far as the QP's own data is concerned. Once the group has missed
// condemnedGateMisses probes (a lasting failure, not a flap or a spurious
// condemnation) and other paths of its plane still deliver (a clean group
// of it has had a packet sent after this one was condemned acknowledged),
// the probe waits for condemnedProbeData data packets of this QP on the
// plane since the last one, or maxCondemnedWait probe intervals.
// Otherwise, and whenever the QP has nothing in flight and nothing queued,
// the interval gap alone spaces it, as before. (Nothing in flight alone is
// not idle: a QP whose ports pace it below its RTT has each packet
// acknowledged before the next leaves.) A held group
// (flap damping) keeps its own sparse gap (heldProbeGap) and is not asked.
//
// Why: groupProbeGap counts probe intervals (srtt), so the probes' rate
// follows the RTT and not the link. On a testbed with 10 Mbit/s NIC–T0
// links and an RTT of ~80 µs, one hung T1 of three on a plane had the
// group probed 1 583 times a second, a fifth of the plane's uplink; the
// plane, which kept its share of the rotation slots, carried 0.83 of the
// other planes' data and the flow 0.93 of its rate (mrc-lab S13, docs/engine.md). Tied
// to the data, the probes take at most about one packet in
// condemnedProbeData of what the QP sends on the plane (a probe is a
// tenth of a data frame), whatever the link's rate, and where the data
// runs fast against the RTT (a fabric at line rate) the interval gap still
// binds. Why not from the first probe: in mrc-lab S3 the flapping NIC
// links of two planes also carry the SACKs of the healthy planes, whose
// groups then fail on lost acknowledgements and come back on their first
// answered probes; gated by data from the start, a healthy plane stayed
// out for seconds and S3 failed 5 runs of 8 (0.35–0.51 of the full rate
// against 0.5 ± 0.05).
func (q *qp) groupProbeRoom(g *evGroup, now, iv Time) bool {
	idle := q.sndUna == q.sndNxt && q.segMsg >= q.msgTail // no data to compete with
	if idle || g.probeMiss < condemnedGateMisses || q.planeSent[g.plane]-g.probeData >= condemnedProbeData ||
		now-g.probeSentAt >= maxCondemnedWait*iv {
		return true
	}
	for i := range q.grps {
		if o := &q.grps[i]; o != g && o.plane == g.plane && !o.dead && !o.held && o.lastAckSent > g.deadAt {
			return false // the plane's other paths deliver: wait for more of its data
		}
	}
	return true
}

// revFresh is how long a reverse-EV validation counts as recent.
func (q *qp) revFresh() Time {
	return max(revFreshRTTs*q.srtt, minRevFresh)
}

// revStale forgets the evidence from data SACKs (a SACK of ours was
// lost): a receiving QP goes back to probing once per RTT.
func (q *qp) revStale() { q.revLearnAt = 0 }

// learnReverse records that a SACK reflected ev, an EV this QP sent data on:
// the path to the peer through ev works, which is what a reverse probe
// would have shown. ev takes its plane's reverse slot holding ev, else an
// empty or unvalidated one, else the one validated longest ago.
func (q *qp) learnReverse(ev wire.EV) {
	pl := int(ev.Plane())
	if pl >= wire.MaxPlanes {
		return
	}
	now := q.e.now
	k := pl * revPerPlane
	best := -1
	for j := k; j < k+revPerPlane && best < 0; j++ {
		if r := &q.rev[j]; r.valid && r.ev == ev {
			best = j
		}
	}
	for j := k; j < k+revPerPlane && best < 0; j++ {
		if r := &q.rev[j]; !r.valid || !r.ok {
			best = j
		}
	}
	if best < 0 {
		best = k
		for j := k + 1; j < k+revPerPlane; j++ {
			if q.rev[j].at < q.rev[best].at {
				best = j
			}
		}
	}
	q.rev[best] = revEntry{ev: ev, ok: true, valid: true, at: now}
	q.revLearnAt = now
}

// revProbeAt is when this QP next probes a reverse EV (Never: not at all).
// Evidence first: a SACK of the QP's own data validates the EV it reflects
// (learnReverse), and while such a validation is younger than revFresh the
// QP does not probe. A QP that has been receiving for at least an RTT with
// no such evidence probes once per probe interval (the brief's "about once
// per RTT": each answered probe validates one EV), but only after
// revProbePkts data packets received or revFresh since its last probe,
// whichever comes first; a lone arrival after a
// quiet spell does not (its SACK goes on the validated EVs, and a lost SACK
// costs nothing). A completely idle QP (nothing posted or unacknowledged,
// nothing received for revFresh) probes once per KeepAlive.
func (q *qp) revProbeAt() Time {
	if q.cfg.Transport != MRC || q.state != QPReady {
		return Never
	}
	r := &q.rx
	fresh := q.revFresh()
	last := q.revLearnAt
	if r.everRx && q.e.now-r.lastRx < fresh {
		iv := q.probeInterval()
		if r.lastRx-r.rxSince >= iv {
			due := max(last+fresh, q.nextRevProbe)
			if r.sinceRevProbe < revProbePkts {
				// Fewer data packets than revProbePkts since the last
				// probe: wait for them, but not longer than revFresh, so
				// that a reverse path that died is still found while the
				// data slows down because its SACKs are lost.
				due = max(due, r.lastRevProbe+fresh)
			}
			if due < r.lastRx+fresh {
				return due
			}
		}
		if q.msgHead != q.msgTail {
			return Never
		}
		// Still receiving until lastRx+fresh: idle after that.
		return max(r.lastRx+fresh, q.keepAliveAt(last))
	}
	if q.msgHead != q.msgTail {
		return Never
	}
	return q.keepAliveAt(last)
}

// keepAliveAt is the next keepalive probe of an idle QP.
func (q *qp) keepAliveAt(last Time) Time {
	if q.cfg.KeepAlive < 0 {
		return Never
	}
	base := max(last, q.revProbeOK, q.rx.lastRx, q.lastSend, q.connectedAt)
	return max(base+q.cfg.KeepAlive, q.nextRevProbe)
}

// probeReverse probes one reverse-set slot: planes in turn; an empty or
// unvalidated slot gets a fresh random candidate, a validated one is
// re-checked.
func (q *qp) probeReverse(now Time, emit func(wire.Plane, []byte)) {
	q.nextRevProbe = now + q.probeInterval()
	if q.rx.lastRx+q.revFresh() <= now {
		// Idle: a keepalive, and the next one a period later even if
		// this one goes unanswered.
		q.nextRevProbe = now + q.cfg.KeepAlive
	}
	planes := q.e.cfg.Planes
	for i := 0; i < planes; i++ {
		pl := wire.Plane((q.revCur/revPerPlane + 1 + i) % planes)
		if q.remote.Addrs[pl].IsZero() || !q.planeOK(pl) {
			continue
		}
		k := int(pl)*revPerPlane + q.e.rng.IntN(revPerPlane)
		q.revCur = k
		r := &q.rev[k]
		ev := r.ev
		if !r.valid || !r.ok || q.e.evDenied(q.peer, ev) {
			var ok bool
			if ev, ok = q.e.freshEV(q.peer, pl); !ok {
				continue
			}
		}
		for j := range q.activeProbes() {
			if p := &q.probes[j]; p.used && p.ev < 0 && p.rev == k {
				return // this slot's probe is still out
			}
		}
		pr := q.allocProbe()
		if pr == nil {
			return
		}
		pr.ev, pr.rev, pr.revEV = -1, k, ev
		if q.sendProbe(ev, pr, emit) {
			q.stats.ReverseProbes++
			q.rx.sinceRevProbe, q.rx.lastRevProbe = 0, now
		} else {
			q.freeProbe(pr)
		}
		return
	}
}
