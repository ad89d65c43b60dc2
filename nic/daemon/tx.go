package daemon

import (
	"github.com/softmrc/softmrc/internal/mrc"
	"github.com/softmrc/softmrc/nic/xsk"
)

// pollRoom is the free transmit frames every port needs before the engine
// is polled: a data burst (64) plus a control backlog. A port with fewer
// frames in all (an in-memory test pipe) needs half of them.
const pollRoom = 1024

// txRetry is how soon an idle loop looks again at a port that was too full
// to poll the engine: its completions arrive without a readable fd.
const txRetry = 20 * mrc.Microsecond

// portTx is one port's transmit side: the engine encodes each frame
// straight into one of the port's own transmit frames (TxSlot: a UMEM
// chunk on an AF_XDP port), so a data payload is copied once, from the
// application's registered memory into the frame, and nothing is
// allocated per frame. There is no queue of its own: the port's bounded
// frame pool is the only buffer, and its free frames are the room the
// engine is polled against (ready). Frames reach the kernel in the order
// they were built, each TxFlush publishing what was committed since the
// last. It does not pace: the engine is the one pacer (a port's PacingBps
// is its plane's rate in the engine, EngineConfig); a second pacer here
// would hold frames the engine already counted as sent, their ACK timers
// running, and it did (TestPacedPorts: 1-6 % of a paced write
// retransmitted on a lossless pipe, every one by timeout).
//
// A delayed port (delay.go) hands out its delay line's buffers instead:
// the one copy there is from the line into the UMEM when a frame is due.
type portTx struct {
	port    xsk.Port
	need    int    // room (free frames) the port needs before a Poll
	last    []byte // the buffer slot last returned (nil: none)
	pending int    // frames committed, not yet flushed
	blocked bool   // the last ready found too little room: retry soon
}

func (t *portTx) init(p xsk.Port) {
	t.port = p
	t.need = max(1, min(pollRoom, p.TxRoom()/2))
}

// ready reports whether the port has room for what one Poll may emit. The
// engine cannot be told to stop mid-Poll (a frame with no buffer is
// dropped and recovered as a loss), so it is polled only when every port
// is ready; a port that is not counts the wait and asks the idle loop to
// look again soon (next).
func (t *portTx) ready(c *counters) bool {
	t.blocked = t.port.TxRoom() < t.need
	if t.blocked {
		c.txRoomWaits.Add(1)
	}
	return !t.blocked
}

// slot is the port's buffer the next frame is encoded into, or nil when
// the port has no free frame.
func (t *portTx) slot() []byte {
	t.last = t.port.TxSlot()
	return t.last
}

// push commits the n bytes written into the last slot and returns the
// frame (valid until the next slot), or nil when there was no slot.
func (t *portTx) push(n int) []byte {
	b := t.last
	t.last = nil
	// slot just returned b and n fits it (the encoder wrote n bytes into
	// it), so TxCommit has nothing to refuse.
	if b == nil || t.port.TxCommit(n) != nil {
		return nil
	}
	t.pending++
	return b[:n]
}

// flush hands the committed frames to the kernel with at most one kick.
func (t *portTx) flush(c *counters) int {
	if t.pending == 0 {
		return 0
	}
	n, _ := t.port.TxFlush()
	t.pending = 0
	c.txFrames.Add(uint64(n))
	return n
}

// next is when to look at a port again that was too full to poll the
// engine (mrc.Never when it was not).
func (t *portTx) next(now mrc.Time) mrc.Time {
	if !t.blocked {
		return mrc.Never
	}
	return now + txRetry
}
