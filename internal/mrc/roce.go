package mrc

import (
	"github.com/softmrc/softmrc/internal/dcqcn"
	"github.com/softmrc/softmrc/internal/wire"
)

// The RoCE transport (docs/roce.md) is the GoBackN QP mode plus three
// things a RoCEv2 RC NIC does and MRC does not:
//
//   - one path for the QP's life: a single EV derived from the QPN pair as
//     Linux derives a RoCEv2 QP's flow label and UDP source port, on one
//     plane, no failover, and the responder's ACKs, NAKs and CNPs ride the
//     responder QP's own path (the same hash, since it is symmetric);
//   - DCQCN (internal/dcqcn): the receiver turns CE marks into CNPs, the
//     sender paces at the DCQCN rate instead of the NSCC window;
//   - a trimmed packet is a plain loss: a RoCE NIC cannot parse a header-only
//     frame, so the responder drops it silently and the gap is found as
//     IBTA RC finds every gap (NAK sequence error, or the ACK timeout).
//
// Everything here hangs off qp.roce, nil for the other transports.

// defaultRoCELineRate is the DCQCN line rate when neither the port nor the
// QP config gives one (an unpaced engine): 100 Gb/s.
const defaultRoCELineRate = 100e9

// roceState is the per-QP state of the RoCE transport.
type roceState struct {
	rp *dcqcn.RP
	np dcqcn.NP
	ev wire.EV
	c  RoCECounters
	// retry count (IBTA RC retry_cnt, as rxe keeps it): retries since
	// sndUna last moved
	retries  int
	retryUna wire.PSN
	// The transport timer (roceTimerAt) runs while a packet is on the
	// wire: armed by the first packet that leaves with it stopped (armedAt),
	// restarted by progress (lastProgress), stopped by a retry, which puts
	// every unacknowledged packet back in the retransmission queue.
	armed   bool
	armedAt Time
}

// RoCECounters count the RoCE transport's own events of one QP.
type RoCECounters struct {
	TxCNP, RxCNP uint64 // CNPs sent (as notification point) and received
	CEMarked     uint64 // CE-marked data packets received
	TrimDropped  uint64 // trimmed data packets dropped as plain losses
	StaleNAK     uint64 // NAKs about a loss already gone back for (ignored)
}

// RoCESnapshot is the RoCE part of a QPSnapshot.
type RoCESnapshot struct {
	EV     wire.EV // the QP's one path
	Rate   float64 // DCQCN current rate RC, b/s
	Target float64 // DCQCN target rate RT, b/s
	Alpha  float64
	DCQCN  dcqcn.Counters
	RoCECounters
}

// RoCEFlowLabel is the 20-bit flow label Linux gives a RoCEv2 QP
// (rdma_calc_flow_label in include/rdma/ib_verbs.h, used by mlx5 and rxe
// when the application sets none): a hash of the QPN pair. The product
// makes it symmetric, so both ends of a connection compute the same value.
func RoCEFlowLabel(lqpn, rqpn wire.QPN) uint32 {
	v := uint64(lqpn) * uint64(rqpn)
	v ^= v >> 20
	v ^= v >> 40
	return uint32(v & 0xFFFFF)
}

// RoCESrcPort is the UDP source port Linux derives from a RoCEv2 flow label
// (rdma_flow_label_to_udp_sport): the low 14 bits folded with the high 6,
// in the range 0xC000..0xFFFF.
func RoCESrcPort(fl uint32) uint16 {
	lo, hi := fl&0x3FFF, fl&0xFC000
	lo ^= hi >> 14
	return uint16(lo | 0xC000)
}

// RoCEEV is the one EV of a RoCE QP between lqpn and rqpn over the given
// planes (nT1 T1s per plane; 0 or 256 in ECMP mode). The UDP source port is
// exactly Linux's (RoCESrcPort); the EV's other 16 bits, which ride in the
// flow label and name the plane and the T1 in this fabric, come from the
// same flow label: plane = planes[fl mod len(planes)], T1 = (fl >> 4) mod
// nT1, the free bits = fl's low 4. Both ends pick the same plane.
func RoCEEV(lqpn, rqpn wire.QPN, planes []wire.Plane, nT1 int) wire.EV {
	fl := RoCEFlowLabel(lqpn, rqpn)
	pl := planes[int(fl)%len(planes)]
	if nT1 <= 0 || nT1 > 256 {
		nT1 = 256
	}
	t1 := uint8(int(fl>>4) % nT1)
	return wire.MakeEV(pl, t1, (fl&0xF)<<16|uint32(RoCESrcPort(fl)))
}

// roceEVs installs the QP's one EV (instead of generateEVs).
func (q *qp) roceEVs(planes []wire.Plane, p *peer) {
	nT1 := 256
	if p.paths != nil {
		nT1 = p.paths.T1Count()
	}
	ev := RoCEEV(q.qpn, q.remote.QPN, planes, nT1)
	q.evs = []evEntry{{ev: ev, plane: ev.Plane(), active: true, pos: -1, w: 1}}
	q.evIdx = map[wire.EV]int32{ev: 0}
}

// roceConnect finishes Connect for a RoCE QP: the single path for data and
// for the control packets this QP sends, and DCQCN at the plane's rate.
func (q *qp) roceConnect() error {
	if len(q.evs) != 1 {
		return configErr("a RoCE QP has one path: give exactly one explicit EV and no reserve, or none (got %d)", len(q.evs))
	}
	ev := q.evs[0].ev
	q.gbnPrimary = ev.Plane()
	for i := range q.rev {
		q.rev[i] = revEntry{}
	}
	q.rev[int(ev.Plane())*revPerPlane] = revEntry{ev: ev, valid: true}
	c := q.cfg.DCQCN
	if c.LineRate == 0 {
		c.LineRate = defaultRoCELineRate
		if r := q.e.cfg.PortRates[ev.Plane()]; r > 0 {
			c.LineRate = r * 1e9
		} else if q.e.cfg.PortRate > 0 {
			c.LineRate = q.e.cfg.PortRate * 1e9
		}
	}
	rp, err := dcqcn.NewRP(c, int64(q.e.now))
	if err != nil {
		return configErr("%v", err)
	}
	q.roce = &roceState{rp: rp, np: dcqcn.NP{Interval: rp.Config().MinCNPInterval}, ev: ev, retryUna: q.sndUna}
	return nil
}

// roceRetry counts one retry (an ACK timeout or a NAK sequence error, both
// of which make the requester go back) and fails the QP with
// RETRY_EXCEEDED, reporting true, after RetryLimit retries without
// progress. As in IBTA RC (and rxe), progress, i.e. an acknowledgement that moves
// the oldest unacknowledged PSN, restores the count; RetryLimit 32 or more
// retries forever.
func (q *qp) roceRetry() bool {
	r := q.roce
	r.armed = false
	if q.sndUna != r.retryUna {
		r.retryUna, r.retries = q.sndUna, 0
	}
	r.retries++
	if q.cfg.RetryLimit >= 32 || r.retries <= q.cfg.RetryLimit {
		return false
	}
	q.fail(StatusRetryExceeded, FailRoCERetries)
	return true
}

// roceStaleNAK reports whether a NAK sequence error is about a loss the QP
// already went back for: a retry happened and no acknowledgement has moved
// sndUna since (the NAK itself acknowledges nothing new). It is then no new
// retry and no second go-back, which would resend the retransmissions
// already on the wire again (rxe: comp.started_retry, "avoid back-to-back
// retries"). Typically the NAK was queued behind the data and the
// transport timer fired first.
func (q *qp) roceStaleNAK() bool {
	r := q.roce
	return r != nil && r.retries > 0 && q.sndUna == r.retryUna
}

// roceTimerAt is when the QP's transport timer expires, Never when nothing
// is outstanding. IBTA RC keeps one timer per QP (the "transport timer",
// Local ACK Timeout): it starts when a packet leaves with the timer
// stopped and restarts on every acknowledgement that makes progress; rxe
// does the same with its retrans_timer. So it measures time without
// progress, not a packet's age: a deep queue that is acknowledged steadily
// never times out. (A timer per packet timed out the tail of every queue
// longer than the timeout and resent the whole window each time:
// TestRoCETransportTimer, and 64 MiB all-reduce with 16 QPs per peer on
// the testbed failing with RETRY_EXCEEDED.)
//
// A retry stops the timer until its first retransmission leaves (rxe: the
// timer has fired, and the requester re-arms it when it sends). Restarting
// it at the retry instead let it fire again while DCQCN's pacer still held
// the retransmission: each firing a retry with nothing resent, and a QP
// paced below one packet per timeout failed with RETRY_EXCEEDED on a single
// loss (TestRoCETimerWaitsForRetransmission).
func (q *qp) roceTimerAt() Time {
	if q.roce == nil || q.sndUna == q.sndNxt || !q.roce.armed {
		return Never
	}
	return max(q.lastProgress, q.roce.armedAt) + q.rto(0)
}

// roceTimers runs the transport timer: on expiry, go back to the oldest
// unacknowledged PSN and count a retry.
func (q *qp) roceTimers(now Time) {
	if q.roce == nil || q.roceTimerAt() > now {
		return
	}
	pk := q.slot(q.sndUna)
	q.stats.Timeouts++
	q.stats.Retries++
	if pk.ev >= 0 {
		q.evs[pk.ev].c.Timeouts++
	}
	q.pathFailedAt(pk.ev, pk.sentAt)
	q.goBack(q.sndUna)
	q.roceRetry()
}

// ccAllows reports whether congestion control lets a packet of n bytes go
// now: DCQCN's pacer for RoCE, the window otherwise.
func (q *qp) ccAllows(now Time, n int) bool {
	if q.roce != nil {
		return q.roce.rp.Ready(int64(now))
	}
	return q.peer.cc.canSend(now, n)
}

// ccOpen is ccAllows for the deadline computation: the pacer's time is
// folded in by rocePace instead.
func (q *qp) ccOpen() bool {
	return q.roce != nil || q.peer.cc.windowOpen(q.e.cfg.MTU)
}

// rocePace delays a send time t to the pacer's: DCQCN's, or that of a
// window below one packet (cc.go, sent).
func (q *qp) rocePace(t Time) Time {
	switch {
	case t == Never:
		return t
	case q.roce == nil:
		return max(t, q.peer.cc.nextSend)
	}
	return max(t, Time(q.roce.rp.NextSend()))
}

// roceSent (RoCE QPs only) tells DCQCN a frame of n bytes left at now, and arms the
// transport timer if it is stopped.
func (q *qp) roceSent(now Time, n int) {
	r := q.roce
	r.rp.OnSend(int64(now), n)
	if !r.armed {
		r.armed, r.armedAt = true, now
	}
}

// roceData is the notification point and the trim rule, run on every data
// packet of a RoCE QP before anything else. It reports whether the packet
// is consumed (dropped). A CE mark becomes a CNP (rate-limited by the NP)
// and is then cleared, so that the go-back-N receiver below acknowledges
// the packet as any other rather than with an immediate congestion SACK.
func (q *qp) roceData(p *wire.Packet) (drop bool) {
	r := q.roce
	if p.Trimmed {
		r.c.TrimDropped++
		return true
	}
	if p.ECN == wire.ECNCE {
		r.c.CEMarked++
		if r.np.OnCE(int64(q.e.now)) {
			q.e.queueCtrl(ctrlItem{kind: ctrlCNP, q: q})
		}
		p.ECN = wire.ECNECT0
	}
	return false
}

// sendCNP emits a RoCEv2 CNP to the peer QP on this QP's path.
func (q *qp) sendCNP(emit func(wire.Plane, []byte)) {
	_, pl, ok := q.startCtrl(wire.OpCNP, 0)
	if !ok {
		return
	}
	q.roce.c.TxCNP++
	q.e.stats.TxCNP++
	q.e.emitFrame(pl, emit)
}

// handleCNP is the reaction point: DCQCN cuts the rate.
func (q *qp) handleCNP() {
	if q.roce == nil {
		q.e.stats.RxDecodeErr++ // a CNP for an MRC QP: not ours to act on
		return
	}
	q.roce.c.RxCNP++
	q.e.stats.RxCNP++
	q.roce.rp.OnCNP(int64(q.e.now))
}

// roceSnapshot fills the RoCE part of a snapshot.
func (q *qp) roceSnapshot(s *QPSnapshot) {
	if q.roce == nil {
		return
	}
	r := q.roce
	now := int64(q.e.now)
	s.RoCE = &RoCESnapshot{EV: r.ev, Rate: r.rp.Rate(now), Target: r.rp.Target(now), Alpha: r.rp.Alpha(now),
		DCQCN: r.rp.Counters(), RoCECounters: r.c}
}
