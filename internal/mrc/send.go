package mrc

import (
	"math/bits"

	"github.com/softmrc/softmrc/internal/wire"
)

func (q *qp) slot(psn wire.PSN) *txPkt { return &q.pkts[uint32(psn)&q.wmask] }

// inFlightRange reports whether psn is in [sndUna, sndNxt).
func (q *qp) inFlightRange(psn wire.PSN) bool {
	return psn.Diff(q.sndUna) >= 0 && psn.Before(q.sndNxt)
}

func (q *qp) hasWork() bool {
	return q.rtxN > 0 || (q.segMsg < q.msgTail && int(q.sndNxt.Diff(q.sndUna)) < q.sndW)
}

// rto is the ACK timeout for a packet that has timed out tries times
// before (a retransmission after a loss detected by a SACK or a NACK does
// not back off: the timer was not too short, the packet was lost):
// srtt + 4·rttvar (RFC 6298's form) plus one srtt of slack, clamped to
// [MinRTO, MaxRTO]; before any RTT sample initialRTO (AckTimeout, backed
// off while nothing comes back); AckTimeout with FixedRTO; doubled per
// earlier timeout in exponential mode, up to MaxAckTimeout. Why the
// slack: every timeout marks an EV ASSUMED_BAD, and on a steady path rttvar
// decays toward zero, so srtt + 4·rttvar alone fires on a queueing blip; in
// the fabric simulator's ECN balance scenario srtt + max(4·rttvar, srtt/2)
// cost each flow ~4 % of the capacity (docs/engine.md).
func (q *qp) rto(tries uint8) Time {
	base := q.cfg.AckTimeout
	switch {
	case q.cfg.FixedRTO:
	case q.srtt > 0:
		base = min(max(2*q.srtt+4*q.rttvar, q.cfg.MinRTO), q.cfg.MaxRTO)
	default:
		base = q.initialRTO()
	}
	if q.cfg.TimeoutMode == TimeoutExponential && tries > 0 {
		ceil := max(q.cfg.MaxAckTimeout, base)
		for i := uint8(0); i < tries && base < ceil; i++ {
			base *= 2
		}
		base = min(base, ceil)
	}
	return base
}

// initialRTO is the timeout before the first RTT sample: AckTimeout,
// doubled per round of timeouts since the QP started (backOffInitial), up
// to MaxAckTimeout. Why: a path whose RTT is above AckTimeout (mrc-nicd's
// 20 ms against a delay line's 10 ms plus a queue) times every packet and
// every probe out before its answer can come. Without the backoff each new
// packet got 20 ms again, every EV went ASSUMED_BAD, and every probe of them
// "failed" before its answer arrived, so no sample was ever taken and the
// QP failed RETRY_EXCEEDED on a path that delivered everything (mrc-lab S8
// with 2.5 ms host links: a receiver that answered only after 270 ms;
// TestInitialRTOBacksOff). TCP does the same (RFC 6298 5.5 and 5.7: the
// backed-off RTO is kept until a valid sample).
func (q *qp) initialRTO() Time {
	rto := q.cfg.AckTimeout
	for i := uint8(0); i < q.initBackoff && rto < q.cfg.MaxAckTimeout; i++ {
		rto *= 2
	}
	return min(rto, max(q.cfg.MaxAckTimeout, q.cfg.AckTimeout))
}

// backOffInitial doubles the initial timeout after a packet or probe sent
// at sentAt went unanswered, if no RTT sample exists yet; once per round:
// what was sent before the previous doubling had the shorter timeout and
// does not count again (a burst of 64 packets that times out together is
// one round, as TCP's single retransmission timer sees it).
func (q *qp) backOffInitial(sentAt Time) {
	if q.srtt != 0 || q.cfg.FixedRTO || sentAt < q.initBackoffAt || q.initialRTO() >= q.cfg.MaxAckTimeout {
		return
	}
	q.initBackoff++
	q.initBackoffAt = q.e.now
}

// markLost takes a packet out of the inflight count and queues it for
// retransmission (once).
func (q *qp) markLost(psn wire.PSN, pk *txPkt) {
	if pk.flags&pktInFlight != 0 {
		q.peer.cc.inflight -= int(pk.n)
		pk.flags &^= pktInFlight
	}
	if pk.flags&(pktQueued|pktAcked) == 0 {
		pk.flags |= pktQueued
		q.rtxQ[(q.rtxHd+q.rtxN)%len(q.rtxQ)] = psn
		q.rtxN++
	}
}

// trySend sends at most one data packet: a retransmission first, else the
// next new packet. It reports whether it sent.
func (q *qp) trySend(now Time, emit func(wire.Plane, []byte)) bool {
	if q.state != QPReady {
		return false
	}
	if q.sendOne(now, emit) {
		q.blockedSince = 0
		return true
	}
	if q.blockedSince == 0 && q.sndUna == q.sndNxt && q.hasWork() {
		q.blockedSince = max(now, 1)
	}
	return false
}

// sendOne is trySend's work: it sends at most one data packet.
func (q *qp) sendOne(now Time, emit func(wire.Plane, []byte)) bool {
	var pk *txPkt
	var psn wire.PSN
	rtx := false
	for q.rtxN > 0 {
		psn = q.rtxQ[q.rtxHd]
		p := q.slot(psn)
		// A held packet (PSN_OOR) is queued again once inside the window.
		if !q.inFlightRange(psn) || p.flags&(pktAcked|pktHeld) != 0 {
			p.flags &^= pktQueued
			q.rtxHd = (q.rtxHd + 1) % len(q.rtxQ)
			q.rtxN--
			continue
		}
		pk, rtx = p, true
		break
	}
	mtu := q.e.cfg.MTU
	var m *txMsg
	n := 0
	if rtx {
		n = int(pk.n)
		m = &q.msgs[pk.msg&uint64(len(q.msgs)-1)]
	} else {
		if q.segMsg >= q.msgTail || int(q.sndNxt.Diff(q.sndUna)) >= q.sndW {
			return false
		}
		m = &q.msgs[q.segMsg&uint64(len(q.msgs)-1)]
		n = min(mtu, int(m.length)-int(m.assigned)*mtu)
	}
	if !q.ccAllows(now, n) {
		return false
	}
	var idx int32
	if q.cfg.Transport.inOrder() {
		idx = q.gbnPick()
	} else {
		avoid := int32(-1)
		if rtx {
			avoid = pk.ev
		}
		idx = q.pickEV(avoid)
	}
	if idx == -2 || (idx < 0 && q.anyUsableEV()) {
		// Ports busy (or the only EV's port): wait for room, not an EV stall.
		return false
	}
	if idx < 0 {
		q.stats.NoEVStalls++
		if q.noEVSince == 0 {
			q.noEVSince = now
		} else if now-q.noEVSince >= q.cfg.NoEVTimeout {
			q.fail(StatusNoPath, FailNoEV)
		}
		return false
	}
	q.noEVSince = 0
	if rtx {
		pk.flags &^= pktQueued
		q.rtxHd = (q.rtxHd + 1) % len(q.rtxQ)
		q.rtxN--
		if pk.tries < 255 {
			pk.tries++
		}
		q.stats.TxRtx++
		q.stats.RtxBytes += uint64(pk.n)
	} else {
		if m.assigned == 0 {
			m.firstPSN = q.sndNxt
		}
		psn = q.sndNxt
		if q.sndUna == q.sndNxt {
			q.lastProgress = now // the RetryTimeout clock starts
		}
		q.sndNxt = q.sndNxt.Add(1)
		pk = q.slot(psn)
		*pk = txPkt{msg: q.segMsg, off: m.assigned * uint32(mtu), n: uint32(n)}
		m.assigned++
		if m.assigned == m.npkts {
			q.segMsg++
		}
	}
	x := &q.evs[idx]
	e := q.e
	e.resetTx()
	pl, ok := e.fillNet(q.peer, x.ev)
	if !ok {
		e.stats.TxNoRoute++
		q.markLost(psn, pk)
		return false
	}
	t := &e.tx
	t.DSCP, t.ECN = wire.DSCPTrimmable, wire.ECNECT0
	if rtx {
		t.DSCP, t.Rtx = wire.DSCPTrimmableRetx, true
	}
	idxInMsg := pk.off / uint32(mtu)
	first, last := idxInMsg == 0, idxInMsg+1 == m.npkts
	switch {
	case first && last && m.hasImm:
		t.Opcode = wire.OpWriteOnlyImm
	case first && last:
		t.Opcode = wire.OpWriteOnly
	case first:
		t.Opcode = wire.OpWriteFirst
	case last && m.hasImm:
		t.Opcode = wire.OpWriteLastImm
	case last:
		t.Opcode = wire.OpWriteLast
	default:
		t.Opcode = wire.OpWriteMiddle
	}
	// AckReq on a message's last packet and on retransmissions: the
	// receiver answers at once, which completes messages and repairs holes
	// without waiting for the coalescing timer. Not on an unsignaled
	// message of an MRC QP with more queued behind it (WR.Unsignaled): the
	// coalesced SACKs cover it. (segMsg has moved past a message whose
	// last packet this is.)
	t.AckReq = rtx || (last && (!m.unsig || q.cfg.Transport.inOrder() || q.segMsg == q.msgTail))
	t.DestQP, t.PSN = q.remote.QPN, psn
	t.MSN, t.RQMSN = m.msn, m.rqmsn
	ts := ts16(now)
	t.HasTS, t.TS, t.FType = true, ts, wire.FTypeTimestamp
	t.VA, t.RKey, t.DMALen = m.va+uint64(pk.off), m.rkey, m.length
	t.Imm = m.imm
	t.Payload = m.src[pk.off : pk.off+pk.n]

	q.txSeq++
	if pk.flags&pktSent == 0 {
		pk.first = now
	}
	pk.ev, pk.sentAt, pk.seq, pk.ts = idx, now, q.txSeq, ts
	pk.flags |= pktInFlight | pktSent
	q.peer.cc.sent(now, n, q.srtt)
	x.c.Sent++
	q.planeSent[x.plane]++
	q.stats.TxData++
	q.stats.TxBytes += uint64(n)
	q.lastSend = now
	if q.roce == nil { // RoCE: one transport timer per QP (roceTimerAt)
		q.timers.push(timerEnt{at: now + q.rto(pk.tos), psn: psn, seq: q.txSeq})
	} else {
		q.roceSent(now, t.Len()) // the frame's length only for DCQCN's byte counter
	}
	e.emitFrame(pl, emit)
	return true
}

// runTimers handles expired ACK timers and probe timeouts.
func (q *qp) runTimers(now Time) {
	if q.state != QPReady {
		return
	}
	if q.cfg.RetryTimeout > 0 && q.roce == nil && q.sndUna != q.sndNxt && now-q.lastProgress >= q.cfg.RetryTimeout {
		// Nothing acknowledged for RetryTimeout: the peer is gone (or out
		// of step with us) even if its probes are answered. RC's retry
		// count × timeout ends the same way.
		q.fail(StatusRetryExceeded, FailRetryTimeout)
		return
	}
	if q.blockedSince != 0 && (q.sndUna != q.sndNxt || !q.hasWork()) {
		q.blockedSince = 0 // data went out meanwhile, or the work is gone
	}
	if q.cfg.RetryTimeout > 0 && q.blockedSince != 0 && now-q.blockedSince >= q.cfg.RetryTimeout {
		// Work queued and nothing could be sent for RetryTimeout: the
		// clock above never started (nothing is outstanding), so without
		// this the QP would wait forever with its WRs posted.
		q.stats.SendBlockedFail++
		q.fail(StatusRetryExceeded, FailSendBlocked)
		return
	}
	// RoCE QPs push no per-packet timers: their heap stays empty.
	if q.roceTimers(now); q.state != QPReady {
		return
	}
	for {
		at, ok := q.timers.peek()
		if !ok || at > now {
			break
		}
		ent := q.timers.pop()
		if !q.inFlightRange(ent.psn) {
			continue
		}
		pk := q.slot(ent.psn)
		if pk.seq != ent.seq || pk.flags&pktInFlight == 0 {
			continue
		}
		q.stats.Timeouts++
		q.stats.Retries++
		if pk.tos < 255 {
			pk.tos++
		}
		if pk.ev >= 0 {
			q.evs[pk.ev].c.Timeouts++
		}
		q.backOffInitial(pk.sentAt)
		q.pathFailedAt(pk.ev, pk.sentAt)
		if q.cfg.Transport.inOrder() {
			q.goBack(q.sndUna)
		} else {
			q.markLost(ent.psn, pk)
		}
		if q.cfg.RetryLimit < 32 && int(pk.tries) >= q.cfg.RetryLimit && !q.anyUsableEV() {
			q.fail(StatusRetryExceeded, FailRetryLimit)
			return
		}
	}
	if q.nProbes > 0 {
		for i := range q.activeProbes() {
			pr := &q.probes[i]
			if pr.used && pr.deadline <= now {
				q.probeFailed(pr)
			}
		}
	}
}

// goBack (go-back-N) resends everything from psn on.
//
// The retransmission queue is emptied first: a go-back-N receiver accepts
// only its next PSN, so the resend must begin at from and go in order.
// Appending behind retransmissions still queued from an earlier go-back
// (the transport timer fired before DCQCN's pacer let them all leave)
// began each round mid-window, everything of it out of order at the
// receiver, and a paced RoCE QP ended RETRY_EXCEEDED with its lost packet
// never resent first (TestRoCEGoBackInOrder; mrc-lab S8). Everything
// before from is acknowledged by then (a NAK acknowledges what precedes
// it; a timeout goes back to sndUna).
func (q *qp) goBack(from wire.PSN) {
	for ; q.rtxN > 0; q.rtxN-- {
		if psn := q.rtxQ[q.rtxHd]; q.inFlightRange(psn) {
			q.slot(psn).flags &^= pktQueued
		}
		q.rtxHd = (q.rtxHd + 1) % len(q.rtxQ)
	}
	for psn := from; psn.Before(q.sndNxt); psn = psn.Add(1) {
		pk := q.slot(psn)
		if pk.flags&pktAcked == 0 {
			q.markLost(psn, pk)
		}
	}
}

// ackPkt marks psn acknowledged; it returns the bytes newly acknowledged and
// raises *rack to the packet's send time.
func (q *qp) ackPkt(psn wire.PSN, rack *Time) int {
	pk := q.slot(psn)
	if pk.flags&pktAcked != 0 || pk.flags&pktSent == 0 {
		return 0
	}
	pk.flags |= pktAcked
	q.stats.AckedBytes += uint64(pk.n)
	if pk.flags&pktHeld != 0 {
		pk.flags &^= pktHeld
		q.nHeld--
	}
	if pk.flags&pktInFlight != 0 {
		q.peer.cc.inflight -= int(pk.n)
		pk.flags &^= pktInFlight
	}
	if pk.ev >= 0 {
		x := &q.evs[pk.ev]
		x.c.Acked++
		if g := &q.grps[x.grp]; pk.sentAt > g.lastAckSent {
			g.lastAckSent, g.fails = pk.sentAt, 0
			if g.dead && pk.sentAt > g.deadAt {
				g.dead, g.probeMiss = false, 0 // data through it arrived after it was condemned
			}
		}
	}
	if pk.sentAt > *rack {
		*rack = pk.sentAt
	}
	return int(pk.n)
}

// handleSACK applies a SACK (or a probe answer, pr=1).
func (q *qp) handleSACK(p *wire.Packet) {
	s := &p.SACK
	now := q.e.now
	q.stats.RxSACK++
	var rack Time
	newly := 0
	cack := s.CackPSN
	if cack.Diff(q.sndUna) >= -1 && cack.Before(q.sndNxt) {
		for psn := q.sndUna; !psn.After(cack); psn = psn.Add(1) {
			newly += q.ackPkt(psn, &rack)
		}
	}
	if s.Bitmap != 0 && q.cfg.Transport == MRC {
		base := cack.Add(int(s.SackOffset))
		for bm := s.Bitmap; bm != 0; bm &= bm - 1 {
			psn := base.Add(bits.TrailingZeros64(bm))
			if q.inFlightRange(psn) {
				newly += q.ackPkt(psn, &rack)
			}
		}
	}
	ecn := s.M == wire.MSkipOnce || s.M == wire.MAlwaysSkip // both echo a CE mark
	var rtt Time
	if s.Probe {
		rtt = q.probeAnswered(uint16(s.AckPSNOffset), s.Entropy, s.M)
	} else {
		if idx := q.evFromWire(s.Entropy); idx >= 0 && q.cfg.Transport == MRC {
			switch s.M {
			case wire.MSkipOnce:
				q.evs[idx].c.ECN++
				q.skipEV(idx)
				q.learnReverse(s.Entropy) // congested, but it delivers
			case wire.MNone:
				q.unskip(idx)
				q.learnReverse(s.Entropy)
			case wire.MAlwaysSkip:
				q.evs[idx].c.ECN++
				q.pathFailed(idx)
			}
		}
		rtt = q.rttSample(cack.Add(int(s.AckPSNOffset)), s.TSEcho)
	}
	if newly > 0 {
		q.lastProgress, q.probeBackoff = now, 0
	}
	if s.MPR > 0 && !s.Probe {
		q.sndW = min(q.W, int(s.MPR)*minWindow)
	}
	q.advanceUna()
	q.completeMsgs()
	q.peer.cc.onAck(now, newly, ecn, rtt, q.srtt)
	if rack > 0 && q.cfg.Transport == MRC {
		q.detectLoss(rack)
	}
}

// rttSample measures the RTT of the packet that triggered a SACK from the
// TSETH echo (1.024 µs units) of the transmission that triggered it: from
// the recorded send time when the echo is that of the latest transmission,
// and from the echo itself when it is an earlier one (the original of a
// spuriously retransmitted packet: its RTT is real, and RFC 7323 measures
// it from the echoed timestamp too) sent less than one echo period
// (16 bits of 1.024 µs, 67 ms) ago. Otherwise there is no sample (0): an
// older echo, or one for a PSN outside the window, has an unknown number
// of wraps. Taken modulo 67 ms, the original of a packet held that long
// read as an RTT of tens of µs, and the base RTT, a minimum, kept it
// (TestRTTSampleOnlyFromItsTransmission; mrc-lab S7, docs/engine.md).
func (q *qp) rttSample(trig wire.PSN, echo uint16) Time {
	now := q.e.now
	var rtt Time
	if trig.Before(q.sndNxt) && int(q.sndNxt.Diff(trig)) <= q.W {
		switch pk := q.slot(trig); {
		case pk.flags&pktSent == 0:
		case pk.ts == echo:
			rtt = now - pk.sentAt
		case now-pk.first < echoPeriod:
			rtt = Time(uint16(ts16(now)-echo)) << 10
		}
	}
	if rtt <= 0 || rtt > Second {
		return 0
	}
	q.updateRTT(rtt)
	return rtt
}

// echoPeriod is the period of the TSETH timestamp (ts16): 2^16 units of
// 1.024 µs.
const echoPeriod = Time(1<<16) << 10

func (q *qp) updateRTT(rtt Time) {
	if q.srtt == 0 {
		q.srtt, q.rttvar = rtt, rtt/2
	} else {
		d := q.srtt - rtt
		if d < 0 {
			d = -d
		}
		q.rttvar = (3*q.rttvar + d) / 4
		q.srtt = (7*q.srtt + rtt) / 8
	}
	q.peer.srtt = q.srtt
}

func (q *qp) reorderWindow() Time {
	if q.cfg.ReorderWindow > 0 {
		return q.cfg.ReorderWindow
	}
	return max(3*q.srtt/4+4*q.rttvar, minReorder)
}

// detectLoss declares lost every in-flight packet sent more than the reorder
// window before the latest acknowledged one (RACK-style: a hole alone is not
// evidence, a later packet overtaking it by that much is).
func (q *qp) detectLoss(rack Time) {
	if rack > q.rackSentAt {
		q.rackSentAt = rack
	}
	reo := q.reorderWindow()
	for psn := q.sndUna; psn.Before(q.sndNxt); psn = psn.Add(1) {
		pk := q.slot(psn)
		if pk.flags&pktInFlight == 0 {
			continue
		}
		if pk.sentAt+reo < q.rackSentAt {
			q.stats.Losses++
			if pk.ev >= 0 {
				q.evs[pk.ev].c.Losses++
			}
			q.pathFailedAt(pk.ev, pk.sentAt)
			q.markLost(psn, pk)
		} else if pk.tries == 0 {
			// First transmissions go out in PSN order: none later is older.
			break
		}
	}
}

// completeMsgs completes, in order, every message whose packets are all
// acknowledged.
func (q *qp) completeMsgs() {
	for q.msgHead < q.segMsg {
		m := &q.msgs[q.msgHead&uint64(len(q.msgs)-1)]
		last := m.firstPSN.Add(int(m.npkts) - 1)
		if !last.Before(q.sndUna) {
			return
		}
		if !m.unsig {
			q.e.complete(Completion{Kind: CompSend, QPN: q.qpn, WRID: m.wrID, Len: m.length})
		}
		if m.hasImm {
			q.wimmOut--
		}
		m.src = nil
		q.msgHead++
		q.stats.MsgsSent++
	}
}

// handleNACK applies a NETH.
func (q *qp) handleNACK(p *wire.Packet) {
	n := &p.NACK
	q.stats.RxNACK++
	q.stats.NACKsRcvd[n.Reason]++
	switch n.Reason {
	case wire.NackUnexpEvent:
		q.fail(StatusRemoteAccess, FailRemote)
		return
	case wire.NackWImmLimit:
		q.fail(StatusWImmLimit, FailRemote)
		return
	}
	psn := n.NackPSN
	if !q.inFlightRange(psn) {
		return
	}
	pk := q.slot(psn)
	if pk.flags&pktAcked != 0 || pk.ts != n.Timestamp {
		return // stale: about an earlier transmission
	}
	idx := q.evFromWire(n.Entropy)
	switch n.Reason {
	case wire.NackTrimmed:
		if idx >= 0 {
			q.evs[idx].c.Trims++
			if q.cfg.Transport == MRC && (q.evs[idx].state == EVGood || q.evs[idx].state == EVSkip) {
				q.skipEV(idx)
			}
		}
		q.peer.cc.onTrim(q.e.now, q.srtt, false)
	case wire.NackTrimmedLastHop:
		if idx >= 0 {
			q.evs[idx].c.TrimsLastHop++
		}
		q.peer.cc.onTrim(q.e.now, q.srtt, true)
	case wire.NackPSNOutOfWindow:
		q.holdOutOfWindow(psn)
		return
	default:
		q.stats.Retries++
	}
	if q.cfg.Transport.inOrder() {
		q.goBack(psn)
		return
	}
	q.markLost(psn, pk)
}

// handleAETH handles a Transport ACK (syndrome 000xxxxx: every PSN up to
// and including BTH.psn arrived) and the go-back-N NAK (sequence error:
// everything before the PSN arrived, everything from it on is resent).
func (q *qp) handleAETH(p *wire.Packet) {
	if p.Syndrome&0xE0 == 0 {
		q.stats.RxAck++
		cack := p.PSN
		if !(cack.Diff(q.sndUna) >= 0 && cack.Before(q.sndNxt)) {
			return
		}
		var rack Time
		newly := 0
		for psn := q.sndUna; !psn.After(cack); psn = psn.Add(1) {
			newly += q.ackPkt(psn, &rack)
		}
		if newly > 0 {
			q.lastProgress = q.e.now
		}
		q.advanceUna()
		q.completeMsgs()
		q.peer.cc.onAck(q.e.now, newly, false, 0, q.srtt)
		return
	}
	if !q.cfg.Transport.inOrder() || p.Syndrome&0xE0 != 0x60 {
		return
	}
	q.stats.RxNACK++
	psn := p.PSN
	if !q.inFlightRange(psn) {
		return
	}
	var rack Time
	for x := q.sndUna; x.Before(psn); x = x.Add(1) {
		q.ackPkt(x, &rack)
	}
	q.advanceUna()
	q.completeMsgs()
	if q.roceStaleNAK() {
		q.roce.c.StaleNAK++
		return
	}
	q.goBack(psn)
	if q.roce != nil {
		q.roceRetry()
	}
}

// advanceUna moves sndUna over acknowledged PSNs and queues the held
// packets (refused as beyond the responder's window) that are now inside
// the window.
func (q *qp) advanceUna() {
	for q.sndUna != q.sndNxt && q.slot(q.sndUna).flags&pktAcked != 0 {
		q.sndUna = q.sndUna.Add(1)
	}
	if q.nHeld == 0 {
		return
	}
	for i, psn := 0, q.sndUna; i < q.sndW && psn.Before(q.sndNxt); i, psn = i+1, psn.Add(1) {
		if pk := q.slot(psn); pk.flags&pktHeld != 0 {
			pk.flags &^= pktHeld
			q.nHeld--
			q.markLost(psn, pk)
		}
	}
}

// holdOutOfWindow handles a PSN_OOR NACK: the responder dropped psn as
// beyond its window (we sent it before we knew the window, or the window
// shrank). Resending it at once would draw the same NACK, and again (a
// NACK storm); it waits, without blame on its EV, until the window has
// moved past it (advanceUna). The window itself is corrected from the
// SACKs' mpr. Go-back-N holds everything from psn on.
func (q *qp) holdOutOfWindow(psn wire.PSN) {
	end := psn.Add(1)
	if q.cfg.Transport.inOrder() {
		end = q.sndNxt
	}
	for x := psn; x.Before(end); x = x.Add(1) {
		pk := q.slot(x)
		if pk.flags&(pktAcked|pktHeld) != 0 || pk.flags&pktSent == 0 {
			continue
		}
		if pk.flags&pktInFlight != 0 {
			q.peer.cc.inflight -= int(pk.n)
			pk.flags &^= pktInFlight
		}
		pk.flags |= pktHeld
		q.nHeld++
	}
	q.advanceUna() // already inside (the window moved meanwhile): resend now
}
