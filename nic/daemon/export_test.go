package daemon

import (
	"fmt"
	"time"

	"github.com/softmrc/softmrc/internal/mrc"
)

// StallReport is what the loop turn right after a StallLoop block did to
// the QPs (summed over them): the timers that fell due during the block
// run in it.
type StallReport struct {
	InFlight      int    // bytes in flight when the block ended
	Timeouts, Rtx uint64 // ACK timeouts and retransmissions of that turn
	EVs, GoodEVs  int    // EVs, and those GOOD, after it
}

// StallLoop blocks the run loop for dur at the start of a turn, as the
// scheduler taking the CPU from its thread would, while the peer goes on
// sending and acking; then that turn receives and transmits (running every
// timer that fell due meanwhile). It returns once the turn has finished,
// with what the turn did.
func (d *Daemon) StallLoop(dur time.Duration) (StallReport, error) {
	var r StallReport
	done := make(chan struct{})
	var t0 mrc.QPCounters
	calls := 0
	hook := func() {
		calls++
		if calls == 1 {
			time.Sleep(dur)
			t0 = d.sumQPs(&r)
			r.EVs, r.GoodEVs = 0, 0
			return
		}
		t1 := d.sumQPs(&r)
		r.Timeouts, r.Rtx = t1.Timeouts-t0.Timeouts, t1.TxRtx-t0.TxRtx
		d.turnHook = nil
		close(done)
	}
	if err := d.exec(func() { d.turnHook = hook }); err != nil {
		return r, err
	}
	select {
	case <-done:
		return r, nil
	case <-d.stopped:
		return r, ErrStopped
	case <-time.After(5*time.Second + dur):
		return r, fmt.Errorf("the run loop did not finish a turn within 5 s of a %v stall", dur)
	}
}

// sumQPs sums the QPs' counters and sets r's in-flight bytes and EV
// counts (on the loop).
func (d *Daemon) sumQPs(r *StallReport) mrc.QPCounters {
	var sum mrc.QPCounters
	r.InFlight = 0
	for qpn := range d.qps {
		s := &d.qpScratch
		s.EVs = s.EVs[:0]
		if d.eng.Snapshot(qpn, s) != nil {
			continue
		}
		sum.Timeouts += s.Counters.Timeouts
		sum.TxRtx += s.Counters.TxRtx
		r.InFlight += s.InFlight
		r.EVs += len(s.EVs)
		for _, ev := range s.EVs {
			if ev.State == mrc.EVGood {
				r.GoodEVs++
			}
		}
	}
	return sum
}
