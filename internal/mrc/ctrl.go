package mrc

import "github.com/softmrc/softmrc/internal/wire"

type ctrlKind uint8

const (
	ctrlSACK      ctrlKind = iota // SACK with the QP's current receive state
	ctrlProbeResp                 // SACK pr=1 answering a PETH
	ctrlNACK
	ctrlNAKSeq // go-back-N: AETH NAK sequence error
	ctrlAck    // Transport ACK (AETH) for compatibility (Config.TransportACK)
	ctrlEPResp // EETH answering an ERTH
	ctrlCNP    // RoCEv2 CNP (RoCE transport, roce.go)
)

// ctrlItem is a control packet waiting for Poll. Items are small values in a
// fixed ring, so queueing never allocates.
type ctrlItem struct {
	kind    ctrlKind
	q       *qp
	peer    *peer
	port    wire.Plane
	ev      wire.EV // EV reflected (entropy field)
	psn     wire.PSN
	ts      uint16 // timestamp echoed
	m       wire.MultipathVerdict
	reason  wire.NackReason
	reqID   uint16
	probeID uint16
	epOp    wire.EndpointOp
}

type ctrlRing struct {
	buf []ctrlItem
	hd  int
	n   int
}

func (r *ctrlRing) init(n int) { r.buf = make([]ctrlItem, n) }

func (r *ctrlRing) push(it ctrlItem) bool {
	if r.n == len(r.buf) {
		return false
	}
	r.buf[(r.hd+r.n)%len(r.buf)] = it
	r.n++
	return true
}

func (r *ctrlRing) pop() ctrlItem {
	it := r.buf[r.hd]
	r.buf[r.hd] = ctrlItem{}
	r.hd = (r.hd + 1) % len(r.buf)
	r.n--
	return it
}

func (e *Engine) queueCtrl(it ctrlItem) {
	if !e.ctrl.push(it) {
		e.stats.CtrlDropped++
	}
}

// sendCtrl builds and emits one queued control packet.
func (e *Engine) sendCtrl(it ctrlItem, emit func(wire.Plane, []byte)) {
	if it.kind == ctrlEPResp {
		e.resetTx()
		ev, ok := e.randomEV(it.peer, e.localUp&it.peer.remoteUp)
		if !ok {
			ev = wire.MakeEV(it.port, 0, e.rng.Uint32())
		}
		pl, ok := e.fillNet(it.peer, ev)
		if !ok {
			e.stats.TxNoRoute++
			return
		}
		t := &e.tx
		t.DSCP, t.ECN = wire.DSCPControl, wire.ECNNotECT
		t.Opcode, t.DestQP, t.PSN = wire.OpEndpointResp, wire.QPEndpoint, wire.PSN(it.reqID)
		t.Endpoint = wire.EndpointFields{Op: it.epOp, PortStatusMask: e.localUp, Timestamp: it.ts}
		e.emitFrame(pl, emit)
		return
	}
	q := it.q
	if q.state != QPReady {
		return
	}
	switch it.kind {
	case ctrlSACK, ctrlProbeResp:
		q.sendSACK(it, emit)
	case ctrlNACK:
		q.sendNACK(it, emit)
	case ctrlNAKSeq:
		q.sendNAKSeq(it, emit)
	case ctrlAck:
		q.sendTransportACK(emit)
	case ctrlCNP:
		q.sendCNP(emit)
	}
}
