package daemon

import (
	"sync/atomic"
	"testing"

	"github.com/softmrc/softmrc/internal/mrc"
)

// TestSpinGate: busy polling turns off when the loop thread spent more
// than a quarter of a window waiting for a CPU, stays off until a window
// below a tenth, and is left alone without scheduler statistics.
func TestSpinGate(t *testing.T) {
	const ms = mrc.Millisecond
	type step struct {
		at   mrc.Time // wall time of the allow call
		wait mrc.Time // the thread's cumulative wait then
		want bool
	}
	for _, tc := range []struct {
		name    string
		noStats bool
		steps   []step
		offs    uint64
	}{
		{"a free CPU: spin", false, []step{{0, 0, true}, {10 * ms, 1 * ms, true}, {20 * ms, 2 * ms, true}, {30 * ms, 4 * ms, true}}, 0},
		{"inside a window: no read, no change", false, []step{{0, 0, true}, {5 * ms, 5 * ms, true}, {9 * ms, 9 * ms, true}}, 0},
		{"short of CPU: off", false, []step{{0, 0, true}, {10 * ms, 3 * ms, false}, {15 * ms, 3 * ms, false}}, 1},
		{"exactly a quarter: still on", false, []step{{0, 0, true}, {10 * ms, 2500 * mrc.Microsecond, true}}, 0},
		{"hysteresis: off until below a tenth", false, []step{
			{0, 0, true}, {10 * ms, 5 * ms, false}, // 50 %: off
			{20 * ms, 7 * ms, false},                // 20 %: between the two, stays off
			{30 * ms, 7500 * mrc.Microsecond, true}, // 5 %: on again
			{40 * ms, 9500 * mrc.Microsecond, true}, // 20 %: between, stays on
			{50 * ms, 13 * ms, false},               // 35 %: off again
		}, 2},
		{"a long sleep: one window over all of it", false, []step{{0, 0, true}, {10 * ms, 4 * ms, false}, {1000 * ms, 20 * ms, true}}, 1},
		{"no scheduler statistics: busy_poll as configured", true, []step{{0, 0, true}, {10 * ms, 9 * ms, true}}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var wait mrc.Time
			var offs atomic.Uint64
			g := spinGate{offs: &offs, read: func() (schedStat, bool) { return schedStat{wait: wait}, !tc.noStats }}
			for i, s := range tc.steps {
				wait = s.wait
				if got := g.allow(s.at); got != s.want {
					t.Fatalf("step %d (t=%v, wait=%v): allow %v, want %v (last share %.2f)", i, s.at, s.wait, got, s.want, g.last)
				}
			}
			if offs.Load() != tc.offs {
				t.Errorf("offs %d, want %d", offs.Load(), tc.offs)
			}
		})
	}
	var g spinGate // read nil: a loop without statistics
	if !g.allow(0) || !g.allow(50*ms) {
		t.Error("a gate without a reader must allow")
	}
}
