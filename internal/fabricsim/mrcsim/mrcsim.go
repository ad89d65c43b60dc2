// Package mrcsim runs real MRC engines (internal/mrc) as the hosts of the
// fabric simulator (internal/fabricsim) and drives RDMA Write flows between
// them: the adapter from mrc.Engine to fabricsim.Host, registered memory
// filled from a seed, posting and completion bookkeeping, and goodput
// measurement. The scenario tests of issue 3 live beside it.
//
// It is a separate package so that fabricsim does not import the engine
// (and the engine's own tests may use fabricsim).
package mrcsim

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/softmrc/softmrc/internal/fabricsim"
	"github.com/softmrc/softmrc/internal/mrc"
	"github.com/softmrc/softmrc/internal/wire"
)

// Node adapts one engine to fabricsim.Host and dispatches its completions.
type Node struct {
	ID  int
	E   *mrc.Engine
	Mem *mrc.MemTable
	f   *Fabric
	cq  [64]mrc.Completion
	// Completions is every completion seen, in order (QP errors included).
	Completions []mrc.Completion
}

// HandlePacket implements fabricsim.Host.
func (n *Node) HandlePacket(now int64, port wire.Plane, frame []byte) {
	n.E.HandlePacket(mrc.Time(now), port, frame)
	n.drain(now)
}

// Poll implements fabricsim.Host.
func (n *Node) Poll(now int64, emit func(port wire.Plane, frame []byte)) {
	n.E.Poll(mrc.Time(now), emit)
	n.drain(now)
}

// NextDeadline implements fabricsim.Host.
func (n *Node) NextDeadline() int64 {
	d := n.E.NextDeadline()
	if d == mrc.Never {
		return math.MaxInt64
	}
	return int64(d)
}

// PortDown implements fabricsim.Host: carrier loss on the NIC port.
func (n *Node) PortDown(now int64, p wire.Plane) { n.E.SetPortState(mrc.Time(now), p, false) }

// PortUp implements fabricsim.Host.
func (n *Node) PortUp(now int64, p wire.Plane) { n.E.SetPortState(mrc.Time(now), p, true) }

func (n *Node) drain(now int64) {
	for {
		k := n.E.PollCQ(n.cq[:])
		if k == 0 {
			return
		}
		for _, c := range n.cq[:k] {
			n.Completions = append(n.Completions, c)
			if fl := n.f.byQP[qpKey{n.ID, c.QPN}]; fl != nil {
				fl.complete(now, c)
			}
		}
	}
}

// Fabric is a simulator with an engine on every host.
type Fabric struct {
	Sim   *fabricsim.Sim
	Nodes []*Node
	Flows []*Flow
	byQP  map[qpKey]*Flow
	seed  uint64
}

type qpKey struct {
	node int
	qpn  wire.QPN
}

// New builds the fabric of sc and an engine on every host. ec is the engine
// configuration template: Planes, Mode, Template and Addrs are filled in per
// host, MaxBurst, when zero, becomes 2 × planes (a Poll then emits about
// two frames per port, which keeps the NIC queues as shallow as
// fabricsim.Config.NICTxRingBytes intends) and PortRate, when zero, the host
// links' rate (the engine paces each port, as the daemon will from the
// link speed); tune, when non-nil, may adjust
// each host's configuration further. Engine h's randomness is seeded from
// (seed, h).
func New(sc fabricsim.Config, ec mrc.Config, seed uint64, tune func(h int, c *mrc.Config)) (*Fabric, error) {
	s, err := fabricsim.New(sc)
	if err != nil {
		return nil, err
	}
	cfg := s.Config()
	f := &Fabric{Sim: s, byQP: map[qpKey]*Flow{}, seed: seed}
	for h := 0; h < cfg.Hosts(); h++ {
		c := ec
		c.Planes = cfg.Planes
		if cfg.Mode == fabricsim.ModeSRv6 {
			c.Mode = mrc.SRv6
			if c.Template, err = cfg.Template(h); err != nil {
				return nil, err
			}
		} else {
			c.Mode = mrc.ECMP
		}
		c.Addrs = cfg.HostAddrs(h)
		if c.MaxBurst == 0 {
			c.MaxBurst = 2 * cfg.Planes
		}
		if c.PortRate == 0 {
			c.PortRate = cfg.Host.RateBps / 1e9 // the engine paces each port at its line rate
		}
		if tune != nil {
			tune(h, &c)
		}
		mem := mrc.NewMemTable()
		e, err := mrc.New(c, mem, rand.New(rand.NewPCG(seed, uint64(h)+1)))
		if err != nil {
			return nil, fmt.Errorf("host %d: %w", h, err)
		}
		n := &Node{ID: h, E: e, Mem: mem, f: f}
		f.Nodes = append(f.Nodes, n)
		s.SetHost(h, n)
	}
	return f, nil
}

// Flow is one QP pair writing Size bytes from a source buffer on the sender
// into a registered region on the receiver, MsgSize bytes per work request,
// at most Depth requests outstanding.
type Flow struct {
	f            *Fabric
	Src, Dst     int
	SQ, RQ       wire.QPN // sender's and receiver's QP numbers
	Size         int
	MsgSize      int
	Depth        int
	Imm          bool // post Write-with-Immediate
	src, dst     []byte
	rkey         uint32
	posted, done int
	outstanding  int
	// Start is when the first request was posted; End when the last one
	// completed (0 while running).
	Start, End int64
	// Progress samples (time, bytes completed) at every completion.
	Progress []Sample
	// Errors are failed completions (status not OK) and QP errors.
	Errors []mrc.Completion
	// Imms are the immediates delivered at the receiver, in order.
	Imms []uint32
}

// Sample is one progress point.
type Sample struct {
	T     int64
	Bytes int
}

// Connect makes a QP pair from host src to host dst with qc on both ends and
// prepares a flow of size bytes (the source filled with seeded random bytes).
// Start posts its requests.
func (f *Fabric) Connect(src, dst int, qc mrc.QPConfig, size, msgSize, depth int) (*Flow, error) {
	a, b := f.Nodes[src], f.Nodes[dst]
	// Each flow is its own application: its own protection domain on both
	// hosts, so a flow's writes can only land in its own region.
	id := len(f.Flows)
	qc.PD = uint32(id + 1)
	sq, err := a.E.CreateQP(qc)
	if err != nil {
		return nil, err
	}
	rq, err := b.E.CreateQP(qc)
	if err != nil {
		return nil, err
	}
	ai, _ := a.E.Info(sq)
	bi, _ := b.E.Info(rq)
	if err := a.E.Connect(sq, bi); err != nil {
		return nil, fmt.Errorf("connect sender: %w", err)
	}
	if err := b.E.Connect(rq, ai); err != nil {
		return nil, fmt.Errorf("connect receiver: %w", err)
	}
	fl := &Flow{f: f, Src: src, Dst: dst, SQ: sq, RQ: rq, Size: size, MsgSize: msgSize, Depth: depth,
		src: make([]byte, size), dst: make([]byte, size), rkey: uint32(0x1000 + id)}
	r := rand.New(rand.NewPCG(f.seed^0xabcdef, uint64(id)))
	for i := 0; i+8 <= size; i += 8 {
		v := r.Uint64()
		for k := 0; k < 8; k++ {
			fl.src[i+k] = byte(v >> (8 * k))
		}
	}
	b.Mem.RegisterPD(qc.PD, 0, fl.rkey, fl.remoteVA(), fl.dst, mrc.AccessLocalWrite|mrc.AccessRemoteWrite)
	f.Flows = append(f.Flows, fl)
	f.byQP[qpKey{src, sq}] = fl
	f.byQP[qpKey{dst, rq}] = fl
	return fl, nil
}

func (fl *Flow) remoteVA() uint64 { return 0x10_0000_0000 * uint64(fl.rkey) }

// StartAt posts the flow's first requests at time t.
func (fl *Flow) StartAt(t int64) {
	fl.f.Sim.At(t, func() {
		fl.Start = fl.f.Sim.Now()
		fl.post()
	})
}

func (fl *Flow) post() {
	e := fl.f.Nodes[fl.Src].E
	for fl.outstanding < fl.Depth && fl.posted < fl.Size {
		n := min(fl.MsgSize, fl.Size-fl.posted)
		wr := mrc.WR{ID: uint64(fl.posted), Op: mrc.OpWrite, Local: fl.src[fl.posted : fl.posted+n],
			Len: uint32(n), RemoteVA: fl.remoteVA() + uint64(fl.posted), RKey: fl.rkey}
		if fl.Imm {
			wr.Op, wr.Imm = mrc.OpWriteImm, uint32(fl.posted/fl.MsgSize)
		}
		if err := e.PostWrite(fl.SQ, wr); err != nil {
			fl.Errors = append(fl.Errors, mrc.Completion{Kind: mrc.CompQPError, Status: mrc.StatusFlushed, QPN: fl.SQ})
			return
		}
		fl.posted += n
		fl.outstanding++
	}
	fl.f.Sim.Wake(fl.Src)
}

func (fl *Flow) complete(now int64, c mrc.Completion) {
	switch {
	case c.Kind == mrc.CompRecvImm:
		fl.Imms = append(fl.Imms, c.Imm)
	case c.Kind == mrc.CompQPError || c.Status != mrc.StatusOK:
		fl.Errors = append(fl.Errors, c)
	case c.Kind == mrc.CompSend && c.QPN == fl.SQ:
		fl.outstanding--
		fl.done += int(c.Len)
		fl.Progress = append(fl.Progress, Sample{now, fl.done})
		if fl.done >= fl.Size && fl.End == 0 {
			fl.End = now
		}
		fl.post()
	}
}

// Done reports whether every byte has been acknowledged.
func (fl *Flow) Done() bool { return fl.End != 0 }

// Completed is the number of bytes acknowledged so far.
func (fl *Flow) Completed() int { return fl.done }

// Exact reports whether the receiver's region holds exactly the source bytes.
func (fl *Flow) Exact() bool { return bytes.Equal(fl.src, fl.dst) }

// FirstDiff is the first offset where destination and source differ (-1: none).
func (fl *Flow) FirstDiff() int {
	for i := range fl.src {
		if fl.src[i] != fl.dst[i] {
			return i
		}
	}
	return -1
}

// Goodput is the flow's payload rate in bit/s over the whole transfer.
func (fl *Flow) Goodput() float64 {
	if fl.End <= fl.Start {
		return 0
	}
	return float64(fl.done) * 8 / (float64(fl.End-fl.Start) / 1e9)
}

// BytesAt is the bytes completed at time t (from the progress samples).
func (fl *Flow) BytesAt(t int64) int {
	lo, hi := 0, len(fl.Progress)
	for lo < hi {
		m := (lo + hi) / 2
		if fl.Progress[m].T <= t {
			lo = m + 1
		} else {
			hi = m
		}
	}
	if lo == 0 {
		return 0
	}
	return fl.Progress[lo-1].Bytes
}

// GoodputIn is the payload rate in bit/s over [t0, t1).
func (fl *Flow) GoodputIn(t0, t1 int64) float64 {
	return float64(fl.BytesAt(t1)-fl.BytesAt(t0)) * 8 / (float64(t1-t0) / 1e9)
}

// Snapshot is the sender QP's snapshot.
func (fl *Flow) Snapshot() mrc.QPSnapshot {
	var s mrc.QPSnapshot
	_ = fl.f.Nodes[fl.Src].E.Snapshot(fl.SQ, &s)
	return s
}

// RecvSnapshot is the receiver QP's snapshot.
func (fl *Flow) RecvSnapshot() mrc.QPSnapshot {
	var s mrc.QPSnapshot
	_ = fl.f.Nodes[fl.Dst].E.Snapshot(fl.RQ, &s)
	return s
}

// RunUntilDone runs the simulation until every flow is done (or failed), or
// the clock passes limit. It reports whether all flows finished.
func (f *Fabric) RunUntilDone(limit int64) bool {
	return f.Sim.RunWhile(func() bool {
		for _, fl := range f.Flows {
			if !fl.Done() && len(fl.Errors) == 0 {
				return true
			}
		}
		return false
	}, limit)
}

// PayloadEfficiency is the payload share of the wire bytes of a full data
// packet of mtu payload bytes in mode m: payload / (frame + wire overhead).
// The frame carries TSETH (the engine stamps every data packet) and, in SRv6
// mode, the outer IPv6 header.
func PayloadEfficiency(mtu int, m fabricsim.Mode, overhead int) float64 {
	p := wire.Packet{Opcode: wire.OpWriteMiddle, HasTS: true, Encap: m == fabricsim.ModeSRv6, Payload: make([]byte, mtu)}
	return float64(mtu) / float64(p.Len()+overhead)
}

// Jain is Jain's fairness index of xs.
func Jain(xs []float64) float64 {
	var s, s2 float64
	for _, x := range xs {
		s += x
		s2 += x * x
	}
	if s2 == 0 {
		return 0
	}
	return s * s / (float64(len(xs)) * s2)
}
