package daemon

import (
	"errors"
	"time"

	"github.com/softmrc/softmrc/internal/mrc"
	"github.com/softmrc/softmrc/nic/xsk"
)

// rxBatch is the most frames taken from a port in one loop turn: then the
// engine transmits (and acknowledges) before the next batch.
const rxBatch = 64

// stallGap is how long without a loop turn means the loop did not run:
// it was descheduled or woke late. A busy turn takes tens of µs; the
// engine's RTOs on a loaded veth are a millisecond and more (srtt 0.3-4.5
// ms, docs/engine.md "Spurious timeouts").
const stallGap = 500 * mrc.Microsecond

// rxPending is a port that can say how many received frames wait in it.
type rxPending interface{ RxPending() int }

// loopClock is the engine's clock: wall time since start, less the time
// the loop did not run while frames queued for it (stalls).
//
// After a stall the engine's timers that fell due meanwhile would run at
// the first transmit, while the ACKs that would stop them still wait in
// the receive rings behind the first batch: spurious timeouts, the EVs
// marked ASSUMED_BAD, duplicates retransmitted, though nothing was lost
// (docs/engine.md "Spurious timeouts"). So a turn that starts more than
// stallGap after the previous one, with at least a receive batch waiting
// in a port, takes the excess off the engine's clock for good: the ACKs
// are read, one batch a turn with the engine transmitting between, before
// any timer has seen the stall. The clock must not jump back to wall time
// afterwards: the packets sent while reading the backlog would all look a
// stall old and time out.
//
// Reading the whole backlog before transmitting, instead, holds the ACKs
// this host owes its peer for as long (measured: the bulk rate fell 2-3x
// under CPU load). A loop that slept on purpose and finds less than a
// batch waiting was not stalled: nothing is taken off.
//
// The cost: a timer of a packet really lost runs late by the stall time
// it overlapped (at most its RTO: the loop did not run, so it could not
// have run then either, and the rest of the RTO runs after).
type loopClock struct {
	start time.Time
	debt  mrc.Time // wall − engine time: the stalls' excess so far
	last  mrc.Time // the latest engine time handed out
	// wallNow, when set (tests), is the wall time instead of time.Since(start).
	wallNow func() mrc.Time
}

func (c *loopClock) wall() mrc.Time {
	if c.wallNow != nil {
		return c.wallNow()
	}
	return mrc.Time(time.Since(c.start))
}

// now is the engine's time, never earlier than a time it handed out.
func (c *loopClock) now() mrc.Time {
	t := max(c.wall()-c.debt, c.last)
	c.last = t
	return t
}

// turn starts a loop turn: after more than stallGap since the last time
// handed out, with backlog() ≥ rxBatch frames waiting, the excess over
// stallGap leaves the engine's clock. It returns the time taken off.
func (c *loopClock) turn(backlog func() int) mrc.Time {
	gap := c.wall() - c.debt - c.last
	if gap <= stallGap || backlog() < rxBatch {
		return 0
	}
	c.debt += gap - stallGap
	return gap - stallGap
}

// rxBacklog is the most frames waiting in one port (0 for ports that
// cannot say).
func (d *Daemon) rxBacklog() int {
	n := 0
	for _, p := range d.ports {
		if q, ok := p.(rxPending); ok {
			n = max(n, q.RxPending())
		}
	}
	return n
}

// receive hands up to a batch of each port's frames to the engine at now.
func (d *Daemon) receive(now mrc.Time) (got int) {
	d.rxNow = now
	for i, p := range d.ports {
		n, err := p.RecvFunc(rxBatch, d.rxFns[i])
		if err != nil && !errors.Is(err, xsk.ErrClosed) {
			d.log.Warn("port receive", "port", p.Name(), "err", err)
		}
		d.c.rxFrames.Add(uint64(n))
		got += n
	}
	return got
}
