package daemon

import (
	"github.com/softmrc/softmrc/internal/mrc"
	"github.com/softmrc/softmrc/nic/xsk"
)

// txBatch is the most frames handed to a port in one Send.
const txBatch = 64

// txQueueLen bounds the frames waiting for a port (full ring, or pacing).
const txQueueLen = 4096

// pollRoom is the free room every port queue needs before the engine is
// polled: a data burst (64) plus a control backlog.
const pollRoom = 1024

// portTx is one port's transmit queue: frames copied out of the engine's
// Poll, sent in batches, paced by a token bucket when the port has a rate.
type portTx struct {
	bufs   [][]byte // ring of txQueueLen frame buffers
	head   int      // first queued
	n      int      // queued
	batch  [][]byte
	rate   float64 // bytes per ns; 0 = unpaced
	tokens float64 // bytes
	burst  float64
	last   mrc.Time
}

func (t *portTx) init(bps uint64) {
	t.bufs = make([][]byte, txQueueLen)
	for i := range t.bufs {
		t.bufs[i] = make([]byte, 0, xsk.FrameSize)
	}
	t.batch = make([][]byte, 0, txBatch)
	if bps > 0 {
		t.rate = float64(bps) / 8 / 1e9
		// A burst of 32 KiB (or 20 µs at the rate) keeps sends batched
		// without bursting much beyond the rate.
		t.burst = max(32<<10, t.rate*20e3)
		t.tokens = t.burst
	}
}

func (t *portTx) room() int { return len(t.bufs) - t.n }

// slot is the buffer the next frame is encoded into (nil when the queue is
// full); push queues it once n bytes are written.
func (t *portTx) slot() []byte {
	if t.n == len(t.bufs) {
		return nil
	}
	b := t.bufs[(t.head+t.n)%len(t.bufs)]
	return b[:cap(b)]
}

func (t *portTx) push(n int) []byte {
	i := (t.head + t.n) % len(t.bufs)
	t.bufs[i] = t.bufs[i][:n]
	t.n++
	return t.bufs[i]
}

func (t *portTx) refill(now mrc.Time) {
	if t.rate == 0 {
		return
	}
	if now > t.last {
		t.tokens = min(t.burst, t.tokens+float64(now-t.last)*t.rate)
	}
	t.last = now
}

// flush sends what the port and the token bucket allow.
func (t *portTx) flush(p xsk.Port, now mrc.Time, c *counters) int {
	t.refill(now)
	sent := 0
	for t.n > 0 {
		t.batch = t.batch[:0]
		for k := 0; k < t.n && len(t.batch) < txBatch; k++ {
			f := t.bufs[(t.head+k)%len(t.bufs)]
			if t.rate > 0 {
				if t.tokens < float64(len(f)) {
					break
				}
				t.tokens -= float64(len(f))
			}
			t.batch = append(t.batch, f)
		}
		if len(t.batch) == 0 {
			break
		}
		n, err := p.Send(t.batch)
		if t.rate > 0 && n < len(t.batch) {
			// Give back the tokens of frames the port refused.
			for _, f := range t.batch[n:] {
				t.tokens += float64(len(f))
			}
		}
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

// next is when the head frame can go (mrc.Never when nothing waits or the
// port is unpaced: then the port's own readiness wakes the loop).
func (t *portTx) next(now mrc.Time) mrc.Time {
	if t.n == 0 {
		return mrc.Never
	}
	if t.rate == 0 {
		return now + 20*mrc.Microsecond // ring full: retry soon
	}
	need := float64(len(t.bufs[t.head])) - t.tokens
	if need <= 0 {
		return now
	}
	return now + mrc.Time(need/t.rate) + 1
}
