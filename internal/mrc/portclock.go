package mrc

import (
	"sync/atomic"

	"github.com/softmrc/softmrc/internal/wire"
)

// PortClock is the line time of a NIC's ports, shared by engines that send
// on the same ports (mrc-nicd's engine threads, Config.SharedPorts): for
// each plane, the time until which the port is busy with what any of them
// sent. Each engine still paces at the port's whole rate, and the port
// carries no more than that rate in total, however the QPs are spread over
// the engines; with one clock per engine a static split would hold one
// engine's QPs to its share while the others idle.
//
// The engines must read one time base (the same origin and no per-engine
// offset): mrc-nicd gives its threads' clocks one start and does not share
// the ports with stall_clock on. The zero value is ready to use; it is safe
// for concurrent use.
type PortClock struct {
	busy [wire.MaxPlanes]atomic.Int64
}

// until is the time port p's queued line time runs out.
func (c *PortClock) until(p wire.Plane) Time { return Time(c.busy[p].Load()) }

// occupy adds d of line time to port p, starting no earlier than now.
func (c *PortClock) occupy(p wire.Plane, now, d Time) {
	b := &c.busy[p]
	for {
		old := b.Load()
		if b.CompareAndSwap(old, int64(max(Time(old), now)+d)) {
			return
		}
	}
}

// portBusyUntil is the time port p's queued line time runs out: the
// shared clock's, or this engine's own.
func (e *Engine) portBusyUntil(p wire.Plane) Time {
	if c := e.cfg.SharedPorts; c != nil {
		return c.until(p)
	}
	return e.portBusy[p]
}

// occupyPort accounts a frame of n bytes sent on port p at its rate.
func (e *Engine) occupyPort(p wire.Plane, n int) {
	r := e.cfg.PortRates[p]
	if r <= 0 {
		return
	}
	d := Time(float64(n*8) / r)
	if c := e.cfg.SharedPorts; c != nil {
		c.occupy(p, e.now, d)
		return
	}
	e.portBusy[p] = max(e.portBusy[p], e.now) + d
}
