package daemon

import (
	"testing"
	"time"

	"github.com/softmrc/softmrc/internal/mrc"
)

// The engine's clock takes off a stall — time the loop's thread was off
// the CPU, not asleep in the loop's own wait — beyond stallGap, and only
// when frames wait (a receive batch or more): a long turn of work, a
// sleep, a short gap or a stall with nothing queued leave it on wall time.
// It never goes back.
func TestLoopClock(t *testing.T) {
	const us = mrc.Microsecond
	for _, tc := range []struct {
		name     string
		gap      mrc.Time // wall time from the previous turn to this one
		cpu      mrc.Time // of it, on the CPU
		slept    mrc.Time // of it, asleep in the loop's wait
		backlog  int      // frames waiting at the turn
		wantOff  mrc.Time // taken off the engine's clock
		wantTime mrc.Time // engine time at the turn (the previous was 2000 µs)
	}{
		{"a busy turn", 50 * us, 50 * us, 0, 500, 0, 2050 * us},
		{"a long turn of work", 3000 * us, 3000 * us, 0, 500, 0, 5000 * us},
		{"a long sleep, frames woke it", 80000 * us, 10 * us, 79990 * us, 500, 0, 82000 * us},
		{"off the CPU stallGap exactly", stallGap + 10*us, 10 * us, 0, 500, 0, 2010*us + stallGap},
		{"a stall with less than a batch waiting", 3000 * us, 100 * us, 0, rxBatch - 1, 0, 5000 * us},
		{"a stall with a batch waiting", 3000 * us, 100 * us, 0, rxBatch, 2900*us - stallGap, 2100*us + stallGap},
		{"a stall after some work and a sleep", 30000 * us, 1000 * us, 9000 * us, 2048, 20000*us - stallGap, 12000*us + stallGap},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wall, cpu := 1000*us, 900*us
			c := loopClock{wallNow: func() mrc.Time { return wall }, cpuNow: func() mrc.Time { return cpu }}
			c.turn(func() bool { return false }) // the first check
			wall += 1000 * us
			cpu += 1000 * us
			if off := c.turn(func() bool { return false }); off != 0 {
				t.Fatalf("took %v off a turn on the CPU throughout", off)
			}
			if got := c.now(); got != 2000*us {
				t.Fatalf("engine time %v at wall 2000 µs with no stall", got)
			}
			wall += tc.gap
			cpu += tc.cpu
			c.asleep(time.Duration(tc.slept))
			off := c.turn(func() bool { return tc.backlog >= rxBatch })
			if off != tc.wantOff {
				t.Errorf("took %v off, want %v", off, tc.wantOff)
			}
			if got := c.now(); got != tc.wantTime {
				t.Errorf("engine time %v, want %v", got, tc.wantTime)
			}
			// Later turns run at wall speed, the stall still off.
			wall += 100 * us
			cpu += 100 * us
			c.turn(func() bool { return true })
			if got := c.now(); got != tc.wantTime+100*us {
				t.Errorf("100 µs later: engine time %v, want %v", got, tc.wantTime+100*us)
			}
		})
	}
	// Monotonic, whatever the clocks do.
	wall, cpu := mrc.Time(0), mrc.Time(0)
	c := loopClock{wallNow: func() mrc.Time { return wall }, cpuNow: func() mrc.Time { return cpu }}
	prev := c.now()
	for i := 0; i < 20; i++ {
		wall += mrc.Time(i%7) * 400 * us
		cpu += mrc.Time(i%3) * 100 * us
		c.turn(func() bool { return true })
		if got := c.now(); got < prev {
			t.Fatalf("turn %d: engine time went back from %v to %v", i, prev, got)
		} else {
			prev = got
		}
	}
}

// The timers stay held while the frames a stall left are read, and no
// longer: a turn that reads the last of them, or reads nothing (a port
// gone), ends the hold.
func TestStallDrain(t *testing.T) {
	for _, tc := range []struct {
		name    string
		waiting int
		reads   []int
		want    []bool // held after each read
	}{
		{"one batch", rxBatch, []int{rxBatch}, []bool{false}},
		{"five batches", 5 * rxBatch, []int{rxBatch, rxBatch, rxBatch, rxBatch, rxBatch, rxBatch}, []bool{true, true, true, true, false, false}},
		{"two ports, uneven", 3*rxBatch + 10, []int{2 * rxBatch, rxBatch, 10}, []bool{true, true, false}},
		{"a turn reads nothing", 10 * rxBatch, []int{rxBatch, 0, rxBatch}, []bool{true, false, false}},
		{"nothing waiting", 0, []int{rxBatch}, []bool{false}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var s stallDrain
			s.start(tc.waiting)
			for i, n := range tc.reads {
				if got := s.read(n); got != tc.want[i] {
					t.Fatalf("read %d (%d frames, %d waited): held %v, want %v", i, n, tc.waiting, got, tc.want[i])
				}
			}
		})
	}
}
