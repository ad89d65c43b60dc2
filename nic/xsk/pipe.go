package xsk

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultPipeDepth is how many frames a Pipe end queues when NewPipe is given 0.
const DefaultPipeDepth = 4096

// PipePort is one end of an in-memory Port pair: what one end sends, the other
// receives, byte-exact and in order, through a bounded queue (a full queue
// refuses frames, counted as TxFull, as a full transmit ring would). It is for
// tests of the code above the port layer.
type PipePort struct {
	name string
	in   *pipeQueue // frames for this end
	out  *pipeQueue // frames for the peer
	c    counters
	// closed is this end's own state; in.closed tells the peer's sends.
	closed atomic.Bool
	// Drop, when set, is called (on the sender's goroutine) for every frame
	// sent from this end; returning true loses the frame, as a faulty link
	// would. Set it before traffic starts.
	Drop func(frame []byte) bool
	// TxSlot's buffer and the frames committed but not flushed.
	slot []byte
	pend [][]byte
}

type pipeQueue struct {
	mu     sync.Mutex
	frames [][]byte
	depth  int
	closed bool
	ready  chan struct{} // capacity 1: "frames may be available"
}

var _ Port = (*PipePort)(nil)

// NewPipe returns two connected ports named a and b, each queueing up to
// depth frames (0 means DefaultPipeDepth).
func NewPipe(a, b string, depth int) (*PipePort, *PipePort) {
	if depth <= 0 {
		depth = DefaultPipeDepth
	}
	qa := &pipeQueue{depth: depth, ready: make(chan struct{}, 1)}
	qb := &pipeQueue{depth: depth, ready: make(chan struct{}, 1)}
	return &PipePort{name: a, in: qa, out: qb}, &PipePort{name: b, in: qb, out: qa}
}

// Name returns the port's name.
func (p *PipePort) Name() string { return p.name }

// Send copies frames into the peer's queue, after the frames committed
// with TxCommit and not yet flushed.
func (p *PipePort) Send(frames [][]byte) (int, error) {
	if p.closed.Load() {
		return 0, ErrClosed
	}
	if _, err := p.TxFlush(); err != nil {
		return 0, err
	}
	return p.send(frames)
}

func (p *PipePort) send(frames [][]byte) (int, error) {
	q := p.out
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		return 0, ErrClosed
	}
	n := 0
	var bytes uint64
	for _, f := range frames {
		if len(f) == 0 || len(f) > FrameSize {
			q.mu.Unlock()
			p.count(n, bytes)
			return n, fmt.Errorf("xsk: frame %d is %d bytes: must be 1..%d", n, len(f), FrameSize)
		}
		if len(q.frames) >= q.depth {
			break
		}
		n++
		bytes += uint64(len(f))
		if p.Drop != nil && p.Drop(f) {
			continue
		}
		q.frames = append(q.frames, append([]byte(nil), f...))
	}
	q.mu.Unlock()
	if n > 0 {
		select {
		case q.ready <- struct{}{}:
		default:
		}
	}
	p.count(n, bytes)
	if short := len(frames) - n; short > 0 {
		p.c.txFull.Add(uint64(short))
	}
	return n, nil
}

// SendFunc queues up to max frames built by build into fresh buffers. As on
// a Socket, build is called only for frames there is room for.
func (p *PipePort) SendFunc(max int, build func(frame []byte) int) (int, error) {
	if p.closed.Load() {
		return 0, ErrClosed
	}
	if _, err := p.TxFlush(); err != nil {
		return 0, err
	}
	q := p.out
	q.mu.Lock()
	room := q.depth - len(q.frames) // only this end adds to q, so room only grows
	q.mu.Unlock()
	var frames [][]byte
	stopped := false
	for len(frames) < min(max, room) {
		buf := make([]byte, FrameSize)
		l := build(buf)
		if l <= 0 || l > FrameSize {
			stopped = true
			break
		}
		frames = append(frames, buf[:l])
	}
	if !stopped && len(frames) < max {
		p.c.txFull.Add(uint64(max - len(frames)))
	}
	if len(frames) == 0 {
		return 0, nil
	}
	return p.send(frames)
}

// TxSlot returns a buffer for the next frame, or nil when the peer's queue
// has no room for it (counted as TxFull); as on a Socket, TxCommit queues
// it and TxFlush sends what was committed.
func (p *PipePort) TxSlot() []byte {
	if p.closed.Load() {
		return nil
	}
	q := p.out
	q.mu.Lock()
	room := q.depth - len(q.frames) - len(p.pend)
	q.mu.Unlock()
	if room <= 0 {
		p.c.txFull.Add(1)
		return nil
	}
	if p.slot == nil {
		p.slot = make([]byte, FrameSize)
	}
	return p.slot
}

// TxCommit queues the n bytes built in the last TxSlot's buffer.
func (p *PipePort) TxCommit(n int) error {
	if p.closed.Load() {
		return ErrClosed
	}
	if n <= 0 || n > FrameSize || p.slot == nil {
		return fmt.Errorf("xsk: TxCommit of %d bytes: must be 1..%d, after a TxSlot", n, FrameSize)
	}
	p.pend = append(p.pend, p.slot[:n])
	p.slot = nil
	return nil
}

// TxFlush sends the committed frames to the peer.
func (p *PipePort) TxFlush() (int, error) {
	if len(p.pend) == 0 {
		return 0, nil
	}
	n, err := p.send(p.pend)
	clear(p.pend)
	p.pend = p.pend[:0]
	return n, err
}

func (p *PipePort) count(n int, bytes uint64) {
	p.c.txFrames.Add(uint64(n))
	p.c.txBytes.Add(bytes)
	p.c.txCompleted.Add(uint64(n))
}

// RecvFunc hands up to max queued frames to fn.
func (p *PipePort) RecvFunc(max int, fn func(frame []byte)) (int, error) {
	q := p.in
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		return 0, ErrClosed
	}
	n := min(max, len(q.frames))
	batch := q.frames[:n:n]
	q.frames = q.frames[n:]
	if len(q.frames) == 0 {
		q.frames = nil // let the backing array go
	}
	q.mu.Unlock()
	var bytes uint64
	for _, f := range batch {
		fn(f)
		bytes += uint64(len(f))
	}
	p.c.rxFrames.Add(uint64(n))
	p.c.rxBytes.Add(bytes)
	return n, nil
}

// RxPending is how many frames are queued for this end.
func (p *PipePort) RxPending() int {
	q := p.in
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.frames)
}

// Recv copies up to len(bufs) queued frames into bufs.
func (p *PipePort) Recv(bufs [][]byte) (int, error) {
	n := 0
	_, err := p.RecvFunc(len(bufs), func(f []byte) {
		b := bufs[n][:cap(bufs[n])]
		if len(f) > len(b) {
			p.c.rxOversize.Add(1)
			return
		}
		bufs[n] = b[:copy(b, f)]
		n++
	})
	return n, err
}

// Wait blocks until a frame is queued for this end, Wake is called or
// timeout passes.
func (p *PipePort) Wait(timeout time.Duration) error {
	if !p.closed.Load() {
		_, _ = p.TxFlush() // as a Socket's Wait pushes out what is committed
	}
	q := p.in
	q.mu.Lock()
	closed, n := q.closed, len(q.frames)
	q.mu.Unlock()
	if closed {
		return ErrClosed
	}
	if n > 0 {
		return nil
	}
	if timeout < 0 {
		<-q.ready
		return nil
	}
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-q.ready:
	case <-t.C:
	}
	return nil
}

// Wake makes a blocked (or the next) Wait return.
func (p *PipePort) Wake() {
	select {
	case p.in.ready <- struct{}{}:
	default:
	}
}

// Stats returns the counters (the kernel fields stay zero).
func (p *PipePort) Stats() Stats {
	return Stats{
		RxFrames: p.c.rxFrames.Load(), RxBytes: p.c.rxBytes.Load(), RxOversize: p.c.rxOversize.Load(),
		TxFrames: p.c.txFrames.Load(), TxBytes: p.c.txBytes.Load(), TxFull: p.c.txFull.Load(),
		TxCompleted: p.c.txCompleted.Load(),
	}
}

// Close closes this end: its own calls and the peer's sends to it fail with
// ErrClosed, and a Wait blocked on it returns.
func (p *PipePort) Close() error {
	p.closed.Store(true)
	q := p.in
	q.mu.Lock()
	q.closed = true
	q.frames = nil
	q.mu.Unlock()
	select {
	case q.ready <- struct{}{}:
	default:
	}
	return nil
}
