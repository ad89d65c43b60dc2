package daemon

import (
	"testing"

	"github.com/softmrc/softmrc/internal/mrc"
)

// The engine's clock takes off a stall's excess over stallGap only when
// frames wait (a receive batch or more): a loop that slept on purpose, a
// short gap or a stall with nothing queued leaves it on wall time; it
// never goes back.
func TestLoopClock(t *testing.T) {
	const us = mrc.Microsecond
	for _, tc := range []struct {
		name     string
		gap      mrc.Time // wall time between the previous turn and this one
		backlog  int      // frames waiting at the turn
		wantOff  mrc.Time // taken off the engine's clock
		wantTime mrc.Time // engine time at the turn (the previous was 1000 µs)
	}{
		{"a busy turn", 50 * us, 500, 0, 1050 * us},
		{"a gap of stallGap exactly", stallGap, 500, 0, 1000*us + stallGap},
		{"a long sleep, one frame woke it", 80000 * us, 1, 0, 81000 * us},
		{"a stall with less than a batch waiting", 3000 * us, rxBatch - 1, 0, 4000 * us},
		{"a stall with a batch waiting", 3000 * us, rxBatch, 3000*us - stallGap, 1000*us + stallGap},
		{"a stall with the ring full", 30000 * us, 2048, 30000*us - stallGap, 1000*us + stallGap},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wall := 1000 * us
			c := loopClock{wallNow: func() mrc.Time { return wall }}
			if got := c.now(); got != 1000*us {
				t.Fatalf("engine time %v at wall 1000 µs with no stall", got)
			}
			wall += tc.gap
			off := c.turn(func() int { return tc.backlog })
			if off != tc.wantOff {
				t.Errorf("took %v off, want %v", off, tc.wantOff)
			}
			if got := c.now(); got != tc.wantTime {
				t.Errorf("engine time %v, want %v", got, tc.wantTime)
			}
			// Later turns run at wall speed, the stall's excess still off.
			wall += 100 * us
			if got := c.now(); got != tc.wantTime+100*us {
				t.Errorf("100 µs later: engine time %v, want %v", got, tc.wantTime+100*us)
			}
		})
	}
	// Monotonic: a second stall right after the first adds to the debt,
	// and the engine time never goes back.
	wall := mrc.Time(0)
	c := loopClock{wallNow: func() mrc.Time { return wall }}
	prev := c.now()
	for i := 0; i < 10; i++ {
		wall += mrc.Time(i) * 700 * us
		c.turn(func() int { return 4096 })
		if got := c.now(); got < prev {
			t.Fatalf("turn %d: engine time went back from %v to %v", i, prev, got)
		} else {
			prev = got
		}
	}
}
