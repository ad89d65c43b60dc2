package daemon

import (
	"sync/atomic"

	"github.com/softmrc/softmrc/internal/mrc"
)

// The spin gate. busy_poll keeps the run loop polling after its last work,
// which saves a wakeup per message when a CPU is free (docs/performance.md,
// "Busy polling on a quiet machine": the 2 B latency 0.6× at 200 µs) and
// takes a CPU another thread needs when none is (the same page: up to 1.6×
// worse at a load of 17–23, and in the lab sixteen daemons share 2 vCPUs).
// The gate tells the two apart from the loop thread's own scheduler
// statistics: the share of the last window it spent runnable but waiting
// for a CPU. Above spinOffShare the loop stops spinning and sleeps at once
// after its work, as with busy_poll 0; below spinOnShare it spins again.
// Waiting is measured whether the loop spins or sleeps (a sleeping loop
// waits for a CPU after each wakeup), so the gate also sees when the host
// becomes free again.

// spinEvery is the gate's window: one read of /proc/thread-self/schedstat
// (a pread) per window while busy_poll is on.
const spinEvery = 10 * mrc.Millisecond

// spinOffShare and spinOnShare are the shares of a window spent waiting
// for a CPU that turn spinning off and back on (hysteresis, so one
// window's noise does not flip it).
const (
	spinOffShare = 0.25
	spinOnShare  = 0.10
)

// spinGate decides, for a loop with busy_poll on, whether to spin now.
// Pure apart from read; the loop calls allow with its wall clock.
type spinGate struct {
	off  bool     // spinning is off: the host is short of CPU
	at   mrc.Time // start of the current window
	base mrc.Time // the thread's wait total at at
	ok   bool     // base was read
	// last is the wait share of the last full window.
	last float64
	// offs counts the times the gate turned spinning off (the daemon's
	// busy_poll_offs counter).
	offs *atomic.Uint64
	// read returns the loop thread's statistics (tests replace it).
	read func() (schedStat, bool)
}

// allow reports whether the loop may keep spinning at wall time now.
// Without scheduler statistics it always may (busy_poll as configured).
func (g *spinGate) allow(now mrc.Time) bool {
	if g.read == nil {
		return true
	}
	if now-g.at < spinEvery && g.ok {
		return !g.off
	}
	s, ok := g.read()
	if ok && g.ok && now > g.at {
		g.last = float64(s.wait-g.base) / float64(now-g.at)
		switch {
		case !g.off && g.last > spinOffShare:
			g.off = true
			g.offs.Add(1)
		case g.off && g.last < spinOnShare:
			g.off = false
		}
	}
	g.at, g.base, g.ok = now, s.wait, ok
	return !g.off
}
