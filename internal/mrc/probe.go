package mrc

import "github.com/softmrc/softmrc/internal/wire"

// Probes (PETH) test one EV: the peer answers with a SACK pr=1 that reflects
// the probe's EV and carries the probe id in ack_psn_offset. They serve two
// purposes: bringing ASSUMED_BAD EVs back (ProbeSuccesses consecutive
// answers), and validating the reverse EV set of a receive-only QP.

func (q *qp) probeTimeout() Time {
	return max(3*q.srtt, 50*Microsecond)
}

func (q *qp) allocProbe() *probeRec {
	if q.nProbes >= maxProbes {
		return nil
	}
	for i := range q.probes {
		if !q.probes[i].used {
			q.nProbes++
			return &q.probes[i]
		}
	}
	return nil
}

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

// probeBad probes every ASSUMED_BAD EV that is due.
func (q *qp) probeBad(now Time, emit func(wire.Plane, []byte)) {
	next := Never
	iv := q.probeInterval()
	for i := range q.evs {
		x := &q.evs[i]
		if x.state != EVAssumedBad {
			continue
		}
		if x.nextProbe <= now {
			x.nextProbe = now + iv
			if !x.probeOut && q.planeOK(x.plane) {
				if pr := q.allocProbe(); pr != nil {
					pr.ev = int32(i)
					if q.sendProbe(x.ev, pr, emit) {
						x.probeOut = true
						x.c.Probes++
					} else {
						*pr = probeRec{}
						q.nProbes--
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
	for i := range q.probes {
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
				if x.state == EVAssumedBad {
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
			*r = revEntry{ev: ev, ok: true, valid: true}
		}
		*pr = probeRec{}
		q.nProbes--
		if rtt > 0 {
			q.updateRTT(rtt)
		}
		return rtt
	}
	return 0
}

func (q *qp) probeFailed(pr *probeRec) {
	if pr.ev >= 0 {
		x := &q.evs[pr.ev]
		x.probeOut = false
		x.probeOK = 0
	} else if r := &q.rev[pr.rev]; r.valid && r.ev == pr.revEV {
		// An unanswered reverse EV leaves the set; the slot is refilled
		// by a fresh candidate on the next probe.
		r.ok, r.valid = false, false
	}
	*pr = probeRec{}
	q.nProbes--
}

// wantRevProbe: a receive-only MRC QP that has been receiving in the last
// 10 ms keeps its reverse EV set validated, one probe per RTT.
func (q *qp) wantRevProbe() bool {
	return q.cfg.Transport == MRC && q.rx.everRx && q.e.now-q.rx.lastRx < 10*Millisecond &&
		q.sndUna == q.sndNxt && q.msgHead == q.msgTail
}

// probeReverse probes one reverse-set slot: planes in turn; an empty or
// unvalidated slot gets a fresh random candidate, a validated one is
// re-checked.
func (q *qp) probeReverse(now Time, emit func(wire.Plane, []byte)) {
	q.nextRevProbe = now + max(q.srtt, minProbeInterval)
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
		if !r.valid || !r.ok {
			t1 := uint8(q.e.rng.IntN(256))
			if q.peer.paths != nil {
				t1 = uint8(q.e.rng.IntN(q.peer.paths.T1Count()))
			}
			ev = wire.MakeEV(pl, t1, q.e.rng.Uint32())
		}
		for j := range q.probes {
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
		} else {
			*pr = probeRec{}
			q.nProbes--
		}
		return
	}
}
