package mrc

import (
	"fmt"
	"math"

	"github.com/softmrc/softmrc/internal/wire"
)

// Defaults (docs/engine.md).
const (
	defaultNumEVs       = 128
	maxNumEVs           = 256
	defaultReserve      = 8
	defaultWindow       = 1024
	maxWindow           = 8192
	minWindow           = 128 // one MPR unit
	defaultMaxWImm      = 64
	defaultSendQueue    = 1024
	defaultAckTimeout   = 1 * Millisecond
	defaultMinRTO       = 20 * Microsecond
	defaultMaxRTO       = 64 * Millisecond
	defaultRetryLimit   = 7
	defaultRetryTimeout = 1 * Second
	defaultNoEV         = 100 * Millisecond
	defaultProbeOK      = 1
	minProbeInterval    = 10 * Microsecond
	minReorder          = 4 * Microsecond
	maxProbes           = 64
	revPerPlane         = 2
	groupFails          = 2   // failures after the group's last ACK that condemn the group
	maxGroupProbeGap    = 8   // probe intervals between probes of a condemned group, at most (groupProbeGap)
	condemnedProbeData  = 16  // data packets the QP sends on a condemned group's plane between its probes (groupProbeRoom)
	maxCondemnedWait    = 256 // probe intervals a condemned group's probe waits for them, at most
	condemnedGateMisses = 16  // probes a condemned group misses before its probes wait for data

	// A reverse EV validated (answered probe, or a SACK for our own data
	// sent on it) within revFreshRTTs smoothed RTTs, and at least
	// minRevFresh ago, counts as validated recently: no reverse probe.
	revFreshRTTs = 8
	minRevFresh  = 100 * Microsecond
	// revProbePkts: a receiving QP sends at most one reverse probe per
	// this many data packets received, or per revFresh when they come
	// slower than that (revProbeAt). The brief's "about once per RTT"
	// assumes an RTT of many packets: at 100 Gb/s and ~10 µs it is one
	// probe per ~60 packets of 2 KiB. Where the RTT is shorter than a
	// packet's time (the testbed: emulated links of 50-100 Mbit/s,
	// 0.2-0.3 ms per packet, an srtt of 0.1 ms of host latency) once per
	// RTT was two to three probes per data packet, and their answers took
	// ~9 % of the data direction's link (mrc-lab S8, h9: 119,270 probes
	// for 65,473 data packets). 8 caps that at ~0.6 % of the bytes and
	// leaves the simulator's fabrics, a dozen packets per RTT, as they were
	// (TestScenarioRandomLoss at 5 % loss: 0.613 median over its seeds with
	// 8, 0.612 without the cap, 0.589 with 16).
	revProbePkts     = 8
	defaultKeepAlive = 100 * Millisecond

	defaultAlwaysSkip = 128 // consecutive CE-marked packets of an EV (over ≥ 1 RTT) for M=ALWAYS_SKIP
	ceSlots           = 64  // per-QP table of CE streaks (direct-mapped by EV)
)

func (c *QPConfig) setDefaults() error {
	if c.Transport > RoCE {
		return configErr("unknown transport %d", c.Transport)
	}
	if c.NumEVs == 0 {
		c.NumEVs = defaultNumEVs
	}
	if c.NumEVs < 1 || c.NumEVs > maxNumEVs {
		return configErr("NumEVs = %d, want 1..%d", c.NumEVs, maxNumEVs)
	}
	if c.ReservePerPlane == 0 {
		c.ReservePerPlane = defaultReserve
	}
	if c.ReservePerPlane < 0 {
		c.ReservePerPlane = 0
	}
	if c.Window == 0 {
		c.Window = defaultWindow
	}
	if c.Window < minWindow || c.Window > maxWindow || c.Window&(c.Window-1) != 0 {
		return configErr("Window = %d packets, want a power of two in 128..%d (MPR units of 128)", c.Window, maxWindow)
	}
	if c.MaxWImm == 0 {
		c.MaxWImm = defaultMaxWImm
	}
	if c.SendQueue == 0 {
		c.SendQueue = defaultSendQueue
	}
	if c.SendQueue < 1 || c.SendQueue > 1<<20 {
		return configErr("SendQueue = %d, want 1..2^20", c.SendQueue)
	}
	c.SendQueue = 1 << ceilLog2(c.SendQueue)
	if c.AckTimeout == 0 {
		c.AckTimeout = defaultAckTimeout
	}
	if c.MinRTO == 0 {
		c.MinRTO = defaultMinRTO
	}
	if c.MaxRTO == 0 {
		c.MaxRTO = max(defaultMaxRTO, c.MinRTO)
	}
	if c.MaxAckTimeout == 0 {
		c.MaxAckTimeout = max(64*c.AckTimeout, c.MaxRTO)
	}
	if c.RetryTimeout == 0 {
		// At least one retransmission at the longest backoff.
		c.RetryTimeout = max(defaultRetryTimeout, c.MaxAckTimeout)
	}
	if c.RetryLimit == 0 {
		c.RetryLimit = defaultRetryLimit
	}
	if c.NoEVTimeout == 0 {
		c.NoEVTimeout = defaultNoEV
	}
	if c.KeepAlive == 0 {
		c.KeepAlive = defaultKeepAlive
	}
	if c.ProbeSuccesses == 0 {
		c.ProbeSuccesses = defaultProbeOK
	}
	if c.AckTimeout < 0 || c.MinRTO < 0 || c.MaxRTO < c.MinRTO || c.MaxAckTimeout < 0 || c.ProbeInterval < 0 || c.ReorderWindow < 0 {
		return configErr("negative durations")
	}
	return nil
}

func ceilLog2(n int) int {
	k := 0
	for 1<<k < n {
		k++
	}
	return k
}

// evEntry is one EV of a QP's set (active or reserve).
type evEntry struct {
	ev        wire.EV
	plane     wire.Plane
	state     EVState
	active    bool
	pos       int32 // a slot of q.order holding it, when active
	slots     int32 // slots of q.order holding it (more than 1: reused, see replace)
	probeOK   int
	probeOut  bool
	nextProbe Time
	w         float64 // share of a GOOD EV's packets it carries (1 when GOOD)
	credit    float64 // deficit round robin credit while SKIP
	lastCut   Time    // when its weight was last cut (at most once per RTT)
	grp       int32   // index in qp.grps: EVs with the same plane and T1
	borrowed  bool    // active in a slot whose EV belonged to another group
	byList    bool    // DENIED by the engine-wide denylist (deny.go)
	byQP      bool    // DENIED by Deny/DenyPlane on this QP (or QPConfig.Deny)
	c         EVCounters
}

// evGroup is the EVs of a QP that share a plane and a T1 field, i.e. the
// same T0 uplink and T1 (in SRv6 mode: the same first hops). A dead link or
// switch kills the whole group at once, so evidence against one EV of it is
// evidence against all of them when nothing sent through the group since
// has been acknowledged.
type evGroup struct {
	plane       wire.Plane
	t1          uint8
	lastAckSent Time // latest send time of a packet acknowledged through the group
	fails       int  // EVs failed on packets sent after lastAckSent

	// A condemned group (set dead at deadAt when fails reached
	// groupFails) is probed as one path (probeBad) until a probe of it is
	// answered or a packet sent through it after deadAt is acknowledged: a
	// late acknowledgement of a packet sent before the fault resets fails
	// but proves nothing about the path now. Its next probe goes at probeAt,
	// and probeMiss counts the probes sent since it was condemned, which
	// stretch the gap (groupProbeGap).
	dead      bool
	deadAt    Time
	probeAt   Time
	probeMiss int
	// probeSentAt and probeData are the time of the group's latest probe
	// as a condemned group and the QP's data packets on its plane then
	// (planeSent): the next waits for condemnedProbeData more
	// (groupProbeRoom).
	probeSentAt Time
	probeData   uint64

	// Flap damping of the path (damp.go, pathAnswered): lost counts the
	// group's probes lost since it was condemned, okSent is the send time
	// of its latest answered probe (earlier probes that time out later
	// are stale), and a held group's EVs stay ASSUMED_BAD, probed as one
	// path, until it has answered through until. The outages themselves
	// are counted per peer and path (peer.pathDamp), for every QP.
	lost   int
	okSent Time
	missed int  // probes lost in a row while held and not condemned
	missAt Time // send time of the first of them
	held   bool
	until  Time
}

// txMsg is a posted WR.
type txMsg struct {
	wrID     uint64
	src      []byte
	va       uint64
	rkey     uint32
	length   uint32
	imm      uint32
	hasImm   bool
	unsig    bool // WR.Unsignaled
	msn      wire.MSN
	rqmsn    wire.MSN
	firstPSN wire.PSN
	npkts    uint32
	assigned uint32 // packets given a PSN so far
}

// txPkt is the sender's record of one PSN.
type txPkt struct {
	msg    uint64 // absolute index of its message
	off    uint32
	n      uint32
	sentAt Time
	first  Time   // send time of the first transmission (rttSample)
	ev     int32  // evs index of the latest transmission (-1 none)
	seq    uint32 // transmission number, matches timer entries
	ts     uint16
	tries  uint8 // retransmissions
	tos    uint8 // ACK timeouts (the RTO backs off per timeout, not per retransmission)
	flags  uint8
}

const (
	pktInFlight = 1 << iota // counted in the destination's inflight bytes
	pktAcked
	pktQueued // in the retransmit queue
	pktSent   // transmitted at least once
	pktHeld   // refused as beyond the responder's window: resent once inside it
)

// probeRec is an outstanding probe (PETH) waiting for its SACK pr=1.
type probeRec struct {
	used     bool
	id       uint16
	ev       int32 // evs index, or -1 for a reverse-set probe
	rev      int   // reverse slot (plane*revPerPlane+k) when ev < 0
	revEV    wire.EV
	sentAt   Time
	deadline Time
}

// revEntry is one EV of the reverse set (for SACKs and NACKs).
type revEntry struct {
	ev    wire.EV
	ok    bool // validated by an answered probe or by a SACK of our data on it
	valid bool // slot in use
	at    Time // latest validation
}

type qp struct {
	e         *Engine
	qpn       wire.QPN
	cfg       QPConfig
	state     QPState
	status    Status
	failCause FailCause
	remote    QPInfo
	peer      *peer
	W         int
	wmask     uint32

	// sender
	msgs           []txMsg
	msgHead        uint64 // oldest uncompleted
	msgTail        uint64 // next free
	segMsg         uint64 // message being cut into packets
	msn            wire.MSN
	rqmsn          wire.MSN
	wimmOut        int
	sndUna, sndNxt wire.PSN
	sndW           int // PSNs in flight allowed: min(W, the responder's window)
	nHeld          int // packets with pktHeld
	pkts           []txPkt
	rtxQ           []wire.PSN
	rtxHd, rtxN    int
	timers         timerQueue
	txSeq          uint32
	srtt, rttvar   Time
	// initBackoff doubles the initial timeout (AckTimeout) once per
	// unanswered round before the first RTT sample, from a packet or probe
	// sent at or after initBackoffAt (RFC 6298's backed-off timer, kept
	// until a valid sample: send.go initialRTO).
	initBackoff   uint8
	initBackoffAt Time
	// probeBackoff doubles the probe timeout (up to MaxRTO) once per
	// unanswered round of probes while the QP has no usable EV, from a
	// probe sent at or after probeBackoffAt; an answered probe or a new
	// acknowledgement ends it (probe.go probeTimeout).
	probeBackoff   uint8
	probeBackoffAt Time
	rackSentAt     Time
	noEVSince      Time
	lastProgress   Time // latest new acknowledgement, or the start of the outstanding data
	// blockedSince is when a send attempt first found work queued, nothing
	// outstanding and no way to send (no usable EV, a closed window, no
	// port room); 0 once a packet goes out. RetryTimeout ends a QP blocked
	// that long (runTimers), as it ends one whose data is never acknowledged.
	blockedSince Time
	lastSend     Time

	// EV set
	evs           []evEntry
	evIdx         map[wire.EV]int32
	grps          []evGroup
	skipRec       float64 // SKIP weight factor per clean acknowledgement (unskip)
	skipCut       float64 // SKIP weight factor per mark (skipEV)
	order         []int32
	cur           int
	nBad          int
	nextProbeScan Time
	nPathHeld     int // groups held out as flapping (pathDamp)
	ctrlCur       int
	gbnEV         [wire.MaxPlanes]int32
	gbnPrimary    wire.Plane

	// reverse set and probes
	rev          [wire.MaxPlanes * revPerPlane]revEntry
	revCur       int
	nextRevProbe Time
	connectedAt  Time
	revLearnAt   Time // latest reverse EV validated by a SACK of our data
	revProbeOK   Time // latest answered reverse probe
	probes       [maxProbes]probeRec
	probeSeq     uint16
	nProbes      int
	probeHi      int                    // every record in use is below it (allocProbe)
	planeSent    [wire.MaxPlanes]uint64 // data packets sent on each plane (groupProbeRoom)

	rx    rxState
	stats QPCounters
	roce  *roceState // RoCE transport only (roce.go)
}

func newQP(e *Engine, qpn wire.QPN, c QPConfig) *qp {
	if c.StartPSN == 0 {
		c.StartPSN = wire.PSN(e.rng.Uint32() & wire.PSNMask)
	}
	c.StartPSN &= wire.PSNMask
	q := &qp{e: e, qpn: qpn, cfg: c, W: c.Window, wmask: uint32(c.Window - 1),
		msgs: make([]txMsg, c.SendQueue), pkts: make([]txPkt, c.Window), rtxQ: make([]wire.PSN, c.Window),
		sndUna: c.StartPSN, sndNxt: c.StartPSN}
	q.timers.init(2 * c.Window)
	return q
}

// usablePlanes are the planes both ends have an address on.
func (q *qp) planesMask() uint32 {
	var m uint32
	for i := 0; i < q.e.cfg.Planes; i++ {
		if !q.e.cfg.Addrs[i].IsZero() && !q.remote.Addrs[i].IsZero() {
			m |= 1 << i
		}
	}
	return m
}

func (q *qp) connect(remote QPInfo, p *peer) error {
	q.remote, q.peer = remote, p
	// The responder tracks at most its own Window PSNs beyond its cack;
	// sending further draws PSN_OOR NACKs. Unknown (0): the smallest
	// window there is, until the first SACK's mpr tells.
	q.sndW = min(q.W, minWindow)
	if remote.Window > 0 {
		q.sndW = min(q.W, remote.Window)
	}
	p.cc.setMax(q.W)
	mask := q.planesMask()
	if mask == 0 {
		return configErr("no plane where both ends have an address")
	}
	var planes []wire.Plane
	for i := 0; i < q.e.cfg.Planes; i++ {
		if mask&(1<<i) != 0 {
			planes = append(planes, wire.Plane(i))
		}
	}
	per := q.cfg.NumEVs / len(planes)
	if per < 1 {
		per = 1
	}
	if q.cfg.Transport.inOrder() {
		per = 1
	}
	res := q.cfg.ReservePerPlane
	if q.cfg.Transport.inOrder() {
		res = 0
	}
	rng := q.e.rng
	if len(q.cfg.EVs) > 0 {
		if err := q.explicitEVs(mask); err != nil {
			return err
		}
	} else if q.cfg.Transport == RoCE {
		q.roceEVs(planes, p)
	} else {
		q.generateEVs(planes, per, res, p)
	}
	q.groupEVs()
	for i := range q.evs {
		if q.evs[i].active {
			q.evs[i].pos, q.evs[i].slots = int32(len(q.order)), 1
			q.order = append(q.order, int32(i))
		}
	}
	q.shuffle()
	// Each EV sees 1/len(order) of the QP's marks and acknowledgements
	// (skipRefEVs).
	f := min(1, skipRefEVs/float64(len(q.order)))
	q.skipCut, q.skipRec = math.Pow(skipDecrease, f), math.Pow(skipRecover, f)
	for i := range q.gbnEV {
		q.gbnEV[i] = -1
	}
	for i := range q.evs {
		if q.evs[i].active && q.gbnEV[q.evs[i].plane] < 0 {
			q.gbnEV[q.evs[i].plane] = int32(i)
		}
	}
	q.gbnPrimary = planes[rng.IntN(len(planes))]
	// Reverse set: one unvalidated EV per plane to start with; probes and
	// data refine it.
	for _, pl := range planes {
		if ev, ok := q.e.freshEV(p, pl); ok {
			q.rev[int(pl)*revPerPlane] = revEntry{ev: ev, valid: true}
		}
	}
	for _, d := range q.cfg.Deny {
		q.setEVAdmin(d, true)
	}
	q.applyDenylist()
	if q.cfg.Transport == RoCE {
		if err := q.roceConnect(); err != nil {
			return err
		}
	}
	q.rx.init(q, remote.StartPSN)
	q.connectedAt = q.e.now
	q.state = QPReady
	return nil
}

// generateEVs draws per active and res reserve EVs on every plane.
func (q *qp) generateEVs(planes []wire.Plane, per, res int, p *peer) {
	rng := q.e.rng
	total := (per + res) * len(planes)
	q.evs = make([]evEntry, 0, total)
	q.evIdx = make(map[wire.EV]int32, total)
	q.order = make([]int32, 0, per*len(planes))
	for _, pl := range planes {
		nT1 := 256
		if p.paths != nil {
			nT1 = p.paths.T1Count()
		}
		// Stratified over T1s from a random offset: equal load per T1.
		off := rng.IntN(nT1)
		for k := 0; k < per+res; k++ {
			var ev wire.EV
			for {
				ev = wire.MakeEV(pl, uint8((off+k)%nT1), rng.Uint32())
				if _, dup := q.evIdx[ev]; !dup {
					break
				}
			}
			idx := int32(len(q.evs))
			q.evIdx[ev] = idx
			q.evs = append(q.evs, evEntry{ev: ev, plane: pl, active: k < per, pos: -1, w: 1})
		}
	}
}

// groupEVs sorts the EV set into groups by plane and T1 field.
func (q *qp) groupEVs() {
	for i := range q.evs {
		x := &q.evs[i]
		x.grp = -1
		for g := range q.grps {
			if q.grps[g].plane == x.plane && q.grps[g].t1 == x.ev.T1() {
				x.grp = int32(g)
				break
			}
		}
		if x.grp < 0 {
			x.grp = int32(len(q.grps))
			q.grps = append(q.grps, evGroup{plane: x.plane, t1: x.ev.T1()})
		}
	}
}

// explicitEVs installs the configured EV set (EXPLICIT profile).
func (q *qp) explicitEVs(mask uint32) error {
	n := len(q.cfg.EVs) + len(q.cfg.Reserve)
	if len(q.cfg.EVs) > maxNumEVs {
		return configErr("%d explicit EVs, at most %d", len(q.cfg.EVs), maxNumEVs)
	}
	q.evs = make([]evEntry, 0, n)
	q.evIdx = make(map[wire.EV]int32, n)
	q.order = make([]int32, 0, len(q.cfg.EVs))
	for i, ev := range append(append([]wire.EV(nil), q.cfg.EVs...), q.cfg.Reserve...) {
		if mask&(1<<ev.Plane()) == 0 {
			return configErr("EV %v names plane %d, which one end lacks", ev, ev.Plane())
		}
		if _, dup := q.evIdx[ev]; dup {
			return configErr("EV %v listed twice", ev)
		}
		q.evIdx[ev] = int32(len(q.evs))
		q.evs = append(q.evs, evEntry{ev: ev, plane: ev.Plane(), active: i < len(q.cfg.EVs), pos: -1, w: 1})
	}
	return nil
}

func (q *qp) post(wr WR) error {
	switch wr.Op {
	case OpWrite, OpWriteImm:
	default:
		return fmt.Errorf("%w: got %v", ErrUnsupportedOp, wr.Op)
	}
	if q.state != QPReady {
		return fmt.Errorf("%w: post needs READY, QP %v is %v", ErrQPState, q.qpn, q.state)
	}
	if q.msgTail-q.msgHead >= uint64(len(q.msgs)) {
		return ErrQueueFull
	}
	src := wr.Local
	if src == nil {
		if wr.Len > 1<<31 {
			return ErrTooLarge
		}
		// A zero-length write reads no memory, so it names no region
		// (IBTA: a WR without scatter/gather entries).
		if wr.Len > 0 {
			r, ok := q.e.mem.Region(q.cfg.PD, wr.LKey, LocalKey)
			ok = ok && r.Access&AccessLocalRead != 0
			if ok {
				src, ok = r.Slice(wr.Addr, wr.Len)
			}
			if !ok {
				return fmt.Errorf("%w: lkey 0x%x addr 0x%x len %d in protection domain %d", ErrLocalAccess, wr.LKey, wr.Addr, wr.Len, q.cfg.PD)
			}
		}
	}
	if len(src) > 1<<31 {
		return ErrTooLarge
	}
	imm := wr.Op == OpWriteImm
	if imm {
		lim := q.cfg.MaxWImm
		if q.remote.MaxWImm > 0 && q.remote.MaxWImm < lim {
			lim = q.remote.MaxWImm
		}
		if q.wimmOut >= lim {
			return fmt.Errorf("%w (%d in flight, cap %d)", ErrWImmLimit, q.wimmOut, lim)
		}
		q.wimmOut++
		q.rqmsn++
	}
	mtu := q.e.cfg.MTU
	np := (len(src) + mtu - 1) / mtu
	if np == 0 {
		np = 1
	}
	m := &q.msgs[q.msgTail&uint64(len(q.msgs)-1)]
	*m = txMsg{wrID: wr.ID, src: src, va: wr.RemoteVA, rkey: wr.RKey, length: uint32(len(src)),
		imm: wr.Imm, hasImm: imm, unsig: wr.Unsignaled, msn: q.msn, rqmsn: q.rqmsn, npkts: uint32(np)}
	q.msn++
	q.msgTail++
	return nil
}

// fail moves the QP to error and flushes its posted WRs.
func (q *qp) fail(s Status, cause FailCause) {
	if q.state == QPError {
		return
	}
	q.state, q.status, q.failCause = QPError, s, cause
	q.e.complete(Completion{Kind: CompQPError, Status: s, QPN: q.qpn})
	q.flush(s)
	q.release()
}

// flush completes every posted, uncompleted WR: the oldest with status
// first (the one that failed), the rest with StatusFlushed.
func (q *qp) flush(first Status) {
	st := first
	for i := q.msgHead; i < q.msgTail; i++ {
		m := &q.msgs[i&uint64(len(q.msgs)-1)]
		q.e.complete(Completion{Kind: CompSend, Status: st, QPN: q.qpn, WRID: m.wrID})
		st = StatusFlushed
		m.src = nil
		if m.hasImm {
			q.wimmOut--
		}
	}
	q.msgHead = q.msgTail
	q.segMsg = q.msgTail
}

// release gives back the destination window this QP holds and drops its
// timers and retransmissions.
func (q *qp) release() {
	if q.peer != nil {
		for psn := q.sndUna; psn.Before(q.sndNxt); psn = psn.Add(1) {
			pk := &q.pkts[uint32(psn)&q.wmask]
			if pk.flags&pktInFlight != 0 {
				q.peer.cc.inflight -= int(pk.n)
				pk.flags &^= pktInFlight
			}
		}
	}
	q.sndUna = q.sndNxt
	q.rtxN, q.nHeld = 0, 0
	q.timers.reset()
}

// sendableAt is when a data packet could go out as far as EVs and port room
// go: now, the time a port with a usable EV frees up, or Never.
func (q *qp) sendableAt() Time {
	e := q.e
	t := Never
	check := func(pl wire.Plane) bool {
		if e.portRoom(pl) {
			return true
		}
		t = min(t, e.portBusyUntil(pl)-e.cfg.PortQueue+1)
		return false
	}
	if q.cfg.Transport.inOrder() {
		idx := q.gbnPick()
		if idx == -1 {
			return Never
		}
		if idx >= 0 {
			return e.now
		}
		pl := q.gbnPrimary
		if !q.planeOK(pl) {
			for p, i := range q.gbnEV {
				if i >= 0 && q.evs[i].state != EVDenied && q.planeOK(wire.Plane(p)) {
					pl = wire.Plane(p)
					break
				}
			}
		}
		check(pl)
		return t
	}
	for _, idx := range q.order {
		x := &q.evs[idx]
		if (x.state == EVGood || x.state == EVSkip) && q.planeOK(x.plane) && check(x.plane) {
			return e.now
		}
	}
	return t
}

func (q *qp) snapshot(s *QPSnapshot) {
	evs, rev := s.EVs[:0], s.ReverseEVs[:0]
	*s = QPSnapshot{QPN: q.qpn, State: q.state, Status: q.status, FailCause: q.failCause, Transport: q.cfg.Transport, Peer: q.remote,
		SRTT: q.srtt, RTTVar: q.rttvar, SndUna: q.sndUna, SndNxt: q.sndNxt, RcvCack: q.rx.cack, Counters: q.stats}
	q.roceSnapshot(s)
	if q.peer != nil {
		s.Cwnd, s.InFlight, s.RemoteUp = int(q.peer.cc.cwnd), q.peer.cc.inflight, q.peer.remoteUp
	}
	for i := range q.evs {
		x := &q.evs[i]
		evs = append(evs, EVSnapshot{EV: x.ev, Plane: x.plane, State: x.state, Active: x.active, Slots: int(x.slots), EVCounters: x.c})
	}
	for _, r := range q.rev {
		if r.valid {
			rev = append(rev, r.ev)
		}
	}
	s.EVs, s.ReverseEVs = evs, rev
}

// timerDeadline is the earliest deadline runTimers acts on.
func (q *qp) timerDeadline() Time {
	d := Never
	if t, ok := q.timers.peek(); ok && t < d {
		d = t
	}
	if t := q.roceTimerAt(); t < d {
		d = t
	}
	if q.cfg.RetryTimeout > 0 && q.roce == nil && q.sndUna != q.sndNxt && q.lastProgress+q.cfg.RetryTimeout < d {
		d = q.lastProgress + q.cfg.RetryTimeout
	}
	if q.cfg.RetryTimeout > 0 && q.blockedSince != 0 && q.blockedSince+q.cfg.RetryTimeout < d {
		d = q.blockedSince + q.cfg.RetryTimeout
	}
	if q.nProbes > 0 {
		for i := range q.activeProbes() {
			if q.probes[i].used && q.probes[i].deadline < d {
				d = q.probes[i].deadline
			}
		}
	}
	return d
}

// deadline is the earliest time this QP needs Poll; while the engine's
// timers are held (HoldTimers) their deadlines do not count.
func (q *qp) deadline() Time {
	if q.state != QPReady {
		return Never
	}
	now := q.e.now
	d := Never
	if !q.e.timersHeld { // runTimers' deadlines (HoldTimers)
		d = q.timerDeadline()
	}
	if q.rx.ackPending > 0 && q.rx.ackDeadline < d {
		d = q.rx.ackDeadline
	}
	if q.rx.latePending > 0 && q.rx.lateDeadline < d {
		d = q.rx.lateDeadline
	}
	if q.nBad > 0 && q.nextProbeScan < d {
		d = q.nextProbeScan
	}
	if t := q.revProbeAt(); t < d {
		d = t
	}
	if d <= now {
		return d
	}
	if q.hasWork() {
		if q.ccOpen() {
			if t := q.rocePace(q.sendableAt()); t < Never {
				return max(now, min(d, t))
			}
			if q.noEVSince != 0 && q.noEVSince+q.cfg.NoEVTimeout < d {
				d = q.noEVSince + q.cfg.NoEVTimeout
			}
		}
	}
	return d
}
