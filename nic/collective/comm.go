// Package collective runs collectives over the verbs API: ring all-reduce
// (reduce-scatter then all-gather, float32 sum) and all-to-all across the
// ranks of a group, each rank a process with its own NIC device. It knows
// nothing of the engine or the transport: a rank connects one or several
// QPs to every peer (verbs.QPConfig passes the transport through) and moves
// data only with RDMA Write-with-Immediate into the peer's slot FIFOs,
// paced by credits (verbs.CreditSender / CreditReceiver), as the MRC seed
// describes collectives built from one-sided writes plus immediates.
//
// Buffers are cut into pieces that fit a slot, so any size works and the
// ring pipelines: a piece is forwarded as soon as it is reduced. See
// docs/collectives.md.
package collective

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
	"unsafe"

	"github.com/softmrc/softmrc/nic/verbs"
)

// Exchanger is the out-of-band all-gather a group is formed with
// (rendezvous.Group is one).
type Exchanger interface {
	Rank() int
	Size() int
	AllGather(ctx context.Context, blob []byte) ([][]byte, error)
}

// Config tunes a communicator. Zero fields take the defaults.
type Config struct {
	// QPsPerPeer is how many QPs connect this rank to each peer (default
	// 1); messages to a peer are striped over them.
	QPsPerPeer int
	// Slots is the FIFO depth per QP (default 8): messages in flight on it.
	Slots int
	// SlotSize is the largest message in bytes, a multiple of 4 (default
	// 64 KiB).
	SlotSize int
	// QP is the configuration of every QP (transport, send queue depth).
	QP verbs.QPConfig
	// Stall fails an operation that gets no completion for this long
	// (default 30 s): a peer that died or a QP that broke ends the run
	// instead of hanging it.
	Stall time.Duration
	// AllReduce is the all-reduce algorithm (default AlgoAuto).
	AllReduce Algo
	// DirectMax is AlgoAuto's largest direct all-reduce in bytes per rank
	// (default DefaultDirectMax).
	DirectMax int
}

func (c *Config) defaults() error {
	if c.QPsPerPeer == 0 {
		c.QPsPerPeer = 1
	}
	if c.Slots == 0 {
		c.Slots = 8
	}
	if c.SlotSize == 0 {
		c.SlotSize = 64 << 10
	}
	if c.Stall == 0 {
		c.Stall = 30 * time.Second
	}
	if c.DirectMax == 0 {
		c.DirectMax = DefaultDirectMax
	}
	switch {
	case c.AllReduce < AlgoAuto || c.AllReduce > AlgoDirect:
		return fmt.Errorf("collective: all-reduce algorithm %v: want auto, ring or direct", c.AllReduce)
	case c.DirectMax < 0:
		return fmt.Errorf("collective: direct all-reduce limit %d bytes: want 0 (the default, %d) or more", c.DirectMax, DefaultDirectMax)
	case c.QPsPerPeer < 1 || c.QPsPerPeer > 256:
		return fmt.Errorf("collective: %d QPs per peer: want 1..256", c.QPsPerPeer)
	case c.Slots < 1 || c.Slots > verbs.MaxCreditSlots:
		return fmt.Errorf("collective: %d slots per QP: want 1..%d", c.Slots, verbs.MaxCreditSlots)
	case c.SlotSize < 4 || c.SlotSize%4 != 0 || c.SlotSize > 16<<20:
		return fmt.Errorf("collective: slot size %d: want a multiple of 4 bytes up to 16 MiB", c.SlotSize)
	}
	return nil
}

// Tags: bit 23 is the parity of the operation (a fast peer may start the
// next one while this rank finishes the current), bits 22..0 the message's
// sequence number in the operation.
const (
	epochBit = 1 << 23
	seqMask  = epochBit - 1
)

// Comm is a communicator: this rank's QPs to every peer. It is not safe for
// concurrent use; operations run one at a time, in the same order on every
// rank, with the same element counts.
type Comm struct {
	dev   *verbs.Device
	ex    Exchanger
	cfg   Config
	rank  int
	size  int
	links []*link // by peer rank; nil at this rank
	byQPN map[uint32]*qpLink
	cs    []verbs.Completion
	epoch uint32
	early []early
	cur   *op // the operation running
	wrs   []verbs.SendWR
	// broken is the error that left an operation half done.
	broken error
	tmp    []float32 // in-place all-to-all: the send buffer's copy
	gather []float32 // direct all-reduce: every rank's contribution
	st     Stats
}

// link is everything toward one peer.
type link struct {
	peer  int
	qps   []*qpLink
	stage *verbs.MR // the local copy of every slot, QPs × Slots × SlotSize
	fifo  *verbs.MR // this rank's receive FIFOs, same shape
}

type qpLink struct {
	l       *link
	idx     int
	qp      *verbs.QP
	tx      *verbs.CreditSender
	rx      *verbs.CreditReceiver
	queue   []int // sequence numbers ready to send in this operation
	release int   // messages consumed, credits not yet returned
	relBig  bool  // one of them carried creditEagerBytes or more
}

// early is a message of the next operation that arrived before this one
// ended; its slot stays held until the next operation takes it.
type early struct {
	q   *qpLink
	seq int
	msg verbs.Message
}

// Stats counts what the communicator moved.
type Stats struct {
	Ops          uint64
	MessagesSent uint64
	BytesSent    uint64
	Credits      uint64 // credit immediates received
}

type qpInfo struct {
	Conn verbs.Remote `json:"conn"` // the QP's ConnectInfo
	FIFO verbs.Slots  `json:"fifo"`
}

type rankInfo struct {
	Peers [][]qpInfo `json:"peers"` // by peer rank
	Slots int        `json:"slots"`
	Size  int        `json:"slot_size"`
	QPs   int        `json:"qps"`
	// Transport: both ends of a QP must agree, and the NIC cannot tell.
	Transport verbs.Transport `json:"transport"`
	// Every rank must pick the same all-reduce algorithm for a count.
	Algo      Algo `json:"algo"`
	DirectMax int  `json:"direct_max"`
}

// New creates this rank's QPs and buffers, exchanges connection data over
// ex and connects every QP. Every rank must call it with the same Config.
func New(ctx context.Context, dev *verbs.Device, ex Exchanger, cfg Config) (c *Comm, err error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	comm := &Comm{dev: dev, ex: ex, cfg: cfg, rank: ex.Rank(), size: ex.Size(), byQPN: map[uint32]*qpLink{},
		cs: make([]verbs.Completion, 256), links: make([]*link, ex.Size())}
	c = comm
	defer func() {
		if err != nil {
			comm.destroy() // c is nil by now
		}
	}()
	me := rankInfo{Peers: make([][]qpInfo, c.size), Slots: cfg.Slots, Size: cfg.SlotSize, QPs: cfg.QPsPerPeer, Transport: cfg.QP.Transport,
		Algo: cfg.AllReduce, DirectMax: cfg.DirectMax}
	region := cfg.QPsPerPeer * cfg.Slots * cfg.SlotSize
	for peer := range c.links {
		if peer == c.rank {
			continue
		}
		l := &link{peer: peer}
		c.links[peer] = l
		// Staging is only read by the NIC; credits are zero-length writes,
		// which name no memory.
		if l.stage, err = dev.RegMR(region, verbs.AccessLocalWrite); err != nil {
			return nil, fmt.Errorf("collective: staging for rank %d: %w", peer, err)
		}
		if l.fifo, err = dev.RegMR(region, verbs.AccessLocalWrite|verbs.AccessRemoteWrite); err != nil {
			return nil, fmt.Errorf("collective: receive FIFO for rank %d: %w", peer, err)
		}
		for k := 0; k < cfg.QPsPerPeer; k++ {
			qp, err := dev.CreateQP(cfg.QP)
			if err != nil {
				return nil, fmt.Errorf("collective: QP %d to rank %d: %w", k, peer, err)
			}
			q := &qpLink{l: l, idx: k, qp: qp}
			l.qps = append(l.qps, q)
			c.byQPN[qp.QPN] = q
			me.Peers[peer] = append(me.Peers[peer], qpInfo{Conn: qp.ConnectInfo(),
				FIFO: verbs.Slots{Addr: l.fifo.Addr + uint64(k*cfg.Slots*cfg.SlotSize), RKey: l.fifo.RKey, Count: cfg.Slots, Size: cfg.SlotSize}})
		}
	}
	blob, err := json.Marshal(me)
	if err != nil {
		return nil, err
	}
	all, err := ex.AllGather(ctx, blob)
	if err != nil {
		return nil, fmt.Errorf("collective: exchanging connection data: %w", err)
	}
	for peer, l := range c.links {
		if l == nil {
			continue
		}
		var them rankInfo
		if err := json.Unmarshal(all[peer], &them); err != nil {
			return nil, fmt.Errorf("collective: rank %d's connection data: %w", peer, err)
		}
		if them.Algo != cfg.AllReduce || them.DirectMax != cfg.DirectMax {
			return nil, fmt.Errorf("collective: rank %d runs all-reduce %v (direct up to %d B), this rank %v (direct up to %d B): start every rank with the same options",
				peer, them.Algo, them.DirectMax, cfg.AllReduce, cfg.DirectMax)
		}
		if them.QPs != cfg.QPsPerPeer || them.Slots != cfg.Slots || them.Size != cfg.SlotSize || len(them.Peers) != c.size || them.Transport != cfg.QP.Transport {
			return nil, fmt.Errorf("collective: rank %d runs %v with %d QPs x %d slots x %d B in a group of %d, this rank %v with %d x %d x %d B in %d: start every rank with the same options",
				peer, them.Transport, them.QPs, them.Slots, them.Size, len(them.Peers), cfg.QP.Transport, cfg.QPsPerPeer, cfg.Slots, cfg.SlotSize, c.size)
		}
		theirs := them.Peers[c.rank]
		for k, q := range l.qps {
			r := theirs[k]
			if err := q.qp.Connect(r.Conn); err != nil {
				return nil, fmt.Errorf("collective: connect QP %d to rank %d: %w", k, peer, err)
			}
			if q.tx, err = verbs.NewCreditSender(q.qp, r.FIFO); err != nil {
				return nil, err
			}
			if q.rx, err = verbs.NewCreditReceiver(q.qp, l.fifo, uint64(k*cfg.Slots*cfg.SlotSize), cfg.Slots, cfg.SlotSize, verbs.CreditTarget{}); err != nil {
				return nil, err
			}
			q.rx.IDBase = 1 << 62
		}
	}
	// Nobody writes before every rank has connected its QPs.
	if _, err := ex.AllGather(ctx, nil); err != nil {
		return nil, fmt.Errorf("collective: waiting for every rank to connect: %w", err)
	}
	return c, nil
}

// Rank is this process's rank.
func (c *Comm) Rank() int { return c.rank }

// Size is the number of ranks.
func (c *Comm) Size() int { return c.size }

// Stats returns the counters.
func (c *Comm) Stats() Stats { return c.st }

// Close waits until every rank is done (so no credit of this rank is still
// on its way when its QPs go), then destroys the QPs and regions.
func (c *Comm) Close(ctx context.Context) error {
	_, err := c.ex.AllGather(ctx, nil)
	c.destroy()
	return err
}

func (c *Comm) destroy() {
	for _, l := range c.links {
		if l == nil {
			continue
		}
		for _, q := range l.qps {
			q.qp.Destroy()
		}
		if l.stage != nil {
			l.stage.Close()
		}
		if l.fifo != nil {
			l.fifo.Close()
		}
	}
}

// op is one operation's schedule as the progress loop needs it.
type op struct {
	name string
	// src is what message (peer, seq) carries, read when it is posted.
	src func(peer, seq int) []float32
	// deliver applies message (peer, seq) and returns the send it makes
	// ready, if any: message next to peer to. An error is a message the
	// schedule has no place for.
	deliver func(peer, seq int, data []float32) (to, next int, ok bool, err error)
	// recvLen is how many elements message (peer, seq) carries.
	recvLen func(peer, seq int) int
	want    int // messages to receive
}

// run posts the ready messages as credits allow and handles completions
// until every message arrived and every message of this rank is posted. An
// error leaves the communicator broken: queues and FIFOs are mid-operation.
func (c *Comm) run(ctx context.Context, o *op, initial map[int][]int) (err error) {
	if c.broken != nil {
		return fmt.Errorf("collective: an earlier operation failed (%w): close the communicator", c.broken)
	}
	defer func() {
		if err != nil {
			c.broken = err
		}
	}()
	c.cur = o
	defer func() { c.cur = nil }()
	c.epoch++
	parity := uint32(0)
	if c.epoch&1 == 1 {
		parity = epochBit
	}
	for peer, seqs := range initial {
		l := c.links[peer]
		for _, s := range seqs {
			q := l.qps[s%len(l.qps)]
			q.queue = append(q.queue, s)
		}
	}
	got := 0
	// Messages of this operation that came during the previous one.
	pending := c.early
	c.early = nil
	for _, e := range pending {
		if err := c.take(o, e.q, e.seq, e.msg, &got); err != nil {
			return err
		}
	}
	last := time.Now()
	for {
		if err := c.post(parity); err != nil {
			return err
		}
		if err := c.flushCredits(); err != nil {
			return err
		}
		if got == o.want && c.posted() {
			c.st.Ops++
			return nil
		}
		n, err := c.dev.PollCQ(c.cs)
		if err != nil {
			return fmt.Errorf("collective: %s: %w", o.name, err)
		}
		if n == 0 {
			if ctx.Err() != nil {
				return fmt.Errorf("collective: %s: %w", o.name, ctx.Err())
			}
			if time.Since(last) > c.cfg.Stall {
				return fmt.Errorf("collective: rank %d: %s stalled for %v with %d of %d messages received and %d credits out (a peer exited or its QP failed?)",
					c.rank, o.name, c.cfg.Stall, got, o.want, c.creditsOut())
			}
			// The poll interval bounds how late ctx is noticed, not the
			// data path: a completion wakes WaitCQ at once.
			if _, err := c.dev.WaitCQ(100 * time.Millisecond); err != nil {
				return fmt.Errorf("collective: %s: %w", o.name, err)
			}
			continue
		}
		last = time.Now()
		for _, cq := range c.cs[:n] {
			if err := c.completion(o, cq, parity, &got); err != nil {
				return fmt.Errorf("collective: rank %d: %s: %w", c.rank, o.name, err)
			}
		}
	}
}

func (c *Comm) completion(o *op, cq verbs.Completion, parity uint32, got *int) error {
	q := c.byQPN[cq.QPN]
	if cq.Status != verbs.StatusSuccess || cq.Op == verbs.CQQPError {
		peer := -1
		if q != nil {
			peer = q.l.peer
		}
		return fmt.Errorf("QP %#06x to rank %d failed: %v (op %v, vendor %#x)", cq.QPN, peer, cq.Status, cq.Op, cq.Vendor)
	}
	if q == nil {
		return fmt.Errorf("completion on unknown QP %#06x", cq.QPN)
	}
	if ok, err := q.tx.OnCompletion(cq); ok || err != nil {
		c.st.Credits++
		return err
	}
	m, ok, err := q.rx.OnCompletion(cq)
	if err != nil || !ok {
		return err
	}
	seq := int(m.Tag & seqMask)
	if m.Tag&epochBit != parity {
		c.early = append(c.early, early{q: q, seq: seq, msg: m})
		return nil
	}
	return c.take(o, q, seq, m, got)
}

// take applies a message of the current operation and queues the send it
// makes ready.
func (c *Comm) take(o *op, q *qpLink, seq int, m verbs.Message, got *int) error {
	peer := q.l.peer
	if *got == o.want {
		return fmt.Errorf("message %d from rank %d: all %d messages of the operation already arrived (ranks run different operations or counts?)", seq, peer, o.want)
	}
	n := o.recvLen(peer, seq)
	if n < 0 {
		return fmt.Errorf("message %d from rank %d is outside the %s's schedule (ranks run different operations or counts?)", seq, peer, o.name)
	}
	if n*4 != len(m.Data) {
		return fmt.Errorf("message %d from rank %d: %d bytes, the schedule expects %d (%d elements; ranks run different counts?)", seq, peer, len(m.Data), n*4, n)
	}
	to, next, ok, err := o.deliver(peer, seq, floats(m.Data[:n*4]))
	if err != nil {
		return err
	}
	*got++
	q.release++
	if len(m.Data) >= creditEagerBytes {
		q.relBig = true
	}
	if ok {
		l := c.links[to]
		nq := l.qps[next%len(l.qps)]
		nq.queue = append(nq.queue, next)
	}
	return nil
}

// post sends queued messages while their QPs hold credits, one PostSend
// (one device-socket message) per QP.
func (c *Comm) post(parity uint32) error {
	for _, l := range c.links {
		if l == nil {
			continue
		}
		for _, q := range l.qps {
			c.wrs = c.wrs[:0]
			for len(q.queue) > 0 && q.tx.Credits() > 0 {
				seq := q.queue[0]
				if seq > seqMask {
					return fmt.Errorf("collective: %d messages to one peer exceed the tag's %d: use a larger slot size", seq+1, seqMask+1)
				}
				data := bytesOf(c.cur.src(l.peer, seq))
				// The slot's credit is in hand: the NIC is done reading
				// the staging slot's previous message.
				slot := q.tx.NextSlot()
				off := (q.idx*c.cfg.Slots + slot) * c.cfg.SlotSize
				copy(l.stage.Buf[off:], data)
				w, err := q.tx.WR(l.stage, uint64(off), len(data), uint32(seq)|parity)
				if err != nil {
					return fmt.Errorf("collective: post to rank %d: %w", l.peer, err)
				}
				c.wrs = append(c.wrs, w)
				q.queue = q.queue[1:]
				c.st.MessagesSent++
				c.st.BytesSent += uint64(len(data))
			}
			if len(c.wrs) > 0 {
				if err := q.qp.PostSend(c.wrs...); err != nil {
					return fmt.Errorf("collective: post to rank %d: %w", l.peer, err)
				}
			}
		}
	}
	return nil
}

// creditEagerBytes is the smallest message whose credit goes back at once
// (flushCredits): 8 frames at a 2 KiB RoCE MTU.
const creditEagerBytes = 16 << 10

// flushCredits returns the credits of the messages consumed, one immediate
// per QP: at once when one of them was large (creditEagerBytes or more),
// else once a QP holds creditBatch of them.
//
// Why both: every credit is a message that wakes the peer's NIC loop and
// its application (a SACK wakes this NIC again), which on a few shared
// cores costs about what a small data message does, so small messages,
// whose collectives are bound by such wakeups, return half the FIFO in one
// immediate. Large messages are bound by the links, and a credit held back
// holds back the peer's next message: batching them in mrc-lab S7 (64 KiB
// messages, 40 Mbit/s links, a FIFO of exactly one operation's 8 messages
// per peer) cut the all-to-all's busbw from 62–66 to 55–56 Mbit/s.
//
// Batching cannot deadlock. A peer out of credits in the operation this
// rank runs has every slot in flight to this rank or consumed here (none
// held early: a peer sends its next operation's messages only after
// posting all of this one's), so once they land this rank holds all of
// them, at least a batch, and returns them. A peer out of credits in its
// next operation waits for this rank to get there, which does not depend
// on that peer.
func (c *Comm) flushCredits() error {
	batch := c.creditBatch()
	for _, l := range c.links {
		if l == nil {
			continue
		}
		for _, q := range l.qps {
			if q.release >= batch || q.release > 0 && q.relBig {
				if err := q.rx.Release(q.release); err != nil {
					return fmt.Errorf("collective: return credits to rank %d: %w", l.peer, err)
				}
				q.release, q.relBig = 0, false
			}
		}
	}
	return nil
}

// creditBatch is how many consumed messages a QP holds before it returns
// their credits: half its slots, at least one.
func (c *Comm) creditBatch() int { return max(1, c.cfg.Slots/2) }

// posted reports whether every message of the operation is posted. The
// operation ends then, without waiting for the last credits: the data sits
// in staging slots that are refilled only with their credit back, so the
// caller's buffers are free, and waiting would add a one-way trip to every
// operation.
func (c *Comm) posted() bool {
	for _, l := range c.links {
		if l == nil {
			continue
		}
		for _, q := range l.qps {
			if len(q.queue) > 0 {
				return false
			}
		}
	}
	return true
}

func (c *Comm) creditsOut() int {
	n := 0
	for _, l := range c.links {
		if l == nil {
			continue
		}
		for _, q := range l.qps {
			n += c.cfg.Slots - q.tx.Credits()
		}
	}
	return n
}

// bytesOf views floats as bytes (host byte order: every rank of a testbed
// runs on this machine).
func bytesOf(f []float32) []byte {
	if len(f) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&f[0])), len(f)*4)
}

// floats views b (4-byte aligned: slots are) as floats.
func floats(b []byte) []float32 {
	if len(b) == 0 {
		return nil
	}
	return unsafe.Slice((*float32)(unsafe.Pointer(&b[0])), len(b)/4)
}
