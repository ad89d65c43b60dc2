package daemon

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/softmrc/softmrc/internal/dcqcn"
	"github.com/softmrc/softmrc/internal/mrc"
	"github.com/softmrc/softmrc/internal/wire"
	"github.com/softmrc/softmrc/nic/config"
	"github.com/softmrc/softmrc/nic/oam"
	"github.com/softmrc/softmrc/nic/service"
	"github.com/softmrc/softmrc/nic/vproto"
)

// The Daemon is the service's NIC: every method runs its engine work on the
// loop goroutine.
var _ service.NIC = (*Daemon)(nil)

// Info describes the device.
func (d *Daemon) Info() vproto.DeviceInfo {
	info := vproto.DeviceInfo{Host: d.cfg.Host, Mode: string(d.cfg.Mode), MTU: d.cfg.MTU, EVs: d.cfg.EVs,
		MaxMsg: 1 << 31, MaxBatch: vproto.MaxBatch}
	for i, p := range d.cfg.Ports {
		info.Ports = append(info.Ports, vproto.PortInfo{Name: p.PortName(), Interface: p.Interface, Plane: p.Plane,
			Address: p.Address, MAC: p.MAC.String(), Up: d.portUp[i].Load()})
	}
	return info
}

// RegMR registers the memfd fd as a region of owner (its protection domain).
func (d *Daemon) RegMR(owner uint32, fd int, req vproto.RegMR) (vproto.MRInfo, error) {
	if err := req.Access.Check(); err != nil {
		return vproto.MRInfo{}, err
	}
	// Local read is always granted (verbs); MRC has no local writes, so
	// local write is recorded only.
	acc := mrc.AccessLocalRead
	if req.Access&vproto.AccessLocalWrite != 0 {
		acc |= mrc.AccessLocalWrite
	}
	if req.Access&vproto.AccessRemoteWrite != 0 {
		acc |= mrc.AccessRemoteWrite
	}
	r, err := d.regions.Add(owner, fd, req.Addr, req.Len, acc)
	if err != nil {
		return vproto.MRInfo{}, err
	}
	return vproto.MRInfo{LKey: r.LKey, RKey: r.RKey}, nil
}

// DeregMR removes owner's region req.LKey; writes still in flight from it
// finish (the mapping stays until the owner's session ends).
func (d *Daemon) DeregMR(owner uint32, req vproto.DeregMR) error {
	return d.regions.Remove(owner, req.LKey)
}

// CreateQP creates an engine QP owned by owner, in owner's protection domain.
func (d *Daemon) CreateQP(owner uint32, req vproto.CreateQP) (vproto.QPInfo, error) {
	if req.SQDepth < 0 || req.SQDepth > 1<<16 {
		return vproto.QPInfo{}, fmt.Errorf("sq_depth %d: want 0..65536", req.SQDepth)
	}
	tr, err := engineTransport(req.Transport)
	if err != nil {
		return vproto.QPInfo{}, err
	}
	var info mrc.QPInfo
	if e := d.exec(func() {
		qo := d.cfg.QP
		qc := mrc.QPConfig{Transport: tr, PD: owner, NumEVs: d.cfg.EVs, SendQueue: max(req.SQDepth, 1024), AckTimeout: mrc.Time(qo.AckTimeout),
			MinRTO: mrc.Time(qo.MinRTO), RetryLimit: qo.RetryLimit, NoEVTimeout: mrc.Time(qo.NoEVTimeout),
			RetryTimeout: mrc.Time(qo.RetryTimeout)}
		if tr == mrc.RoCE {
			// IBTA RC's local ACK timeout is a fixed QP attribute,
			// 4.096 µs·2^timeout, not an adaptive RTO (default: perftest's
			// timeout 14, 67 ms). Go-back-N resends the whole window on
			// every timeout, so a spurious one costs dearly.
			qc.AckTimeout, qc.FixedRTO, qc.TimeoutMode = mrc.Time(d.cfg.RoCE.AckTimeout), true, mrc.TimeoutLinear
			qc.DCQCN = dcqcnConfig(d.cfg.RoCE)
		}
		var qpn wire.QPN
		if qpn, err = d.eng.CreateQP(qc); err != nil {
			return
		}
		if info, err = d.eng.Info(qpn); err != nil {
			_ = d.eng.DestroyQP(qpn)
			return
		}
		d.qps[qpn] = &qpState{owner: owner, qpn: qpn, sqDepth: qc.SendQueue, created: time.Now()}
	}); e != nil {
		return vproto.QPInfo{}, e
	}
	if err != nil {
		return vproto.QPInfo{}, err
	}
	return vproto.QPInfo{QPN: uint32(info.QPN), PSN: uint32(info.StartPSN), MTU: info.MTU, Window: info.Window,
		MaxWImm: info.MaxWImm, Transport: req.Transport}, nil
}

// engineTransport maps the verbs transport to the engine's.
func engineTransport(t vproto.Transport) (mrc.Transport, error) {
	switch t {
	case vproto.TransportMRC:
		return mrc.MRC, nil
	case vproto.TransportRoCE:
		return mrc.RoCE, nil
	}
	return 0, fmt.Errorf("create_qp: unknown transport %d: want mrc or roce", uint8(t))
}

// owned returns owner's QP qpn or an error naming the problem. Loop only.
// dcqcnConfig is the DCQCN of a RoCE QP from the NIC's roce options:
// mlx5's defaults, slowed dcqcn_scale times, with the target rule chosen.
func dcqcnConfig(o config.RoCEOptions) dcqcn.Config {
	return dcqcn.Config{TargetOnTimerIncrease: o.DCQCNTarget == config.DCQCNTargetMLX5}.Scaled(o.DCQCNScale)
}

func (d *Daemon) owned(owner uint32, qpn uint32) (*qpState, error) {
	q := d.qps[wire.QPN(qpn)]
	if q == nil {
		return nil, fmt.Errorf("QP %#06x does not exist", qpn)
	}
	if q.owner != owner {
		d.c.badOwner.Add(1)
		return nil, fmt.Errorf("QP %#06x: %w", qpn, service.ErrNotOwner)
	}
	return q, nil
}

// ConnectQP connects owner's QP to its peer.
func (d *Daemon) ConnectQP(owner uint32, req vproto.ConnectQP) error {
	if err := d.checkPathMTU(); err != nil {
		return fmt.Errorf("connect QP %#06x: %w", req.QPN, err)
	}
	if len(req.RemoteAddrs) == 0 {
		return errors.New("connect: remote_addrs is empty: give the peer's address in every plane (DeviceInfo.Ports)")
	}
	if len(req.RemoteAddrs) > wire.MaxPlanes {
		return fmt.Errorf("connect: %d remote addresses, at most %d planes", len(req.RemoteAddrs), wire.MaxPlanes)
	}
	if req.RemoteQPN == 0 || req.RemoteQPN > wire.QPNMask {
		return fmt.Errorf("connect: remote QPN %#x is not a 24-bit QP number", req.RemoteQPN)
	}
	if len(req.EVs) > mrc.MaxNumEVs {
		return fmt.Errorf("connect: %d explicit EVs, at most %d", len(req.EVs), mrc.MaxNumEVs)
	}
	if req.RemoteMTU <= 0 || req.RemoteWindow <= 0 || req.RemoteMaxWImm <= 0 {
		return fmt.Errorf("connect: remote_mtu %d, remote_window %d, remote_max_wimm %d: give the peer QP's mtu, window and max_wimm from its create_qp reply (exchanged out of band like its QPN)",
			req.RemoteMTU, req.RemoteWindow, req.RemoteMaxWImm)
	}
	var peer mrc.QPInfo
	peer.QPN = wire.QPN(req.RemoteQPN)
	peer.StartPSN = wire.PSN(req.RemotePSN & wire.PSNMask)
	peer.MTU, peer.Window, peer.MaxWImm = req.RemoteMTU, req.RemoteWindow, req.RemoteMaxWImm
	evs := make([]wire.EV, len(req.EVs))
	for i, ev := range req.EVs {
		evs[i] = wire.EV(ev)
	}
	for i, a := range req.RemoteAddrs {
		if !a.IsValid() {
			continue
		}
		if !a.Is6() {
			return fmt.Errorf("connect: remote address %v for plane %d is not IPv6", a, i)
		}
		peer.Addrs[i] = wire.Addr128FromNetip(a)
	}
	var err error
	if e := d.exec(func() {
		var q *qpState
		if q, err = d.owned(owner, req.QPN); err != nil {
			return
		}
		// The peer's transport, when the application passed it (verbs'
		// ConnectInfo does), is checked by the engine's Connect;
		// otherwise it is taken to be this QP's own.
		var self mrc.QPInfo
		if self, err = d.eng.Info(q.qpn); err != nil {
			return
		}
		peer.Transport = self.Transport
		if req.RemoteTransport != nil {
			if peer.Transport, err = engineTransport(*req.RemoteTransport); err != nil {
				return
			}
		}
		if len(evs) > 0 {
			if err = d.eng.SetEVs(q.qpn, evs, nil); err != nil {
				return
			}
		}
		err = d.eng.Connect(q.qpn, peer)
		if err == nil {
			q.peer = req
		}
	}); e != nil {
		return e
	}
	if err != nil {
		return fmt.Errorf("connect QP %#06x: %w", req.QPN, err)
	}
	return nil
}

// DestroyQP destroys owner's QP; its work requests complete as flushed.
func (d *Daemon) DestroyQP(owner uint32, qpn uint32) error {
	var err error
	if e := d.exec(func() {
		var q *qpState
		if q, err = d.owned(owner, qpn); err != nil {
			return
		}
		d.destroy(q)
	}); e != nil {
		return e
	}
	return err
}

// destroy drops q; loop only.
func (d *Daemon) destroy(q *qpState) {
	for _, wr := range q.backlog {
		d.fail(q.owner, uint32(q.qpn), wr.ID, vproto.StatusWRFlushErr, wr.Op, 0)
	}
	q.backlog = nil
	d.teleFinal(q.qpn)
	d.retireQPCounters(q.qpn)
	_ = d.eng.DestroyQP(q.qpn)
	d.completions()
	delete(d.qps, q.qpn)
}

// CloseOwner destroys every QP of owner (its session ended).
func (d *Daemon) CloseOwner(owner uint32) {
	d.closeOwnerQPs(owner)
	// The loop has destroyed owner's QPs: the engine no longer reaches
	// its regions, which can be unmapped.
	d.regions.Release(owner)
}

// closeOwnerQPs destroys owner's QPs on this loop and forgets its rings
// and deliveries.
func (d *Daemon) closeOwnerQPs(owner uint32) {
	_ = d.exec(func() {
		for _, q := range d.qps {
			if q.owner == owner {
				d.destroy(q)
			}
		}
		delete(d.deliver, owner)
		d.detachRing(owner)
	})
}

// postedWR is a work request waiting in the post queue for the loop.
type postedWR struct {
	owner uint32
	wr    vproto.WR
}

// maxPostQueue bounds the work requests waiting for the loop; a session
// that posts faster waits in Post (backpressure onto its socket).
const maxPostQueue = 1 << 16

// Post validates and posts a batch; errors complete with a status. The
// batch is copied into the post queue, which the loop drains every round:
// no allocation and no closure per post, and one eventfd write only when
// the loop sleeps.
func (d *Daemon) Post(owner uint32, wrs []vproto.WR) {
	q := &d.pq
	if !q.lock(true) {
		return
	}
	for i := range wrs {
		q.wrs = append(q.wrs, postedWR{owner, wrs[i]})
	}
	d.unlockPosts()
}

// lock takes the post queue's lock, first waiting while the queue is full
// when wait is set; false (unlocked) once the loop is gone.
func (q *postQueue) lock(wait bool) bool {
	q.mu.Lock()
	for wait && len(q.wrs) >= maxPostQueue && !q.closed {
		q.drained.Wait()
	}
	if q.closed {
		q.mu.Unlock()
		return false
	}
	return true
}

// unlockPosts publishes what was appended to the post queue under lock,
// unlocks it and wakes the loop if it sleeps.
func (d *Daemon) unlockPosts() {
	q := &d.pq
	q.n.Store(int64(len(q.wrs)))
	q.mu.Unlock()
	d.wake()
}

// drainPosts runs the queued posts on the loop.
func (d *Daemon) drainPosts(now mrc.Time) int {
	q := &d.pq
	if q.n.Load() == 0 {
		return 0
	}
	q.mu.Lock()
	batch := q.wrs
	q.wrs = q.spare[:0]
	q.n.Store(0)
	q.drained.Broadcast()
	q.mu.Unlock()
	for i := range batch {
		d.post(now, batch[i].owner, &batch[i].wr)
	}
	if d.sh != nil {
		d.forwardPosts()
	}
	d.flushDeliveries()
	q.spare = batch[:0] // loop-only: Post never touches spare
	return len(batch)
}

// closePosts makes Post drop further batches (the loop is gone).
func (d *Daemon) closePosts() {
	d.pq.mu.Lock()
	d.pq.closed = true
	d.pq.drained.Broadcast()
	d.pq.mu.Unlock()
}

func (d *Daemon) post(now mrc.Time, owner uint32, w *vproto.WR) {
	if d.sh != nil && d.sh.threadOf(w.QPN) != d.shard {
		// A work request from the session's ring for its QP on another
		// engine thread: handed over at the end of the drain (shard.go).
		j := d.sh.threadOf(w.QPN)
		d.fwd[j] = append(d.fwd[j], postedWR{owner, *w})
		return
	}
	q := d.qps[wire.QPN(w.QPN)]
	if q == nil || q.owner != owner {
		if q != nil {
			d.c.badOwner.Add(1)
		}
		d.fail(owner, w.QPN, w.ID, vproto.StatusLocQPOpErr, mrc.Op(w.Op), 0)
		return
	}
	if !w.Op.Supported() {
		// Refused here, never sent: a local status (verbs reports a WR
		// its QP cannot execute as a local QP operation error).
		d.fail(owner, w.QPN, w.ID, vproto.StatusLocQPOpErr, mrc.Op(w.Op), 0)
		return
	}
	if w.Len > 1<<31 {
		d.fail(owner, w.QPN, w.ID, vproto.StatusLocLenErr, mrc.Op(w.Op), 0)
		return
	}
	op := mrc.OpWrite
	if w.Op == vproto.OpWriteImm {
		op = mrc.OpWriteImm
	}
	// The engine resolves the lkey in the QP's protection domain (the
	// owner's regions) when the WR enters its send queue.
	// An unsignaled WR's success completes nothing (the engine drops it).
	wr := mrc.WR{ID: w.ID, Op: op, Len: w.Len, RemoteVA: w.RemoteAddr, RKey: w.RKey, Imm: w.Imm,
		LKey: w.LKey, Addr: w.LocalAddr, Unsignaled: w.Flags&vproto.FlagSignaled == 0}
	if len(q.backlog) > 0 {
		d.queue(q, wr)
		return
	}
	d.submit(now, q, wr)
}

// submit hands wr to the engine, queueing it while the send queue is full.
func (d *Daemon) submit(now mrc.Time, q *qpState, wr mrc.WR) bool {
	err := d.eng.PostWrite(q.qpn, wr)
	switch {
	case err == nil:
		return true
	case errors.Is(err, mrc.ErrQueueFull) || errors.Is(err, mrc.ErrWImmLimit):
		d.queue(q, wr)
		return false
	}
	d.c.postErrors.Add(1)
	st := vproto.StatusGeneralErr
	switch {
	case errors.Is(err, mrc.ErrQPState), errors.Is(err, mrc.ErrUnknownQP):
		st = vproto.StatusLocQPOpErr
	case errors.Is(err, mrc.ErrUnsupportedOp):
		st = vproto.StatusLocQPOpErr
	case errors.Is(err, mrc.ErrLocalAccess):
		st = vproto.StatusLocProtErr
	case errors.Is(err, mrc.ErrTooLarge):
		st = vproto.StatusLocLenErr
	}
	d.log.Debug("post refused by the engine", "qpn", q.qpn, "wr", wr.ID, "err", err)
	d.fail(q.owner, uint32(q.qpn), wr.ID, st, wr.Op, 0)
	return true // consumed
}

func (d *Daemon) queue(q *qpState, wr mrc.WR) {
	if len(q.backlog) >= maxBacklog {
		d.fail(q.owner, uint32(q.qpn), wr.ID, vproto.StatusGeneralErr, wr.Op, 1)
		return
	}
	q.backlog = append(q.backlog, wr)
	if !q.queued {
		q.queued = true
		d.backlogged = append(d.backlogged, q)
	}
}

// feedBacklogs moves queued work requests into the engine as room frees.
func (d *Daemon) feedBacklogs(now mrc.Time) int {
	if len(d.backlogged) == 0 {
		return 0
	}
	n := 0
	keep := d.backlogged[:0]
	for _, q := range d.backlogged {
		for len(q.backlog) > 0 {
			wr := q.backlog[0]
			q.backlog = q.backlog[1:]
			if !d.submit(now, q, wr) {
				// Put it back at the front (submit appended it at the end).
				last := len(q.backlog) - 1
				copy(q.backlog[1:], q.backlog[:last])
				q.backlog[0] = wr
				break
			}
			n++
		}
		if len(q.backlog) == 0 {
			q.backlog, q.queued = nil, false // a destroyed QP's too
		} else {
			keep = append(keep, q)
		}
	}
	clear(d.backlogged[len(keep):])
	d.backlogged = keep
	return n
}

// fail queues an error (or success) completion for owner.
func (d *Daemon) fail(owner, qpn uint32, id uint64, st vproto.Status, op mrc.Op, vendor uint32) {
	cop := vproto.CQWrite
	if op == mrc.OpWriteImm {
		cop = vproto.CQWriteImm
	} else if op != mrc.OpWrite {
		cop = vproto.Opcode(op)
	}
	d.deliver[owner] = append(d.deliver[owner], vproto.CQE{ID: id, QPN: qpn, Status: st, Op: cop, Vendor: vendor})
}

// completions moves the engine's completions to their owners.
func (d *Daemon) completions() int {
	if d.comps == nil {
		d.comps = make([]mrc.Completion, 256)
	}
	total := 0
	for {
		n := d.eng.PollCQ(d.comps)
		for _, c := range d.comps[:n] {
			q := d.qps[c.QPN]
			if q == nil {
				continue
			}
			cqe := vproto.CQE{QPN: uint32(c.QPN), Status: mapStatus(c.Status), Len: c.Len, Vendor: uint32(c.Status)}
			switch c.Kind {
			case mrc.CompSend:
				cqe.ID = c.WRID
				cqe.Op = vproto.CQWrite
			case mrc.CompRecvImm:
				cqe.Op = vproto.CQRecvImm
				cqe.Imm = c.Imm
				cqe.SrcQP = q.peer.RemoteQPN
			case mrc.CompQPError:
				cqe.Op = vproto.CQQPError
				d.logQPError(c.QPN)
			}
			d.deliver[q.owner] = append(d.deliver[q.owner], cqe)
		}
		total += n
		if n < len(d.comps) {
			break
		}
	}
	d.flushDeliveries()
	return total
}

func (d *Daemon) flushDeliveries() {
	for owner, c := range d.deliver {
		if len(c) == 0 {
			// Kept, not deleted: the session's next completion reuses the
			// slice instead of growing a new one (one allocation per
			// message). CloseOwner deletes the entry when the session ends.
			continue
		}
		if d.sh != nil && d.sh.passCompletions(d.shard, owner, c) {
			d.deliver[owner] = c[:0]
			continue // the session's own thread delivers them (shard.go)
		}
		d.c.cqes.Add(uint64(len(c)))
		rest := c
		if rs := d.rings[owner]; rs != nil && !rs.overflow {
			rest = d.ringDeliver(rs, c)
		}
		if len(rest) > 0 {
			d.svc.Deliver(owner, rest)
		}
		d.deliver[owner] = c[:0]
	}
}

// logQPError logs why a QP went to error, with the counters an operator
// reads first: the engine's rule (FailCause), the RTT it had, its timeouts
// and retransmissions, and its EVs by state. The application sees only the
// status (RETRY_EXCEEDED says what failed, not which rule or on what
// paths).
func (d *Daemon) logQPError(qpn wire.QPN) {
	var s mrc.QPSnapshot
	if d.eng.Snapshot(qpn, &s) != nil {
		return
	}
	var states [4]int // GOOD, SKIP, ASSUMED_BAD, DENIED
	for _, e := range s.EVs {
		if int(e.State) < len(states) {
			states[e.State]++
		}
	}
	c := &s.Counters
	d.log.Warn("QP failed", "qpn", fmt.Sprintf("%#06x", uint32(qpn)), "status", s.Status.String(), "cause", s.FailCause.String(),
		"transport", s.Transport.String(), "srtt", time.Duration(s.SRTT), "timeouts", c.Timeouts, "retries", c.Retries,
		"tx_data", c.TxData, "tx_rtx", c.TxRtx, "probes", c.TxProbe, "no_ev_stalls", c.NoEVStalls,
		"evs_good", states[mrc.EVGood], "evs_skip", states[mrc.EVSkip], "evs_assumed_bad", states[mrc.EVAssumedBad], "evs_denied", states[mrc.EVDenied])
}

func mapStatus(s mrc.Status) vproto.Status {
	switch s {
	case mrc.StatusOK:
		return vproto.StatusSuccess
	case mrc.StatusRetryExceeded, mrc.StatusNoPath:
		return vproto.StatusRetryExcErr
	case mrc.StatusRemoteAccess:
		return vproto.StatusRemAccessErr
	case mrc.StatusWImmLimit:
		return vproto.StatusRemOpErr
	case mrc.StatusFlushed:
		return vproto.StatusWRFlushErr
	case mrc.StatusRemoteInvalid:
		return vproto.StatusRemInvReqErr
	}
	return vproto.StatusGeneralErr
}

// Ctl answers mrcctl. An application (a caller that is not an
// administrator) sees and steers only its own QPs: deny/allow and evs of
// another's QP, deny/allow of every QP at once, and other applications'
// rows of qps are refused or left out, because one tenant must not steer
// or watch another's traffic.
func (d *Daemon) Ctl(caller service.Caller, req vproto.CtlRequest) (any, error) {
	if req.Cmd == vproto.CtlOAMProbe {
		return d.oamProbe(req) // waits for the answer outside the loop
	}
	var res any
	var err error
	if e := d.exec(func() { res, err = d.ctl(caller, req) }); e != nil {
		return nil, e
	}
	return res, err
}

// ErrNotAdmin is returned (wrapped) for a control command on QPs that are
// not the caller's, by a caller that is not an administrator.
var ErrNotAdmin = errors.New("only root (or mrc-nicd's user) may inspect or steer other applications' QPs; run mrcctl as root")

// ctlQP returns the QP a control command names, if caller may touch it.
func (d *Daemon) ctlQP(caller service.Caller, cmd vproto.CtlCmd, qpn uint32) (*qpState, error) {
	q := d.qps[wire.QPN(qpn)]
	if q == nil && caller.Admin {
		return nil, fmt.Errorf("%s: QP %#06x does not exist (mrcctl qps lists them)", cmd, qpn)
	}
	if q == nil || (!caller.Admin && q.owner != caller.Session) {
		if q != nil {
			d.c.badOwner.Add(1)
		}
		// The same answer whether the QP exists or not: an application
		// learns nothing about others' QPs.
		return nil, fmt.Errorf("%s: QP %#06x is not one of this application's (mrcctl qps lists them; %w)", cmd, qpn, ErrNotAdmin)
	}
	return q, nil
}

func (d *Daemon) portStatus() []vproto.PortStatus {
	out := make([]vproto.PortStatus, len(d.ports))
	for i, p := range d.cfg.Ports {
		out[i] = vproto.PortStatus{Name: p.PortName(), Interface: p.Interface, Plane: p.Plane, Address: p.Address,
			Up: d.portUp[i].Load(), Stats: vproto.CounterMap(d.ports[i].Stats())}
	}
	return out
}

func (d *Daemon) sortedQPs() []*qpState {
	qs := make([]*qpState, 0, len(d.qps))
	for _, q := range d.qps {
		qs = append(qs, q)
	}
	sort.Slice(qs, func(i, j int) bool { return qs[i].qpn < qs[j].qpn })
	return qs
}

func (d *Daemon) ctl(caller service.Caller, req vproto.CtlRequest) (any, error) {
	switch req.Cmd {
	case vproto.CtlPorts:
		return d.portStatus(), nil
	case vproto.CtlQPs:
		rows := []vproto.QPRow{}
		var s mrc.QPSnapshot
		for _, q := range d.sortedQPs() {
			if !caller.Admin && q.owner != caller.Session {
				continue
			}
			s.EVs = s.EVs[:0]
			if err := d.eng.Snapshot(q.qpn, &s); err != nil {
				continue
			}
			r := vproto.QPRow{QPN: uint32(q.qpn), Owner: q.owner, State: s.State.String(), Status: s.Status.String(), Transport: s.Transport.String(),
				RemoteQPN: uint32(s.Peer.QPN), SRTTus: float64(s.SRTT) / 1e3, Cwnd: s.Cwnd, InFlight: s.InFlight,
				Backlog: len(q.backlog), TxData: s.Counters.TxData, TxRtx: s.Counters.TxRtx, TxBytes: s.Counters.TxBytes,
				RxData: s.Counters.RxData, RxBytes: s.Counters.RxBytes, Timeouts: s.Counters.Timeouts,
				Losses: s.Counters.Losses, EVs: len(s.EVs), Counters: map[string]uint64{}}
			addQPCounters(r.Counters, &s.Counters)
			if s.FailCause != mrc.FailNone {
				r.FailCause = s.FailCause.String()
			}
			if s.RoCE != nil {
				r.RateGbps, r.CNPsRx, r.CNPsTx = s.RoCE.Rate/1e9, s.RoCE.RxCNP, s.RoCE.TxCNP
			}
			for _, ev := range s.EVs {
				if ev.State == mrc.EVGood {
					r.GoodEVs++
				}
			}
			rows = append(rows, r)
		}
		return rows, nil
	case vproto.CtlEVs:
		q, err := d.ctlQP(caller, req.Cmd, req.QPN)
		if err != nil {
			return nil, err
		}
		var s mrc.QPSnapshot
		if err := d.eng.Snapshot(q.qpn, &s); err != nil {
			return nil, err
		}
		rows := make([]vproto.EVRow, 0, len(s.EVs))
		for _, e := range s.EVs {
			rows = append(rows, vproto.EVRow{EV: e.EV.String(), Plane: int(e.Plane), T1: int(e.EV.T1()), Path: d.pathOf(q, e.EV), Switches: d.switchesOf(q, e.EV),
				State: e.State.String(), Active: e.Active, Slots: e.Slots, Sent: e.Sent, Acked: e.Acked, ECN: e.ECN, Trims: e.Trims + e.TrimsLastHop,
				Losses: e.Losses, Timeouts: e.Timeouts, Probes: e.Probes})
		}
		return rows, nil
	case vproto.CtlCounters:
		n, b := d.regions.Count()
		return vproto.Counters{Engine: d.engineCounters(), QPs: d.qpTotals(), Daemon: d.daemonCounters(), Ports: d.portStatus(),
			Regions: n, Bytes: b}, nil
	case vproto.CtlDeny, vproto.CtlAllow:
		return d.ctlDeny(caller, req)
	case vproto.CtlDenylist:
		return d.denyRows(), nil
	case vproto.CtlPaths:
		if d.prober == nil {
			return nil, errors.New("path probes are off: set path_probes (e.g. 5ms) in the NIC config")
		}
		switch req.Scope {
		case "":
			return d.prober.Stats(time.Duration(d.now())), nil
		case "stop", "start":
			if !caller.Admin {
				return nil, fmt.Errorf("paths %s: %w", req.Scope, ErrNotAdmin)
			}
			d.probesOff = req.Scope == "stop"
			return vproto.CtlResult{Result: "ok"}, nil
		}
		return nil, fmt.Errorf("paths: scope %q: want none, stop or start", req.Scope)
	case vproto.CtlOAMTrace:
		hops, _, err := d.oamTrace(req)
		return hops, err
	}
	return nil, fmt.Errorf("unknown ctl command %q: want ports, qps, evs, counters, sessions, deny, allow, denylist, oam-trace or oam-probe", req.Cmd)
}

// pathOf names ev's path toward q's peer: the uSID list in srv6 mode.
func (d *Daemon) pathOf(q *qpState, ev wire.EV) string {
	usids, _, msg := d.pathUSIDs(q, ev)
	if usids == nil {
		return msg
	}
	var b strings.Builder
	for i, u := range usids {
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%04x", u)
	}
	return b.String()
}

// switchesOf names the physical path of ev toward q's peer: the switch
// of each uSID (docs/conventions.md), then the peer host, e.g. "p0-t0-0
// p0-t1-1 p0-t0-1 h3". Empty in ecmp mode (no fixed path).
func (d *Daemon) switchesOf(q *qpState, ev wire.EV) string {
	usids, peer, _ := d.pathUSIDs(q, ev)
	if len(usids) == 0 {
		return ""
	}
	names := make([]string, len(usids))
	for i, u := range usids[:len(usids)-1] {
		names[i] = oam.SwitchName(u)
	}
	names[len(names)-1] = peer
	return strings.Join(names, " ")
}

// peerName is q's peer as the path template names it (h3), else its
// first address, else "-".
func (d *Daemon) peerName(q *qpState) string {
	for _, a := range q.peer.RemoteAddrs {
		if !a.IsValid() {
			continue
		}
		if d.tmpl != nil {
			if idx, ok := d.tmpl.PeerByAddr(wire.Addr128FromNetip(a)); ok {
				return d.tmpl.Peers[idx].Name
			}
		}
		return a.String()
	}
	return "-"
}

// pathUSIDs is ev's uSID list toward q's peer and the peer's template
// name; nil and a reason when there is none (ecmp mode, no template, a
// peer outside it).
func (d *Daemon) pathUSIDs(q *qpState, ev wire.EV) ([]wire.USID, string, string) {
	if d.cfg.Mode == config.ModeECMP {
		return nil, "", fmt.Sprintf("ecmp plane %d", ev.Plane())
	}
	if d.tmpl == nil {
		return nil, "", ""
	}
	for _, a := range q.peer.RemoteAddrs {
		if !a.IsValid() {
			continue
		}
		idx, ok := d.tmpl.PeerByAddr(wire.Addr128FromNetip(a))
		if !ok {
			return nil, "", "peer not in template"
		}
		ps, err := d.tmpl.Compile(idx)
		if err != nil {
			return nil, "", err.Error()
		}
		return ps.USIDs(ev), d.tmpl.Peers[idx].Name, ""
	}
	return nil, "", ""
}
