package daemon

import (
	"fmt"
	"time"

	"github.com/softmrc/softmrc/internal/mrc"
)

// StallReport is what the loop turns after a StallLoop block did to the
// QPs (summed over them), up to the first turn that read less than a
// receive batch (the backlog the block left is read): the timers that fell
// due during the block run in them.
type StallReport struct {
	InFlight      int    // bytes in flight when the block ended
	Turns         int    // the turns counted
	Timeouts, Rtx uint64 // ACK timeouts and retransmissions in them
	EVs, GoodEVs  int    // EVs, and those GOOD, after them
	// Wall and engine time from the block's end to the last turn counted.
	DrainWall, DrainEngine time.Duration
	HeldTurns              uint64 // of the turns, those with the timers held
}

// StallLoop blocks the run loop for dur at the start of a turn, as the
// scheduler taking the CPU from its thread would, while the peer goes on
// sending and acking; then the loop reads what queued meanwhile and
// transmits, running every timer that fell due. It returns once a turn
// read less than a batch, with what those turns did.
func (d *Daemon) StallLoop(dur time.Duration) (StallReport, error) {
	var r StallReport
	done := make(chan struct{})
	var t0 mrc.QPCounters
	var rx uint64
	var w0 time.Time
	var e0 mrc.Time
	var h0 uint64
	hook := func() {
		if r.Turns == 0 {
			time.Sleep(dur)
			w0, e0, h0 = time.Now(), d.clk.last, d.c.stallHeldTurns.Load()
			t0 = d.sumQPs(&r)
			r.EVs, r.GoodEVs = 0, 0
		} else {
			read := d.c.rxFrames.Load() - rx
			if read >= rxBatch && r.Turns < 100000 {
				r.Turns++
				rx += read
				return
			}
			inFlight := r.InFlight
			t1 := d.sumQPs(&r)
			r.InFlight = inFlight
			r.Timeouts, r.Rtx = t1.Timeouts-t0.Timeouts, t1.TxRtx-t0.TxRtx
			r.DrainWall, r.DrainEngine = time.Since(w0), time.Duration(d.now()-e0)
			r.HeldTurns = d.c.stallHeldTurns.Load() - h0
			d.turnHook = nil
			close(done)
			return
		}
		r.Turns++
		rx = d.c.rxFrames.Load()
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
		return r, fmt.Errorf("the run loop did not read its backlog within 5 s of a %v stall", dur)
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

// CQEsDelivered is the number of completions the daemon has handed to its
// applications (the cqes counter); safe from any goroutine.
func (d *Daemon) CQEsDelivered() uint64 { return d.c.cqes.Load() }
