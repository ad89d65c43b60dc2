package mrc

import (
	"github.com/softmrc/softmrc/internal/wire"
)

const (
	rxLast = 1 << iota // the PSN ends a message
	rxImm              // ... a Write-with-Immediate (imm[] holds it)
)

// rxState is the responder side of a QP: the received-PSN bitmap over the
// MPR window, per-PSN message-end marks, and the SACK coalescing state.
type rxState struct {
	cack    wire.PSN // every PSN up to and including cack has arrived
	bits    []uint64 // W bits, PSN mod W
	flags   []uint8  // per PSN slot
	imm     []uint32
	mlen    []uint32 // message length (RETH DMA length) of an immediate
	rqmsn   []wire.MSN
	highest wire.PSN

	deliveredRQMSN wire.MSN // RQMSN of the last immediate delivered
	rcvdBytes      uint32   // cumulative, reported /256 mod 2^24
	ooo            uint32
	lastRx         Time
	rxSince        Time // start of the current run of arrivals (no gap of revFresh)
	sinceRevProbe  int  // data packets received since the last reverse probe (revProbePkts)
	lastRevProbe   Time // when the last reverse probe left
	everRx         bool
	dupAnswered    bool // a duplicate was answered since the last SACK went out

	ce [ceSlots]ceStreak // CE-mark streaks per EV (ALWAYS_SKIP)

	ackPending  int
	ackDeadline Time
	trig        ctrlItem // latest coalesced trigger

	// Late arrivals coalesced among themselves (Config.CoalesceHoles): a
	// run of them shares one SACK whose bitmap ends at the highest of them,
	// as long as it still covers the lowest (lateLo).
	latePending  int
	lateDeadline Time
	lateTrig     ctrlItem // the highest pending late arrival
	lateLo       wire.PSN
	nakSent      bool // go-back-N: one NAK per gap
}

func (r *rxState) init(q *qp, start wire.PSN) {
	r.cack = start.Add(-1)
	r.highest = r.cack
	r.bits = make([]uint64, q.W/64)
	r.flags = make([]uint8, q.W)
	r.imm = make([]uint32, q.W)
	r.mlen = make([]uint32, q.W)
	r.rqmsn = make([]wire.MSN, q.W)
	r.deliveredRQMSN = 0
}

// ceStreak counts the consecutive CE-marked data packets of one EV.
type ceStreak struct {
	ev    wire.EV
	n     int32
	since Time // arrival of the first marked packet of the streak
}

// alwaysSkip records a data packet of ev (marked: CE) and reports whether
// the EV has now crossed the ALWAYS_SKIP threshold (docs/engine.md): marks
// persisting for AlwaysSkipMarks packets in a row over at least an RTT mean
// a path that stays congested, not a passing burst. The table is
// direct-mapped: an EV that shares a slot with another restarts its streak
// when the other arrives, which can only delay the verdict.
func (q *qp) alwaysSkip(ev wire.EV, marked bool) bool {
	thr := q.e.cfg.AlwaysSkipMarks
	if thr < 0 || q.cfg.Transport != MRC {
		return false
	}
	c := &q.rx.ce[(uint32(ev)*0x9E3779B1)>>26&(ceSlots-1)]
	if c.ev != ev {
		*c = ceStreak{ev: ev}
	}
	if !marked {
		c.n = 0
		return false
	}
	now := q.e.now
	if c.n == 0 {
		c.since = now
	}
	c.n++
	if int(c.n) >= thr && now-c.since >= max(q.srtt, minProbeInterval) {
		c.n = 0 // one verdict per streak: the sender stops using the EV
		q.stats.AlwaysSkipSent++
		return true
	}
	return false
}

func (r *rxState) has(psn wire.PSN, mask uint32) bool {
	i := uint32(psn) & mask
	return r.bits[i>>6]&(1<<(i&63)) != 0
}

func (r *rxState) set(psn wire.PSN, mask uint32) {
	i := uint32(psn) & mask
	r.bits[i>>6] |= 1 << (i & 63)
}

func (r *rxState) clear(psn wire.PSN, mask uint32) {
	i := uint32(psn) & mask
	r.bits[i>>6] &^= 1 << (i & 63)
}

// handleData places one data packet. Every check that protects memory comes
// before the copy: rkey, access, VA inside the region, length inside the
// region without overflow, payload no longer than the MTU and the DMA length.
func (q *qp) handleData(port wire.Plane, p *wire.Packet) {
	r := &q.rx
	e := q.e
	now := e.now
	q.stats.RxData++
	if q.roce != nil && q.roceData(p) {
		return
	}
	psn := p.PSN
	d := psn.Diff(r.cack)
	trig := ctrlItem{kind: ctrlSACK, q: q, port: port, ev: p.EV, psn: psn, ts: p.TS}
	if p.ECN == wire.ECNCE {
		trig.m = wire.MSkipOnce
	}
	if d <= 0 || (d <= int32(q.W) && r.has(psn, q.wmask)) {
		// Duplicate (a retransmission whose original arrived, or a
		// replay): nothing to place, but the sender needs to hear it.
		q.stats.RxDup++
		if p.Rtx {
			// The sender resent what we had: a SACK of ours was lost (or
			// its timer fired early). The reverse set is not known good.
			q.revStale()
		}
		if !r.dupAnswered {
			r.dupAnswered = true
			q.sackNow(trig)
			return
		}
		// Nothing changed since the SACK that answered the first
		// duplicate: coalesce like any other packet.
		q.coalesce(trig)
		return
	}
	if d > int32(q.W) {
		q.stats.PSNOutOfWindow++
		q.nack(trig, wire.NackPSNOutOfWindow)
		return
	}
	if q.cfg.Transport.inOrder() && d != 1 {
		// RoCE RC: out of order is a sequence error; drop and NAK once.
		q.stats.RxOOO++
		if !r.nakSent {
			r.nakSent = true
			e.queueCtrl(ctrlItem{kind: ctrlNAKSeq, q: q, port: port, ev: p.EV, psn: r.cack.Add(1)})
		}
		return
	}
	if p.Trimmed {
		q.stats.RxTrimmed++
		reason := wire.NackTrimmed
		if p.DSCP == wire.DSCPTrimmedLastHop {
			reason = wire.NackTrimmedLastHop
		}
		q.nack(trig, reason)
		return
	}
	n := len(p.Payload)
	if n > e.cfg.MTU || uint64(n) > uint64(p.DMALen) {
		q.stats.BadLen++
		q.nack(trig, wire.NackUnexpEvent)
		return
	}
	if p.Opcode.HasImm() && uint16(p.RQMSN-r.deliveredRQMSN) > uint16(q.cfg.MaxWImm) {
		q.stats.WImmRejected++
		q.nack(trig, wire.NackWImmLimit)
		return
	}
	// IBTA (RDMA Write): a write whose DMA length is zero transfers nothing
	// and its R_Key and VA are not checked (senders may pass dummies).
	if p.DMALen != 0 {
		reg, ok := e.mem.Region(q.cfg.PD, p.RKey, RemoteKey)
		if !ok || reg.Access&AccessRemoteWrite == 0 {
			// Unknown, of another protection domain, or not granting
			// remote write: the same NACK, so a peer learns nothing of
			// keys it does not own.
			q.stats.BadRKey++
			q.nack(trig, wire.NackUnexpEvent)
			return
		}
		dst, ok := reg.Slice(p.VA, uint32(n))
		if !ok {
			q.stats.BadVA++
			q.nack(trig, wire.NackUnexpEvent)
			return
		}
		copy(dst, p.Payload)
	}

	r.set(psn, q.wmask)
	slot := uint32(psn) & q.wmask
	r.flags[slot] = 0
	if p.Opcode.IsLast() {
		r.flags[slot] = rxLast
		if p.Opcode.HasImm() {
			r.flags[slot] |= rxImm
			r.imm[slot], r.rqmsn[slot], r.mlen[slot] = p.Imm, p.RQMSN, p.DMALen
		}
	}
	r.rcvdBytes += uint32(n)
	q.stats.RxBytes += uint64(n)
	if !r.everRx || now-r.lastRx >= q.revFresh() {
		r.rxSince = now
	}
	r.lastRx, r.everRx = now, true
	r.sinceRevProbe++
	ooo := d != 1
	if ooo {
		q.stats.RxOOO++
		r.ooo++
	}
	newHole := psn.Diff(r.highest) > 1
	// A packet more than 63 PSNs behind the highest is outside the bitmap
	// of a SACK triggered at the top: unless it triggers a SACK of its
	// own, nothing reports it while a lower hole holds cack, and the
	// sender declares it lost and blames its healthy EV.
	late := d < r.highest.Diff(r.cack)-63
	if psn.After(r.highest) {
		r.highest = psn
	}
	if d == 1 {
		r.nakSent = false
		q.advance()
	}
	// Coalescing policy (docs/engine.md): CE, retransmissions, AckReq and
	// packets that open a new hole are answered at once; the rest every
	// AckEvery packets or AckDelay after the first unanswered one.
	if q.alwaysSkip(p.EV, trig.m == wire.MSkipOnce) {
		trig.m = wire.MAlwaysSkip
	}
	if p.AckReq && e.cfg.TransportACK {
		e.queueCtrl(ctrlItem{kind: ctrlAck, q: q, port: port})
	}
	if trig.m != wire.MNone || p.Rtx || p.AckReq || (newHole && !e.cfg.CoalesceHoles) {
		q.sackNow(trig)
		return
	}
	if late {
		// Its own SACK (the bitmap then ends at it), outside the
		// coalescing count: the packets pending there are near the top
		// and still need the SACK that covers them.
		if e.cfg.CoalesceHoles {
			q.coalesceLate(trig)
			return
		}
		e.queueCtrl(trig)
		return
	}
	q.coalesce(trig)
}

// coalesce counts a packet toward the next coalesced SACK: after AckEvery
// packets or AckDelay after the first unanswered one.
func (q *qp) coalesce(trig ctrlItem) {
	r := &q.rx
	if r.ackPending == 0 {
		r.ackDeadline = q.e.now + q.e.cfg.AckDelay
	}
	r.ackPending++
	r.trig = trig
	if r.ackPending >= q.e.cfg.AckEvery {
		q.sackNow(trig)
	}
}

// advance moves cack over arrived PSNs, counting completed messages and
// delivering immediates in order (every earlier message has then landed).
func (q *qp) advance() {
	r := &q.rx
	for {
		nx := r.cack.Add(1)
		if !r.has(nx, q.wmask) {
			return
		}
		r.clear(nx, q.wmask)
		r.cack = nx
		slot := uint32(nx) & q.wmask
		if f := r.flags[slot]; f&rxLast != 0 {
			q.stats.MsgsReceived++
			if f&rxImm != 0 {
				r.deliveredRQMSN = r.rqmsn[slot]
				q.stats.ImmDelivered++
				q.e.complete(Completion{Kind: CompRecvImm, QPN: q.qpn, Imm: r.imm[slot], RQMSN: r.rqmsn[slot], Len: r.mlen[slot]})
			}
			r.flags[slot] = 0
		}
	}
}

// coalesceLate counts a late arrival toward a SACK of the late ones: sent
// after AckEvery of them or AckDelay after the first, or at once when the
// new one and the pending ones no longer fit one bitmap (64 PSNs ending at
// the highest of them). While it waits, the highest only grows, so that
// SACK's bitmap still ends at its trigger; and once cack passes the
// trigger, every pending late PSN is acknowledged cumulatively.
func (q *qp) coalesceLate(trig ctrlItem) {
	r := &q.rx
	if r.latePending > 0 {
		lo, hi := r.lateLo, r.lateTrig.psn
		if trig.psn.Before(lo) {
			lo = trig.psn
		}
		if hi.Before(trig.psn) {
			hi = trig.psn
		}
		if hi.Diff(lo) > 63 {
			q.e.queueCtrl(r.lateTrig)
			r.latePending = 0
		}
	}
	if r.latePending == 0 {
		r.lateLo, r.lateTrig = trig.psn, trig
		r.lateDeadline = q.e.now + q.e.cfg.AckDelay
	} else {
		if trig.psn.Before(r.lateLo) {
			r.lateLo = trig.psn
		}
		if r.lateTrig.psn.Before(trig.psn) {
			r.lateTrig = trig
		}
	}
	r.latePending++
	if r.latePending >= q.e.cfg.AckEvery {
		q.e.queueCtrl(r.lateTrig)
		r.latePending = 0
	}
}

func (q *qp) sackNow(trig ctrlItem) {
	q.rx.ackPending = 0
	q.e.queueCtrl(trig)
}

func (q *qp) nack(trig ctrlItem, reason wire.NackReason) {
	trig.kind, trig.reason = ctrlNACK, reason
	q.stats.NACKsSent[reason]++
	q.e.queueCtrl(trig)
}

// handleProbe answers a PETH with a SACK pr=1 reflecting its EV.
func (q *qp) handleProbe(port wire.Plane, p *wire.Packet) {
	q.stats.RxProbe++
	it := ctrlItem{kind: ctrlProbeResp, q: q, port: port, ev: p.EV, probeID: p.Probe.ProbeID, ts: p.Probe.Timestamp}
	if p.ECN == wire.ECNCE {
		it.m = wire.MSkipOnce
	}
	q.e.queueCtrl(it)
}

// pollControl emits a due coalesced SACK and due probes.
func (q *qp) pollControl(now Time, emit func(wire.Plane, []byte)) {
	if q.state != QPReady {
		return
	}
	r := &q.rx
	if r.ackPending > 0 && now >= r.ackDeadline {
		r.ackPending = 0
		q.sendSACK(r.trig, emit)
	}
	if r.latePending > 0 && now >= r.lateDeadline {
		r.latePending = 0
		q.sendSACK(r.lateTrig, emit)
	}
	if q.nBad > 0 && now >= q.nextProbeScan {
		q.probeBad(now, emit)
	}
	if now >= q.revProbeAt() {
		q.probeReverse(now, emit)
	}
}

func (q *qp) sendSACK(it ctrlItem, emit func(wire.Plane, []byte)) {
	e := q.e
	r := &q.rx
	t, pl, ok := q.startCtrl(wire.OpSACK, r.cack)
	if !ok {
		return
	}
	s := &t.SACK
	s.M, s.Entropy = it.m, it.ev
	s.SPDCID, s.DPDCID = uint16(q.qpn), uint16(q.remote.QPN)
	s.CackPSN = r.cack
	s.MPR = uint8(q.W / 128)
	if it.kind == ctrlProbeResp {
		s.Probe = true
		s.AckPSNOffset = int16(it.probeID)
	} else {
		s.AckPSNOffset = int16(it.psn.Diff(r.cack))
	}
	// The bitmap covers the 64 most recent PSNs: it ends at the highest
	// PSN received (or at the trigger, if that arrived later than 64 behind
	// it) and never starts before cack+1. Consecutive SACKs overlap, so
	// every arrival is reported many times and a lost SACK loses nothing.
	off := int32(1)
	if it.kind != ctrlProbeResp {
		end := r.highest.Diff(r.cack)
		if d := it.psn.Diff(r.cack); d > 0 && d < end-63 {
			end = d
		}
		if end > 64 {
			off = end - 63
		}
	}
	if q.cfg.Transport == MRC {
		base := r.cack.Add(int(off))
		var bm uint64
		for i := 0; i < 64; i++ {
			if int(off)+i > q.W {
				break
			}
			if r.has(base.Add(i), q.wmask) {
				bm |= 1 << i
			}
		}
		s.Bitmap = bm
	}
	s.SackOffset = int16(off)
	s.TSEcho = it.ts
	s.OOOCount = uint16(r.ooo & 0x7FFF)
	s.RcvdBytes = r.rcvdBytes >> 8 & 0xFFFFFF
	r.dupAnswered = false
	q.stats.TxSACK++
	e.emitFrame(pl, emit)
}

func (q *qp) sendNACK(it ctrlItem, emit func(wire.Plane, []byte)) {
	e := q.e
	t, pl, ok := q.startCtrl(wire.OpNACK, it.psn)
	if !ok {
		return
	}
	t.NACK = wire.NACKFields{Reason: it.reason, Entropy: it.ev, SPDCID: uint16(q.qpn), DPDCID: uint16(q.remote.QPN),
		NackPSN: it.psn, Timestamp: it.ts}
	q.stats.TxNACK++
	e.emitFrame(pl, emit)
}

// sendTransportACK emits a RoCEv2 ACK: AETH syndrome 0x1F (ACK, credits
// not used), MSN = messages completed, BTH PSN = the cumulative ack.
func (q *qp) sendTransportACK(emit func(wire.Plane, []byte)) {
	e := q.e
	t, pl, ok := q.startCtrl(wire.OpAck, q.rx.cack)
	if !ok {
		return
	}
	t.Syndrome, t.AckMSN = 0x1F, uint32(q.stats.MsgsReceived)&0xFFFFFF
	q.stats.TxAck++
	e.emitFrame(pl, emit)
}

func (q *qp) sendNAKSeq(it ctrlItem, emit func(wire.Plane, []byte)) {
	e := q.e
	t, pl, ok := q.startCtrl(wire.OpAck, it.psn)
	if !ok {
		return
	}
	t.Syndrome = 0x60 // NAK, PSN sequence error (IBTA)
	q.stats.TxNACK++
	e.emitFrame(pl, emit)
}

// startCtrl prepares e.tx for a control packet (SACK, NACK, ACK) to the peer
// on a reverse EV, in the CONTROL class. ok is false (and TxNoRoute counted)
// when no reverse EV or route exists.
func (q *qp) startCtrl(op wire.Opcode, psn wire.PSN) (t *wire.Packet, pl wire.Plane, ok bool) {
	e := q.e
	ev, ok := q.ctrlEV()
	if !ok {
		e.stats.TxNoRoute++
		return nil, 0, false
	}
	e.resetTx()
	pl, ok = e.fillNet(q.peer, ev)
	if !ok {
		e.stats.TxNoRoute++
		return nil, 0, false
	}
	t = &e.tx
	t.DSCP, t.ECN = wire.DSCPControl, wire.ECNNotECT
	t.Opcode, t.DestQP, t.PSN = op, q.remote.QPN, psn
	return t, pl, true
}
