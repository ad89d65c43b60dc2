package mrc

import (
	"fmt"
	"math/bits"
	"math/rand/v2"

	"github.com/softmrc/softmrc/internal/pathtmpl"
	"github.com/softmrc/softmrc/internal/wire"
)

// maxFrame bounds every frame the engine builds (4096 payload + headers).
const maxFrame = 4096 + 256

// Engine is one soft NIC's MRC transport: its QPs, ports and peers.
type Engine struct {
	cfg Config
	mem Memory
	rng *rand.Rand
	now Time

	qps    map[wire.QPN]*qp
	qpList []*qp
	rr     int // round-robin start for sending
	nextQP wire.QPN

	peers []*peer

	localUp uint32 // bit p = local port p up
	// localDamp holds flapping local ports out of use (damp.go).
	localDamp [wire.MaxPlanes]flapDamp
	portBusy  [wire.MaxPlanes]Time

	ctrl ctrlRing
	cq   []Completion
	cqHd int

	dec wire.Decoder
	rx  wire.Packet // decode target (engine-owned: no allocation per frame)
	tx  wire.Packet // encode source
	buf [maxFrame]byte

	// dst and commit are set only during PollInto: frames are then encoded
	// straight into the caller's buffers (see PollInto).
	dst    func(port wire.Plane) []byte
	commit func(port wire.Plane, n int)

	stats EngineCounters

	deny []DenyRule // engine-wide denylist (deny.go)

	// timersHeld: Poll runs no QP timers (HoldTimers).
	timersHeld bool
}

// peer is one destination host: the QPs to it share its congestion window
// (the QPCC of the spec), its port-status mask and its compiled paths.
type peer struct {
	key      wire.Addr128
	addrs    [wire.MaxPlanes]wire.Addr128
	paths    *pathtmpl.Paths
	tidx     int       // index of its template row (AnyPeer without a template)
	deny     *peerDeny // the engine's denylist resolved for it (nil: nothing denied)
	remoteUp uint32
	// remoteDamp holds the peer's flapping ports out of use (damp.go).
	remoteDamp [wire.MaxPlanes]flapDamp
	// pathDamp counts the outages of each path (plane, T1 index) toward
	// the peer seen by any of its QPs (damp.go, pathAnswered); made on
	// first use.
	pathDamp map[uint16]*sharedDamp
	// planeFlap counts the outages of each plane's first hops toward the
	// peer: outages that paths through two T1s or more of the plane saw
	// in the same down phase (damp.go, planeFlap).
	planeFlap [wire.MaxPlanes]planeFlap
	cc        ccState
	srtt      Time

	epPending bool
	epReqID   uint16
	epRetries int
	epNext    Time

	// The request id of the latest port-status update applied from this
	// peer: an older one (a retransmission overtaken by a newer update
	// after a short flap) must not replace the newer mask.
	epApplied   bool
	epAppliedID uint16
}

// New makes an engine. rng must be private to it (determinism).
func New(cfg Config, mem Memory, rng *rand.Rand) (*Engine, error) {
	if cfg.Planes < 1 || cfg.Planes > wire.MaxPlanes {
		return nil, configErr("Planes = %d, want 1..%d", cfg.Planes, wire.MaxPlanes)
	}
	if cfg.MTU == 0 {
		cfg.MTU = DefaultMTU
	}
	if !ValidMTU(cfg.MTU) {
		return nil, configErr("MTU = %d, want 1024, 2048 or 4096 payload bytes", cfg.MTU)
	}
	if cfg.Mode == SRv6 {
		if cfg.Template == nil {
			return nil, configErr("SRv6 mode needs a path template (Config.Template)")
		}
		if cfg.Template.Planes < cfg.Planes {
			return nil, configErr("template has %d planes, engine %d", cfg.Template.Planes, cfg.Planes)
		}
	}
	if mem == nil || rng == nil {
		return nil, configErr("memory and rng are required")
	}
	if cfg.QPNShards < 0 || cfg.QPNShards > 64 || cfg.QPNShard < 0 || (cfg.QPNShards > 1 && cfg.QPNShard >= cfg.QPNShards) {
		return nil, configErr("QPNShard = %d of QPNShards = %d, want 0 <= shard < shards <= 64", cfg.QPNShard, cfg.QPNShards)
	}
	if cfg.AckEvery <= 0 {
		cfg.AckEvery = 4
	}
	if cfg.AckDelay <= 0 {
		cfg.AckDelay = 2 * Microsecond
	}
	if cfg.CtrlQueue <= 0 {
		cfg.CtrlQueue = 1024
	}
	if cfg.PortQueue <= 0 {
		cfg.PortQueue = 2 * Microsecond
	}
	if cfg.AlwaysSkipMarks == 0 {
		cfg.AlwaysSkipMarks = defaultAlwaysSkip
	}
	if cfg.MaxBurst <= 0 {
		cfg.MaxBurst = 64
	}
	cfg.CC.setDefaults(cfg.MTU)
	for p := range cfg.PortRates {
		if cfg.PortRates[p] < 0 || cfg.PortRate < 0 {
			return nil, configErr("negative port rate (plane %d)", p)
		}
		if cfg.PortRates[p] == 0 && p < cfg.Planes {
			cfg.PortRates[p] = cfg.PortRate
		}
	}
	e := &Engine{cfg: cfg, mem: mem, rng: rng, qps: map[wire.QPN]*qp{}, nextQP: 0x100,
		localUp: uint32(1)<<cfg.Planes - 1}
	e.ctrl.init(cfg.CtrlQueue)
	e.cq = make([]Completion, 0, 64) // grows to what the application leaves in it
	return e, nil
}

// Config returns the engine's configuration with defaults applied.
func (e *Engine) Config() Config { return e.cfg }

// CreateQP makes a QP in INIT state and returns its number.
func (e *Engine) CreateQP(c QPConfig) (wire.QPN, error) {
	if err := c.setDefaults(); err != nil {
		return 0, err
	}
	shards, shard := wire.QPN(1), wire.QPN(0)
	if e.cfg.QPNShards > 1 {
		shards, shard = wire.QPN(e.cfg.QPNShards), wire.QPN(e.cfg.QPNShard)
	}
	for {
		e.nextQP = (e.nextQP + 1) & wire.QPNMask
		if e.nextQP > wire.QPEndpoint && e.nextQP%shards == shard && e.qps[e.nextQP] == nil {
			break
		}
	}
	q := newQP(e, e.nextQP, c)
	e.qps[q.qpn] = q
	e.qpList = append(e.qpList, q)
	return q.qpn, nil
}

// DestroyQP removes a QP. Every posted WR that has not completed yet
// completes with StatusFlushed (as verbs promise: an application waiting on
// a WR ID must not hang); completions already queued stay in the CQ.
func (e *Engine) DestroyQP(qpn wire.QPN) error {
	q := e.qps[qpn]
	if q == nil {
		return ErrUnknownQP
	}
	q.flush(StatusFlushed)
	q.release()
	q.state = QPError // queued control packets for it are dropped
	delete(e.qps, qpn)
	for i, x := range e.qpList {
		if x == q {
			e.qpList = append(e.qpList[:i], e.qpList[i+1:]...)
			break
		}
	}
	return nil
}

// Info returns what the peer needs to Connect to this QP.
func (e *Engine) Info(qpn wire.QPN) (QPInfo, error) {
	q := e.qps[qpn]
	if q == nil {
		return QPInfo{}, ErrUnknownQP
	}
	return QPInfo{QPN: qpn, StartPSN: q.cfg.StartPSN, Addrs: e.cfg.Addrs, Window: q.W,
		MaxWImm: q.cfg.MaxWImm, MTU: e.cfg.MTU, Transport: q.cfg.Transport}, nil
}

// Connect moves a QP to READY toward remote (the peer's Info). In SRv6 mode
// the peer must be in the template (found by its addresses).
func (e *Engine) Connect(qpn wire.QPN, remote QPInfo) error {
	q := e.qps[qpn]
	if q == nil {
		return ErrUnknownQP
	}
	if q.state != QPInit {
		return fmt.Errorf("%w: connect needs INIT, QP %v is %v", ErrQPState, qpn, q.state)
	}
	if remote.Transport != q.cfg.Transport {
		return configErr("transport mismatch: local %v, remote %v", q.cfg.Transport, remote.Transport)
	}
	if remote.MTU != 0 && remote.MTU != e.cfg.MTU {
		return configErr("MTU mismatch: local %d, remote %d", e.cfg.MTU, remote.MTU)
	}
	if remote.QPN <= wire.QPEndpoint || remote.QPN > wire.QPNMask {
		return configErr("remote QPN %v is reserved or out of range", remote.QPN)
	}
	p, err := e.peerFor(remote.Addrs)
	if err != nil {
		return err
	}
	if !e.liveQPTo(p) {
		// A new session with the peer (first QP, or every earlier one
		// gone: the peer may be a restarted engine whose port-status ids
		// begin again at 1): its next update is applied whatever its id,
		// and it is told which of our ports are down, since it may have
		// missed that.
		p.epApplied = false
		if e.localUp != uint32(1)<<e.cfg.Planes-1 && !p.epPending {
			e.startPortStatus(p)
		}
	}
	return q.connect(remote, p)
}

func (e *Engine) peerFor(addrs [wire.MaxPlanes]wire.Addr128) (*peer, error) {
	var key wire.Addr128
	for _, a := range addrs[:e.cfg.Planes] {
		if !a.IsZero() {
			key = a
			break
		}
	}
	if key.IsZero() {
		return nil, configErr("remote has no address on any of the %d planes", e.cfg.Planes)
	}
	for _, p := range e.peers {
		if p.key == key {
			return p, nil
		}
	}
	p := &peer{key: key, addrs: addrs, remoteUp: uint32(1)<<e.cfg.Planes - 1, tidx: AnyPeer}
	if e.cfg.Mode == SRv6 {
		idx, ok := e.cfg.Template.PeerByAddr(key)
		if !ok {
			return nil, fmt.Errorf("%w: no template row has address %v", ErrNoPeer, key)
		}
		ps, err := e.cfg.Template.Compile(idx)
		if err != nil {
			return nil, err
		}
		p.paths, p.tidx = ps, idx
	}
	e.resolveDeny(p)
	p.cc.init(&e.cfg.CC, e.cfg.MTU)
	e.peers = append(e.peers, p)
	return p, nil
}

// liveQPTo reports whether a connected QP to p exists.
func (e *Engine) liveQPTo(p *peer) bool {
	for _, q := range e.qpList {
		if q.peer == p && q.state == QPReady {
			return true
		}
	}
	return false
}

// PostWrite queues an RDMA Write or Write-with-Immediate. Any other Op fails
// with ErrUnsupportedOp. The WR completes (CompSend) once every packet of it
// has been acknowledged.
func (e *Engine) PostWrite(qpn wire.QPN, wr WR) error {
	q := e.qps[qpn]
	if q == nil {
		return ErrUnknownQP
	}
	return q.post(wr)
}

// PollCQ moves up to len(dst) completions into dst and returns how many.
func (e *Engine) PollCQ(dst []Completion) int {
	n := copy(dst, e.cq[e.cqHd:])
	e.cqHd += n
	if e.cqHd == len(e.cq) {
		e.cq, e.cqHd = e.cq[:0], 0
	}
	return n
}

func (e *Engine) complete(c Completion) {
	if len(e.cq)-e.cqHd >= 1<<20 {
		e.stats.CQOverflow++
		return
	}
	e.cq = append(e.cq, c)
}

// SetPortState reports a local NIC port (plane) going down or up. EVs on a
// down port are not used; every peer gets a port-status update (ERTH to QP
// 0x2, bit p set = port p up), re-sent until answered.
func (e *Engine) SetPortState(now Time, port wire.Plane, up bool) {
	e.now = now
	if int(port) >= e.cfg.Planes {
		return
	}
	old := e.localUp
	if up {
		e.localUp |= 1 << port
	} else {
		e.localUp &^= 1 << port
	}
	if old == e.localUp {
		return
	}
	e.stats.FlapHolds += dampMask(&e.localDamp, old, e.localUp, now, &e.cfg)
	for _, p := range e.peers {
		e.startPortStatus(p)
	}
	if !up {
		for _, q := range e.qpList {
			if q.state == QPReady {
				q.requeueDeadPlanes()
			}
		}
	}
}

// PortsUp is the local port mask (bit p = port p up).
func (e *Engine) PortsUp() uint32 { return e.localUp }

// AllQPs, passed to the controller calls, applies them to every QP.
const AllQPs wire.QPN = 0xFFFFFFFF

// Deny puts ev in DENIED on qpn (or every QP): it is never used again until
// Allow. An active EV is replaced from its plane's reserve.
func (e *Engine) Deny(qpn wire.QPN, ev wire.EV) error {
	return e.eachQP(qpn, func(q *qp) { q.setEVAdmin(ev, true) })
}

// Allow returns a DENIED ev to GOOD.
func (e *Engine) Allow(qpn wire.QPN, ev wire.EV) error {
	return e.eachQP(qpn, func(q *qp) { q.setEVAdmin(ev, false) })
}

// DenyPlane denies every EV of a plane; AllowPlane undoes it.
func (e *Engine) DenyPlane(qpn wire.QPN, plane wire.Plane) error {
	return e.eachQP(qpn, func(q *qp) { q.setPlaneAdmin(plane, true) })
}

// AllowPlane returns the plane's DENIED EVs to GOOD.
func (e *Engine) AllowPlane(qpn wire.QPN, plane wire.Plane) error {
	return e.eachQP(qpn, func(q *qp) { q.setPlaneAdmin(plane, false) })
}

func (e *Engine) eachQP(qpn wire.QPN, f func(*qp)) error {
	if qpn == AllQPs {
		for _, q := range e.qpList {
			f(q)
		}
		return nil
	}
	q := e.qps[qpn]
	if q == nil {
		return ErrUnknownQP
	}
	f(q)
	return nil
}

// QPs appends the QP numbers to dst.
func (e *Engine) QPs(dst []wire.QPN) []wire.QPN {
	for _, q := range e.qpList {
		dst = append(dst, q.qpn)
	}
	return dst
}

// Counters returns the engine-wide counters.
func (e *Engine) Counters() EngineCounters { return e.stats }

// Snapshot copies a QP's state and counters into s (s.EVs and s.ReverseEVs
// are reused).
func (e *Engine) Snapshot(qpn wire.QPN, s *QPSnapshot) error {
	q := e.qps[qpn]
	if q == nil {
		return ErrUnknownQP
	}
	q.snapshot(s)
	return nil
}

// HandlePacket processes one received frame from port. The frame is not
// retained, but it is written during the call: the ICRC check masks header
// fields in place and restores them before it returns
// (wire.CheckICRCInPlace), so nobody else may read the frame meanwhile.
// Malformed frames are counted and dropped.
func (e *Engine) HandlePacket(now Time, port wire.Plane, frame []byte) {
	e.now = now
	e.stats.RxFrames++
	if int(port) >= e.cfg.Planes || e.localUp&(1<<port) == 0 {
		e.stats.RxPortDown++
		return
	}
	p := &e.rx
	if err := e.dec.Decode(frame, p); err != nil {
		e.stats.RxDecodeErr++
		return
	}
	if !p.Trimmed && !wire.CheckICRCInPlace(frame, p) {
		e.stats.RxBadICRC++
		return
	}
	if p.DestQP == wire.QPEndpoint {
		if p.Opcode == wire.OpEndpointReq || p.Opcode == wire.OpEndpointResp {
			e.handleEndpoint(port, p)
		} else {
			e.stats.RxUnknownQP++
		}
		return
	}
	q := e.qps[p.DestQP]
	if q == nil {
		e.stats.RxUnknownQP++
		return
	}
	if q.state != QPReady {
		e.stats.RxNotReady++
		return
	}
	switch op := p.Opcode; {
	case op.IsData():
		q.handleData(port, p)
	case op == wire.OpSACK:
		q.handleSACK(p)
	case op == wire.OpNACK:
		q.handleNACK(p)
	case op == wire.OpProbe:
		q.handleProbe(port, p)
	case op == wire.OpAck:
		q.handleAETH(p)
	case op == wire.OpCNP:
		q.handleCNP()
	default:
		e.stats.RxDecodeErr++
	}
}

func (e *Engine) handleEndpoint(port wire.Plane, p *wire.Packet) {
	e.stats.RxEndpoint++
	var pr *peer
	for _, x := range e.peers {
		for i := 0; i < e.cfg.Planes; i++ {
			if x.addrs[i] == p.Src {
				pr = x
			}
		}
	}
	if pr == nil {
		e.stats.RxNoPeer++
		return
	}
	if p.Opcode == wire.OpEndpointResp {
		if p.Endpoint.Op == wire.EPPortStatusUpdate && uint16(p.PSN) == pr.epReqID {
			pr.epPending = false
		}
		return
	}
	if p.Endpoint.Op == wire.EPPortStatusUpdate && pr.epApplied && int16(uint16(p.PSN)-pr.epAppliedID) < 0 {
		// Older than the update already applied: answer it (harmless, the
		// sender has moved on to a newer id) but keep the newer mask.
		// Serial-number order over 16 bits: updates are minutes of flaps
		// apart from wrapping.
		e.stats.PortStatusStale++
	} else if p.Endpoint.Op == wire.EPPortStatusUpdate {
		pr.epApplied, pr.epAppliedID = true, uint16(p.PSN)
		old := pr.remoteUp
		pr.remoteUp = p.Endpoint.PortStatusMask & (uint32(1)<<e.cfg.Planes - 1)
		e.stats.FlapHolds += dampMask(&pr.remoteDamp, old, pr.remoteUp, e.now, &e.cfg)
		for _, q := range e.qpList {
			if q.peer == pr {
				q.stats.PortStatusRcvd++
				q.requeueDeadPlanes()
			}
		}
	}
	e.queueCtrl(ctrlItem{kind: ctrlEPResp, peer: pr, port: port, ev: p.EV, reqID: uint16(p.PSN), epOp: p.Endpoint.Op, ts: p.Endpoint.Timestamp})
}

// portRoom reports whether port has TX room for another data packet.
func (e *Engine) portRoom(port wire.Plane) bool {
	return e.cfg.PortRates[port] == 0 || e.portBusyUntil(port)-e.now < e.cfg.PortQueue
}

// planeUsable reports whether EVs of plane may carry traffic to pr: the
// port is up at both ends, the denylist leaves the plane to pr, and it is
// held as flapping at neither end (damp.go) unless every plane that is up
// and allowed is held: damping then holds nothing.
//
// Why the exception: a hold keeps a flapping plane out while others carry
// the traffic; holding every plane at once (all ports flapping together, or
// the only plane left) would stop the QPs to pr with a path that works in
// its up phases, for up to FlapHoldMax each time, and with NoEVTimeout
// shorter than the hold turn a flap into a QP error.
func (e *Engine) planeUsable(pr *peer, plane wire.Plane) bool {
	if e.localUp&pr.remoteUp&(1<<plane) == 0 || pr.planeDenied(plane) {
		return false
	}
	if !e.held(pr, plane) {
		return true
	}
	for p := 0; p < e.cfg.Planes; p++ {
		pl := wire.Plane(p)
		if pl != plane && e.localUp&pr.remoteUp&(1<<p) != 0 && !pr.planeDenied(pl) && !e.held(pr, pl) {
			return false
		}
	}
	return true
}

// held reports whether plane is held as flapping (damp.go) locally or at pr.
func (e *Engine) held(pr *peer, plane wire.Plane) bool {
	return e.localDamp[plane].holding(e.now) || pr.remoteDamp[plane].holding(e.now)
}

func ts16(now Time) uint16 { return uint16(now >> 10) }

// Poll emits every frame that is due at now: control packets first, then
// probes, then data (at most MaxBurst data packets). emit must copy the frame
// before returning; the buffer is reused.
func (e *Engine) Poll(now Time, emit func(port wire.Plane, frame []byte)) {
	e.poll(now, emit)
}

// PollInto is Poll that encodes each frame straight into a buffer of the
// caller's, saving the copy out of the engine's own buffer: dst returns the
// buffer for the next frame to port (nil or too short for the frame: the
// frame is dropped, and the engine recovers it as a loss), and commit
// reports the length written into it. Callers that keep the two funcs in
// fields (not fresh closures per call) keep PollInto allocation-free.
func (e *Engine) PollInto(now Time, dst func(port wire.Plane) []byte, commit func(port wire.Plane, n int)) {
	e.dst, e.commit = dst, commit
	defer func() { e.dst, e.commit = nil, nil }()
	e.poll(now, nil)
}

// HoldTimers stops (true) or restarts (false) Poll's running of the QPs'
// timers: ACK timeouts, the RoCE transport timer, the retry limits and
// probe deadlines. Everything else — sending, pacing, ACKs owed, control
// — goes on. A timer that fell due while held runs at the first Poll
// after the hold, at that Poll's time.
//
// Why: a host whose loop was kept off the CPU for several RTOs finds its
// peer's ACKs queued in its receive rings, more than one receive batch
// reads; the timers must not run before those ACKs are read, or every
// packet they acknowledge times out (nic/daemon/rx.go). The caller holds
// them for a bounded backlog only: held for good, no loss would ever be
// found by a timeout.
func (e *Engine) HoldTimers(held bool) { e.timersHeld = held }

func (e *Engine) poll(now Time, emit func(port wire.Plane, frame []byte)) {
	e.now = now
	if !e.timersHeld {
		for _, q := range e.qpList {
			q.runTimers(now)
		}
	}
	for e.ctrl.n > 0 {
		it := e.ctrl.pop()
		e.sendCtrl(it, emit)
	}
	for _, q := range e.qpList {
		q.pollControl(now, emit)
	}
	for _, p := range e.peers {
		if p.epPending && now >= p.epNext {
			e.sendPortStatus(p, emit)
		}
	}
	n := len(e.qpList)
	if n == 0 {
		return
	}
	burst := 0
	for burst < e.cfg.MaxBurst {
		sent := false
		for i := 0; i < n && burst < e.cfg.MaxBurst; i++ {
			q := e.qpList[(e.rr+i)%n]
			if q.trySend(now, emit) {
				sent = true
				burst++
			}
		}
		e.rr = (e.rr + 1) % n
		if !sent {
			break
		}
	}
}

// NextDeadline is the earliest time at which Poll has work: the time of the
// last call when something is sendable right now, Never when idle.
func (e *Engine) NextDeadline() Time {
	if e.ctrl.n > 0 {
		return e.now
	}
	// The end of a flap hold (damp.go) may make data sendable again.
	d := nextRelease(&e.localDamp, e.now)
	for _, p := range e.peers {
		if p.epPending && p.epNext < d {
			d = p.epNext
		}
		d = min(d, nextRelease(&p.remoteDamp, e.now))
	}
	for _, q := range e.qpList {
		if t := q.deadline(); t < d {
			d = t
		}
		if d <= e.now {
			return e.now
		}
	}
	return d
}

func (e *Engine) emitFrame(port wire.Plane, emit func(wire.Plane, []byte)) {
	if e.dst != nil {
		e.emitInto(port)
		return
	}
	n, err := e.tx.Encode(e.buf[:])
	if err != nil {
		// Every field is set by the engine itself; an error is a bug.
		panic("mrc: encode: " + err.Error())
	}
	e.stats.TxFrames++
	e.countPlane(port)
	e.occupyPort(port, n)
	emit(port, e.buf[:n])
}

// emitInto encodes e.tx into the PollInto caller's buffer for port. A
// missing or short buffer drops the frame like a full transmit queue would
// (counted in TxNoBuffer): it still counts as sent (and against the port's
// rate), so the protocol recovers it as a loss.
func (e *Engine) emitInto(port wire.Plane) {
	n := e.tx.Len()
	if b := e.dst(port); len(b) >= n {
		m, err := e.tx.Encode(b)
		if err != nil {
			panic("mrc: encode: " + err.Error())
		}
		e.commit(port, m)
	} else {
		e.stats.TxNoBuffer++
	}
	e.stats.TxFrames++
	e.countPlane(port)
	e.occupyPort(port, n)
}

// fillNet fills the Ethernet/IPv6/UDP part of e.tx for a packet on ev to pr.
func (e *Engine) fillNet(pr *peer, ev wire.EV) (wire.Plane, bool) {
	t := &e.tx
	pl := ev.Plane()
	if int(pl) >= e.cfg.Planes {
		return 0, false
	}
	if e.evDenied(pr, ev) {
		// The last line of the denylist: whatever picked ev, nothing
		// leaves on it (counted; callers also count TxNoRoute).
		e.stats.TxDenied++
		return 0, false
	}
	t.SrcMAC, t.DstMAC = e.cfg.PortMAC[pl], e.cfg.NextHopMAC[pl]
	t.Src, t.Dst = e.cfg.Addrs[pl], pr.addrs[pl]
	t.EV = ev
	t.DstPort = e.cfg.UDPPort
	t.HopLimit = 64
	t.Encap = false
	if e.cfg.Mode == SRv6 {
		c, ok := pr.paths.Dst(ev)
		if !ok {
			return 0, false
		}
		t.Encap, t.OuterSrc, t.OuterDst = true, t.Src, c
	}
	return pl, true
}

// resetTx clears the per-packet fields of e.tx (no allocation).
func (e *Engine) resetTx() {
	t := &e.tx
	*t = wire.Packet{}
}

// startPortStatus starts a new port-status update (a new request id) to p.
func (e *Engine) startPortStatus(p *peer) {
	p.epPending, p.epRetries, p.epNext = true, 0, e.now
	p.epReqID++
}

// Port-status retransmission: the first retry after max(4·srtt,
// minPortStatusRTO), doubling per try up to maxPortStatusRTO, until an
// EETH answers it. Why never give up: a peer that missed the update keeps
// a plane off (or in use) until the next port change, so a bounded number
// of tries (16 tries, 50 µs apart, used to) loses the update to any outage
// longer than a millisecond; the backoff keeps a dead peer's cost at one
// small packet per maxPortStatusRTO.
const (
	minPortStatusRTO = 50 * Microsecond
	maxPortStatusRTO = 10 * Millisecond
)

func (e *Engine) sendPortStatus(p *peer, emit func(wire.Plane, []byte)) {
	rto := max(4*p.srtt, minPortStatusRTO)
	for i := 0; i < p.epRetries && rto < maxPortStatusRTO; i++ {
		rto *= 2
	}
	p.epRetries++
	p.epNext = e.now + min(rto, maxPortStatusRTO)
	ev, ok := e.randomEV(p, e.localUp&p.remoteUp)
	if !ok {
		// No plane in common: send on any local up plane (the peer learns
		// our mask either way).
		if ev, ok = e.randomEV(p, e.localUp); !ok {
			e.stats.TxNoRoute++
			return
		}
	}
	e.resetTx()
	pl, ok := e.fillNet(p, ev)
	if !ok {
		e.stats.TxNoRoute++
		return
	}
	t := &e.tx
	t.DSCP, t.ECN = wire.DSCPControl, wire.ECNNotECT
	t.Opcode, t.DestQP, t.PSN = wire.OpEndpointReq, wire.QPEndpoint, wire.PSN(p.epReqID)
	t.Endpoint = wire.EndpointFields{Op: wire.EPPortStatusUpdate, PortStatusMask: e.localUp, Timestamp: ts16(e.now)}
	e.stats.PortStatusSent++
	e.emitFrame(pl, emit)
}

// randomEV makes a fresh EV on a random plane of mask (control packets that
// belong to no QP).
func (e *Engine) randomEV(p *peer, mask uint32) (wire.EV, bool) {
	mask &= uint32(1)<<e.cfg.Planes - 1
	if p.deny != nil {
		mask &^= p.deny.planes
	}
	n := bits.OnesCount32(mask)
	if n == 0 {
		return 0, false
	}
	k := e.rng.IntN(n)
	var pl wire.Plane
	for i := 0; i < e.cfg.Planes; i++ {
		if mask&(1<<i) != 0 {
			if k == 0 {
				pl = wire.Plane(i)
				break
			}
			k--
		}
	}
	return e.freshEV(p, pl)
}
