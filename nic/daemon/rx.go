package daemon

import (
	"errors"

	"github.com/softmrc/softmrc/internal/mrc"
	"github.com/softmrc/softmrc/nic/xsk"
)

// rxBatch is the most frames taken from a port in one receive call, and
// per loop turn while the loop keeps up: then the engine transmits (and
// acknowledges) between batches.
const rxBatch = 64

// rxDrainMax bounds the frames a drain takes from one port in one turn:
// twice an AF_XDP ring (xsk.DefaultRingSize), the most that can have
// arrived before the turn plus what arrives while it drains.
const rxDrainMax = 2 * xsk.DefaultRingSize

// stallGap is how long between two loop turns' times means the loop did
// not run for a while: it slept, was descheduled or did a long turn. A
// busy turn takes tens of µs; the engine's RTOs on a loaded veth are
// several hundred µs and more (docs/engine.md "Spurious timeouts").
const stallGap = 200 * mrc.Microsecond

// receive hands the ports' received frames to the engine at now. After a
// stall (drain), it takes everything the ports hold, up to rxDrainMax per
// port, not one batch: the engine's transmit then runs every timer that
// fell due while the loop was not running, and an ACK still unread in a
// ring when its timer runs makes a spurious timeout (the EV marked bad, a
// duplicate retransmitted), though it arrived in time.
func (d *Daemon) receive(now mrc.Time, drain bool) int {
	d.rxNow = now
	work := 0
	for i, p := range d.ports {
		got := 0
		for {
			n, err := p.RecvFunc(rxBatch, d.rxFns[i])
			if err != nil && !errors.Is(err, xsk.ErrClosed) {
				d.log.Warn("port receive", "port", p.Name(), "err", err)
			}
			got += n
			if !drain || n < rxBatch || got >= rxDrainMax || err != nil {
				break
			}
		}
		d.c.rxFrames.Add(uint64(got))
		work += got
	}
	if drain {
		d.c.rxDrains.Add(1)
	}
	return work
}
