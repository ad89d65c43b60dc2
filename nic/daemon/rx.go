package daemon

import (
	"errors"
	"time"

	"golang.org/x/sys/unix"

	"github.com/softmrc/softmrc/internal/mrc"
	"github.com/softmrc/softmrc/nic/xsk"
)

// rxBatch is the most frames taken from a port in one loop turn: then the
// engine transmits (and acknowledges) before the next batch.
const rxBatch = 64

// stallGap is how long the loop may be off the CPU between two turns
// before it counts as a stall. The engine's RTOs on a loaded veth are a
// millisecond and more (srtt 0.3-4.5 ms, docs/engine.md "Spurious
// timeouts").
const stallGap = 500 * mrc.Microsecond

// cpuCheckEvery is how often the loop reads its thread's CPU time (a
// syscall of about 1.4 µs here) while no turn is late: often enough that
// a stall's off-CPU time is not mixed with much else.
const cpuCheckEvery = mrc.Millisecond

// rxPending is a port that can say how many received frames wait in it.
type rxPending interface{ RxPending() int }

// loopClock is the engine's clock: wall time since start, less the time
// the loop's thread was kept off the CPU while frames queued for it
// (stalls).
//
// After a stall the engine's timers that fell due meanwhile would run at
// the first transmit, while the ACKs that would stop them still wait in
// the receive rings behind the first batch: spurious timeouts, the EVs
// marked ASSUMED_BAD, duplicates retransmitted, though nothing was lost
// (docs/engine.md "Spurious timeouts"). So a turn that starts more than
// stallGap late, after the thread was off the CPU (not asleep in the
// loop's own wait, not working) for more than stallGap, with at least a
// receive batch waiting in a port and data in flight (stallAtRisk), takes
// that off-CPU time less stallGap off the engine's clock for good: the ACKs are read, one batch a turn
// with the engine transmitting between, before any timer has seen the
// stall.
//
// What was tried and measured worse: reading the whole ring before
// transmitting (the receiver held the SACKs it owed for as long: the bulk
// rate fell 2-3x under CPU load); holding the clock only until the
// backlog was read, then jumping back (every packet sent meanwhile looked
// a stall old and timed out); taking off the whole gap between turns
// (a long turn's work then did not count either: the engine paced and
// ramped slower, and the lab's rate-bound scenarios fell 5-30 % short).
//
// The clock alone is not enough when the RTO is short: the turns that
// read the backlog take time too, and the engine's timers stay held until
// they are done (stallDrain).
//
// The cost: a timer of a packet really lost runs late by the stall it
// overlapped (at most its RTO: the loop could not have run it during the
// stall, and the rest of the RTO runs after).
type loopClock struct {
	start time.Time
	debt  mrc.Time // wall − engine time: the stalls' off-CPU time so far
	last  mrc.Time // the latest engine time handed out
	// Off-CPU accounting (turn): wall time not spent on the CPU or asleep
	// in the loop's wait, at the last CPU check.
	turnAt  mrc.Time // wall time of the last turn's start
	checkAt mrc.Time // wall time of the last CPU check
	off     mrc.Time // off-CPU time at the last CPU check
	slept   mrc.Time // time asleep in the loop's wait, in total
	// wallNow and cpuNow, when set (tests), replace the wall clock
	// (time.Since(start)) and the thread's CPU clock.
	wallNow, cpuNow func() mrc.Time
}

func (c *loopClock) wall() mrc.Time {
	if c.wallNow != nil {
		return c.wallNow()
	}
	return mrc.Time(time.Since(c.start))
}

// cpu is the calling thread's CPU time (the loop's: it is locked to it).
func (c *loopClock) cpu() mrc.Time {
	if c.cpuNow != nil {
		return c.cpuNow()
	}
	var ts unix.Timespec
	if unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts) != nil {
		return 0
	}
	return mrc.Time(ts.Nano())
}

// now is the engine's time, never earlier than a time it handed out.
func (c *loopClock) now() mrc.Time {
	t := max(c.wall()-c.debt, c.last)
	c.last = t
	return t
}

// asleep adds d, time the loop spent in its own wait: not a stall.
func (c *loopClock) asleep(d time.Duration) { c.slept += mrc.Time(d) }

// turn starts a loop turn. When the turn is more than stallGap late and
// the thread was off the CPU for more than stallGap since the last check,
// and atRisk() (timers could fire on ACKs that wait), the excess leaves
// the engine's clock. It returns the time taken off.
func (c *loopClock) turn(atRisk func() bool) mrc.Time {
	w := c.wall()
	late := w-c.turnAt > stallGap
	c.turnAt = w
	if !late && w-c.checkAt < cpuCheckEvery {
		return 0
	}
	off := w - c.cpu() - c.slept
	first := c.checkAt == 0
	stalled := off - c.off
	c.checkAt, c.off = w, off
	if first || !late || stalled <= stallGap || !atRisk() {
		return 0
	}
	c.debt += stalled - stallGap
	return stalled - stallGap
}

// stallAtRisk reports whether a stall can make spurious timeouts: a port
// holds more than the first receive batch reads (an ACK may wait behind
// it) and some QP has data in flight (a timer runs). A host that only
// receives keeps wall time: nothing of its own can time out, and its
// clock paces what it sends.
func (d *Daemon) stallAtRisk() bool {
	backlog := false
	for _, p := range d.ports {
		if q, ok := p.(rxPending); ok && q.RxPending() >= rxBatch {
			backlog = true
			break
		}
	}
	if !backlog {
		return false
	}
	s := &d.qpScratch
	for qpn := range d.qps {
		s.EVs = s.EVs[:0]
		if d.eng.Snapshot(qpn, s) == nil && s.InFlight > 0 {
			return true
		}
	}
	return false
}

// rxWaiting is how many received frames wait in the ports.
func (d *Daemon) rxWaiting() (n int) {
	for _, p := range d.ports {
		if q, ok := p.(rxPending); ok {
			n += q.RxPending()
		}
	}
	return n
}

// stallDrain tracks the backlog a stall left: the engine's timers are held
// (mrc.Engine.HoldTimers) until the loop has read the frames that waited
// when the stall was found. Taking the stall off the clock is not enough:
// the loop reads one batch a turn and transmits between, and on a fast
// path (srtt 0.2-0.6 ms, RTO about 1 ms) the 10-15 turns that read a
// 30 ms stall's backlog took 0.6-1.5 ms, which with stallGap left on the
// clock ran the timers of the packets whose ACKs were still queued (60-280
// spurious timeouts in 1 stall of 5 in TestStalledLoopNoSpuriousTimeouts).
// The hold is bounded by that backlog (the receive ring), and a turn that
// reads nothing ends it.
type stallDrain struct{ left int }

// start begins a hold over the frames waiting now.
func (s *stallDrain) start(waiting int) { s.left = waiting }

// read counts n frames read this turn and reports whether the timers are
// still held.
func (s *stallDrain) read(n int) bool {
	if n == 0 {
		s.left = 0
	}
	s.left = max(0, s.left-n)
	return s.left > 0
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
	if d.sh != nil {
		d.flushHandoffs()
	}
	return got
}
