package mrc

import "github.com/softmrc/softmrc/internal/wire"

// Spurious ACK timeouts (Eifel / RFC 3522 and 4015 in spirit): an ACK
// timer that fired although the transmission it guarded arrived. On a host
// that does not get the CPU (2 shared vCPUs, load 15–30: docs/performance.md)
// the receiver drains a window milliseconds late, and every packet in
// flight times out with nothing lost. Each timeout condemns its EV
// (ASSUMED_BAD, and at groupFails its whole path: pathFailedAt), so one
// stall took a QP's EV set out of service and the QP stalled for EVs
// (no_ev_stalls) until probes brought them back; the retransmissions
// arrived as duplicates. The window is not cut by a timeout (cc.go: a loss
// without a trim is not congestion), so there is nothing to undo there.
//
// A timeout is found spurious when an acknowledgement proves that the
// timed-out transmission (or an earlier one) arrived:
//   - the SACK was triggered by that PSN and echoes the timed-out
//     transmission's timestamp (Eifel's timestamp test), or
//   - the PSN is acknowledged before its retransmission left, or sooner
//     after it than the lowest RTT seen (that acknowledgement cannot be the
//     retransmission's: Linux RACK's test), or
//   - the receiver reports the retransmission as a duplicate (a SACK
//     triggered by an already acknowledged PSN echoing the retransmission's
//     timestamp, with only that one retransmission sent: DSACK's test).
//
// Then the EV penalty of the timeout is undone (spuriousUndo) and, unless
// QPConfig.NoSpuriousRTOFloor, the RTO is raised to the age at which the
// original was acknowledged, a floor that halves every rtoFloorDecay floors
// of time (spuriousFloor), so that a receiver that stalls again as long
// does not time out again. Why on by default: without it the undo alone
// made the sender on a CPU-starved veth pair keep sending where the
// condemned EVs had made it sleep, and mrc-write-bw ran at 0.70× main's
// rate (6 rounds); with it 1.03–1.12×. Its cost: real tail losses wait for
// the floor as well (docs/engine.md). A
// real loss passes none of the tests: its retransmission is acknowledged
// an RTT after it left, echoing its own timestamp, and is not a duplicate.

// rtoFloorDecay is the floor's half-life in units of the floor itself:
// a 2 ms floor halves in 16 ms, a 100 µs one in 0.8 ms (stalls recur on
// that scale on a loaded host while short ones are forgotten quickly).
// (A floor of twice the age halving every 32 floors left ~500 timeouts per
// veth run instead of 4 000–10 000, and cost tail losses more.)
const rtoFloorDecay = 8

// spuriousFloor is the RTO floor learnt from spurious timeouts, decayed.
func (q *qp) spuriousFloor() Time {
	f := q.rtoFloor
	if f <= 0 {
		return 0
	}
	n := (q.e.now - q.rtoFloorAt) / (rtoFloorDecay * f)
	if n >= 62 {
		return 0
	}
	return f >> n
}

// triggerAfterRTO applies the tests that need the SACK's trigger (psn, the
// timestamp echo): before the SACK's acknowledgements are applied.
func (q *qp) triggerAfterRTO(psn wire.PSN, echo uint16) {
	if q.cfg.Transport.inOrder() || !psn.Before(q.sndNxt) || int(q.sndNxt.Diff(psn)) > q.W {
		return
	}
	pk := q.slot(psn)
	if pk.flags&(pktRTO|pktSent) != pktRTO|pktSent {
		return
	}
	switch {
	case echo == pk.rtoTS && (pk.ts != pk.rtoTS || pk.tries == pk.rtoTries):
		// The timed-out transmission itself triggered this SACK (and no
		// retransmission since carries the same 16-bit timestamp).
		q.spurious(pk)
	case pk.flags&pktAcked != 0 && echo == pk.ts && pk.ts != pk.rtoTS && pk.tries == pk.rtoTries+1:
		// The one retransmission arrived as a duplicate: an earlier
		// transmission had arrived.
		q.spurious(pk)
	case pk.flags&pktAcked == 0 && echo == pk.ts:
		// The retransmission was the first copy in: the timeout was real.
		pk.flags &^= pktRTO
	}
}

// ackedAfterRTO is called when a packet whose ACK timer fired is
// acknowledged (ackPkt).
func (q *qp) ackedAfterRTO(pk *txPkt) {
	if q.cfg.Transport.inOrder() {
		pk.flags &^= pktRTO
		return
	}
	base := q.peer.cc.baseRTT
	switch {
	case pk.tries == pk.rtoTries:
		// Not retransmitted since the timeout: the acknowledgement is of
		// a transmission from before it.
		q.spurious(pk)
	case pk.tries == pk.rtoTries+1 && base > 0 && q.e.now-pk.sentAt < base:
		q.spurious(pk)
	}
	// Otherwise the flag stays until the slot is reused: a duplicate
	// report may still come (triggerAfterRTO).
}

// spurious handles the proof that pk's timeout was spurious.
func (q *qp) spurious(pk *txPkt) {
	pk.flags &^= pktRTO
	// Every timeout of the packet since the first was spurious: it had
	// arrived. Only the first one's EV is known to have delivered it.
	q.stats.SpuriousTimeouts += uint64(pk.tos - pk.rtoTos)
	if age := q.e.now - pk.rtoSent; age > 0 && !q.cfg.NoSpuriousRTOFloor {
		if f := min(age, q.cfg.MaxRTO); f > q.spuriousFloor() {
			q.rtoFloor, q.rtoFloorAt = f, q.e.now
		}
	}
	if idx := pk.rtoEV; idx >= 0 && int(idx) < len(q.evs) {
		q.evs[idx].c.SpuriousTimeouts++
		q.spuriousUndo(idx, pk.rtoSent)
	}
}

// spuriousUndo undoes what timeouts alone did to EV idx and its path (a
// packet sent through it at sent arrived): the path's failure count, its
// condemnation when only timeouts condemned it, and the ASSUMED_BAD of
// every EV of it that only a timeout took there (back to its state before,
// and into the rotation).
func (q *qp) spuriousUndo(idx int32, sent Time) {
	x := &q.evs[idx]
	g := &q.grps[x.grp]
	if sent > g.lastAckSent {
		g.lastAckSent, g.fails = sent, 0
	}
	if g.held {
		// Held as flapping (damp.go): its EVs stay out until it has
		// answered through the hold, whatever this packet says.
		return
	}
	group := g.dead && g.rtoDead
	if group {
		// Not an outage (pathAnswered counts those): the path delivered.
		g.dead, g.rtoDead, g.probeMiss, g.lost = false, false, 0, 0
	}
	for j := range q.evs {
		y := &q.evs[j]
		if j != int(idx) && (!group || y.grp != x.grp) {
			continue
		}
		if y.state != EVAssumedBad || !y.rtoBad {
			continue
		}
		q.setState(int32(j), y.preBad)
		q.promote(int32(j))
	}
}
