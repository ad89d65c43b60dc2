package daemon

import (
	"github.com/softmrc/softmrc/internal/mrc"
	"github.com/softmrc/softmrc/nic/xsk"
)

// txBatch is the most frames handed to a port in one Send.
const txBatch = 64

// txQueueLen bounds the frames waiting for a port's TX ring to take them.
const txQueueLen = 4096

// pollRoom is the free room every port queue needs before the engine is
// polled: a data burst (64) plus a control backlog.
const pollRoom = 1024

// portTx is one port's transmit queue: frames the engine's Poll encoded,
// sent in batches. It holds a frame only while the port's ring is full; it
// does not pace. The engine is the one pacer (a port's PacingBps is its
// plane's rate in the engine, EngineConfig): a second pacer here would hold
// frames the engine already counted as sent, their ACK timers running, and
// it did (TestPacedPorts: 1-6 % of a paced write retransmitted on a
// lossless pipe, every one by timeout).
//
// Frames are built straight in the port's transmit buffers (the UMEM on an
// AF_XDP port: one payload copy, from the application's memory, per frame)
// while the port has room and nothing is queued; only when it is full do
// they go to the queue's own buffers, to be copied to the port later in
// order.
type portTx struct {
	bufs  [][]byte // ring of txQueueLen frame buffers
	head  int      // first queued
	n     int      // queued
	batch [][]byte

	port    xsk.Port // where slot asks for a transmit buffer first
	direct  []byte   // the port's buffer slot last returned (nil: a queue buffer)
	pending int      // frames committed to the port, not yet flushed
}

func (t *portTx) init(p xsk.Port) {
	t.port = p
	t.bufs = make([][]byte, txQueueLen)
	size := xsk.FrameSize
	if m, ok := p.(interface{ MaxFrame() int }); ok {
		size = m.MaxFrame() // a 4 KiB RoCE MTU frame needs a multi-buffer slot
	}
	for i := range t.bufs {
		t.bufs[i] = make([]byte, 0, size)
	}
	t.batch = make([][]byte, 0, txBatch)
}

func (t *portTx) room() int { return len(t.bufs) - t.n }

// slot is the buffer the next frame is encoded into (nil when the queue is
// full): the port's own while it has room and nothing waits in the queue
// (frames leave in order), else the queue's. push queues it once n bytes
// are written and returns the frame.
func (t *portTx) slot() []byte {
	t.direct = nil
	if t.n == 0 && t.port != nil {
		if b := t.port.TxSlot(); b != nil {
			t.direct = b
			return b
		}
	}
	if t.n == len(t.bufs) {
		return nil
	}
	b := t.bufs[(t.head+t.n)%len(t.bufs)]
	return b[:cap(b)]
}

func (t *portTx) push(n int) []byte {
	if d := t.direct; d != nil {
		t.direct = nil
		// TxSlot just returned this buffer and n fits it (the encoder
		// wrote n bytes into it), so TxCommit has nothing to refuse.
		if err := t.port.TxCommit(n); err == nil {
			t.pending++
			return d[:n]
		}
		return nil
	}
	i := (t.head + t.n) % len(t.bufs)
	t.bufs[i] = t.bufs[i][:n]
	t.n++
	return t.bufs[i]
}

// flush sends what the port's ring takes.
func (t *portTx) flush(p xsk.Port, c *counters) int {
	sent := 0
	if t.pending > 0 {
		// The frames built in the port go first: whatever is queued was
		// encoded after them.
		n, _ := p.TxFlush()
		t.pending = 0
		sent += n
		c.txFrames.Add(uint64(n))
	}
	for t.n > 0 {
		t.batch = t.batch[:0]
		for k := 0; k < t.n && len(t.batch) < txBatch; k++ {
			t.batch = append(t.batch, t.bufs[(t.head+k)%len(t.bufs)])
		}
		n, err := p.Send(t.batch)
		t.head = (t.head + n) % len(t.bufs)
		t.n -= n
		sent += n
		c.txFrames.Add(uint64(n))
		if err != nil || n < len(t.batch) {
			break
		}
	}
	return sent
}

// next is when to retry a port whose ring was full (mrc.Never when nothing
// waits).
func (t *portTx) next(now mrc.Time) mrc.Time {
	if t.n == 0 {
		return mrc.Never
	}
	return now + 20*mrc.Microsecond
}
