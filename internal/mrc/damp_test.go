package mrc

import (
	"testing"

	"github.com/softmrc/softmrc/internal/wire"
)

// TestFlapDampingKeepsFlappingPortOut: side 0's port 1 (its NIC–T0 link)
// flaps 20 µs down, 20 µs up (about 3 RTTs each) for 1 ms: frames on the
// plane are lost both ways while it is down, and side 0 sees its carrier
// go (SetPortState), which reaches side 1 as port status. With damping,
// data stays off the plane while it flaps (≤ 5 % of the sender's data
// frames, a quarter being its fair share) and returns within FlapHoldMax
// (plus a flap period of slack) after the flapping stops. Without damping
// (FlapHold < 0, the engine before damp.go) the plane is used in every up
// phase: the same measurement must exceed 5 %, so the test can tell.
// A single bounce of the port is not held: the plane carries data again
// within a few RTTs.
func TestFlapDampingKeepsFlappingPortOut(t *testing.T) {
	const (
		half      = 20 * Microsecond // down and up phases of the flap
		flapStart = 100 * Microsecond
		flapEnd   = flapStart + 1*Millisecond
		holdMax   = 200 * Microsecond
		settle    = 4 * half // first flaps: the damping has not seen two downs yet
	)
	cases := []struct {
		name       string
		hold       Time
		flaps      int     // downs; 1 = a single bounce
		wantMax    float64 // plane 1's share of data frames while flapping
		wantMin    float64
		backWithin Time // after the last up, plane 1 carries data again
	}{
		{name: "damped", hold: 40 * Microsecond, flaps: int((flapEnd - flapStart) / (2 * half)), wantMax: 0.05, backWithin: holdMax + 2*half},
		{name: "undamped", hold: -1, flaps: int((flapEnd - flapStart) / (2 * half)), wantMin: 0.10, backWithin: 2 * half},
		{name: "single bounce", hold: 40 * Microsecond, flaps: 1, backWithin: 2 * half},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := flapHarness(t, 77, 200*Microsecond, tc.hold, holdMax, 16<<20)
			down := false
			h.Filter = func(_ int, port wire.Plane, _ []byte) bool { return down && port == 1 }
			var lastUp Time
			for i := 0; i < tc.flaps; i++ {
				at := flapStart + Time(i)*2*half
				h.at(at, func() { down = true; h.eng[0].SetPortState(h.now, 1, false) })
				h.at(at+half, func() { down = false; h.eng[0].SetPortState(h.now, 1, true) })
				lastUp = at + half
			}
			data := func() (p1, all uint64) {
				c := h.eng[0].Counters()
				for _, n := range c.TxDataByPlane {
					all += n
				}
				return c.TxDataByPlane[1], all
			}
			if tc.flaps > 1 {
				h.run(flapStart+settle, nil)
				p1a, alla := data()
				h.run(lastUp, nil)
				p1b, allb := data()
				if allb-alla < 1000 {
					t.Fatalf("only %d data frames sent while flapping: the transfer stalled", allb-alla)
				}
				share := float64(p1b-p1a) / float64(allb-alla)
				t.Logf("plane 1 carried %d of %d data frames (%.3f) while flapping; holds %d/%d",
					p1b-p1a, allb-alla, share, h.eng[0].Counters().FlapHolds, h.eng[1].Counters().FlapHolds)
				if tc.wantMax > 0 && share > tc.wantMax {
					t.Errorf("flapping plane carried %.3f of the data, want ≤ %.2f", share, tc.wantMax)
				}
				if share < tc.wantMin {
					t.Errorf("flapping plane carried %.3f of the data, want ≥ %.2f (the measurement cannot tell damping from none)", share, tc.wantMin)
				}
			} else {
				h.run(lastUp, nil)
			}
			p1, _ := data()
			back := h.run(lastUp+tc.backWithin, func() bool { q, _ := data(); return q > p1+10 })
			if !back {
				t.Fatalf("plane 1 carried no data within %v after the flapping stopped", tc.backWithin)
			}
			t.Logf("plane 1 back %.1f µs after the last up", float64(h.now-lastUp)/float64(Microsecond))
		})
	}
}

// TestFlapDampHold: the hold after each up of a down/up sequence: none for a
// single down or downs further apart than FlapWindow (the count decays),
// FlapHold from the second down in a row, doubling, capped at FlapHoldMax;
// FlapHold < 0 turns damping off.
func TestFlapDampHold(t *testing.T) {
	cfg := Config{Planes: 1, FlapWindow: 100, FlapHold: 10, FlapHoldMax: 35}
	off := cfg
	off.FlapHold = -1
	cases := []struct {
		name  string
		cfg   Config
		downs []Time // each down lasts 5, then up
		want  []Time // hold end after each up (0: usable at once)
	}{
		{"single down", cfg, []Time{0}, []Time{0}},
		{"far apart: decays", cfg, []Time{0, 200, 400}, []Time{0, 0, 0}},
		{"flapping: doubles, capped", cfg, []Time{0, 20, 40, 80, 140}, []Time{0, 35, 65, 120, 180}},
		{"after a quiet window: starts over", cfg, []Time{0, 20, 300}, []Time{0, 35, 0}},
		{"off", off, []Time{0, 20, 40}, []Time{0, 0, 0}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var d flapDamp
			for i, at := range tc.downs {
				d.down(at, &tc.cfg)
				held := d.up(at+5, &tc.cfg)
				got := Time(0)
				if d.holding(at + 5) {
					got = d.until
				}
				if got != tc.want[i] || held != (tc.want[i] != 0) {
					t.Errorf("up %d at %d: held %v until %d, want until %d", i, at+5, held, got, tc.want[i])
				}
			}
		})
	}
}

// TestFlapDampingNeverHoldsEveryPlane: all of side 0's ports flap together
// (20 µs down, 20 µs up, for 1 ms). Damping must not hold every plane at
// once: the QP keeps sending in the up phases (work resumes whenever a
// path is usable) and carries at least a quarter of what it carries with
// damping off; with holds applied to every plane (the engine before
// planeUsable's exception) it carried almost nothing after the second flap,
// waiting out each hold.
func TestFlapDampingNeverHoldsEveryPlane(t *testing.T) {
	const (
		half      = 20 * Microsecond
		flapStart = 100 * Microsecond
		flapEnd   = flapStart + 1*Millisecond
		settle    = 4 * half
	)
	sent := func(hold Time) uint64 {
		h := flapHarness(t, 78, 200*Microsecond, hold, 200*Microsecond, 16<<20)
		down := false
		h.Filter = func(int, wire.Plane, []byte) bool { return down }
		flip := func(up bool) {
			down = !up
			for p := 0; p < testPlanes; p++ {
				h.eng[0].SetPortState(h.now, wire.Plane(p), up)
			}
		}
		for at := flapStart; at < flapEnd; at += 2 * half {
			h.at(at, func() { flip(false) })
			h.at(at+half, func() { flip(true) })
		}
		data := func() (all uint64) {
			for _, n := range h.eng[0].Counters().TxDataByPlane {
				all += n
			}
			return all
		}
		h.run(flapStart+settle, nil)
		a := data()
		h.run(flapEnd, nil)
		if s := h.snap(0); s.State != QPReady {
			t.Fatalf("QP %v (%v) after the flapping", s.State, s.Status)
		}
		return data() - a
	}
	damped, undamped := sent(40*Microsecond), sent(-1)
	t.Logf("data frames sent while every port flapped: %d damped, %d undamped", damped, undamped)
	if damped*4 < undamped {
		t.Errorf("with damping the QP sent %d data frames while every port flapped, want ≥ 1/4 of the %d without: every plane was held", damped, undamped)
	}
}

// silentFlap drops every frame of the planes in mask, both ways, from
// start for n periods of down then up (each half long), as mrc-switchd's
// flap does: no carrier change, no port status, only lost frames. It
// returns the end of the last down phase.
func silentFlap(h *harness, mask uint32, start, half Time, n int) Time {
	down := false
	h.Filter = func(_ int, port wire.Plane, _ []byte) bool { return down && mask&(1<<port) != 0 }
	for i := 0; i < n; i++ {
		at := start + Time(i)*2*half
		h.at(at, func() { down = true })
		h.at(at+half, func() { down = false })
	}
	return start + Time(n-1)*2*half + half
}

// dataFrames is side 0's data frames sent on plane p and on every plane.
func dataFrames(h *harness, p wire.Plane) (onP, all uint64) {
	c := h.eng[0].Counters()
	for _, n := range c.TxDataByPlane {
		all += n
	}
	return c.TxDataByPlane[p], all
}

// TestPathFlapDampingKeepsSilentFlapOut: plane 1 flaps silently (every
// frame on it lost both ways for 100 µs, then 100 µs clean, for 3 ms;
// carrier and port status stay up, as mrc-switchd's flap in mrc-lab S3
// and S11). With path damping the flapping plane carries ≤ 5 % of the data
// frames once it has flapped a few times (a fair share is 25 %) and carries
// data again within FlapHoldMax (plus probe gaps) after the flapping stops.
// Without it (FlapHold < 0, the engine before pathDamp) each up phase
// re-admits the plane on its first answered probe: the same measurement
// must exceed 10 %, so the test can tell. A single outage (one 100 µs down)
// is not held: the plane carries data again within a few probe intervals.
// Before pathDamp (pathMinLost raised out of reach) the damped case failed:
// plane 1 carried 0.180 of the data, as undamped.
func TestPathFlapDampingKeepsSilentFlapOut(t *testing.T) {
	const (
		half      = 100 * Microsecond
		flapStart = 100 * Microsecond
		cycles    = 15 // 3 ms
		holdMax   = 400 * Microsecond
		settle    = 4 * 2 * half // the damping has seen two outages by then
	)
	cases := []struct {
		name       string
		hold       Time
		flaps      int
		wantMax    float64 // plane 1's share of data frames while flapping
		wantMin    float64
		wantHolds  bool
		backWithin Time // after the last down ends, plane 1 carries data again
	}{
		{name: "damped", hold: half, flaps: cycles, wantMax: 0.05, wantHolds: true, backWithin: holdMax + 2*half},
		{name: "undamped", hold: -1, flaps: cycles, wantMin: 0.10, backWithin: half},
		{name: "single outage", hold: half, flaps: 1, backWithin: half},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := flapHarness(t, 79, 1*Millisecond, tc.hold, holdMax, 64<<20)
			lastUp := silentFlap(h, 1<<1, flapStart, half, tc.flaps)
			if tc.flaps > 1 {
				h.run(flapStart+settle, nil)
				p1a, alla := dataFrames(h, 1)
				h.run(lastUp, nil)
				p1b, allb := dataFrames(h, 1)
				if allb-alla < 1000 {
					t.Fatalf("only %d data frames sent while flapping: the transfer stalled", allb-alla)
				}
				share := float64(p1b-p1a) / float64(allb-alla)
				holds := h.snap(0).Counters.PathFlapHolds
				t.Logf("plane 1 carried %d of %d data frames (%.3f) while flapping; path holds %d",
					p1b-p1a, allb-alla, share, holds)
				if tc.wantMax > 0 && share > tc.wantMax {
					t.Errorf("flapping plane carried %.3f of the data, want ≤ %.2f", share, tc.wantMax)
				}
				if share < tc.wantMin {
					t.Errorf("flapping plane carried %.3f of the data, want ≥ %.2f (the measurement cannot tell damping from none)", share, tc.wantMin)
				}
				if tc.wantHolds != (holds > 0) {
					t.Errorf("PathFlapHolds = %d, want holds: %v", holds, tc.wantHolds)
				}
			} else {
				h.run(lastUp, nil)
			}
			p1, _ := dataFrames(h, 1)
			back := h.run(lastUp+tc.backWithin, func() bool { q, _ := dataFrames(h, 1); return q > p1+10 })
			if !back {
				t.Fatalf("plane 1 carried no data within %v after the flapping stopped", tc.backWithin)
			}
			if s := h.snap(0); s.State != QPReady {
				t.Fatalf("QP %v (%v) after the flapping", s.State, s.Status)
			}
			t.Logf("plane 1 back %.1f µs after the last up", float64(h.now-lastUp)/float64(Microsecond))
		})
	}
}

// TestPathFlapDampingNeverHoldsEveryPath: every plane flaps silently at
// once (100/100 µs for 3 ms). Path damping must not hold every path: the QP
// keeps sending in the up phases and carries at least a quarter of what it
// carries with damping off, and stays ready.
func TestPathFlapDampingNeverHoldsEveryPath(t *testing.T) {
	const half = 100 * Microsecond
	sent := func(hold Time) uint64 {
		h := flapHarness(t, 80, 1*Millisecond, hold, 400*Microsecond, 64<<20)
		end := silentFlap(h, 1<<testPlanes-1, 100*Microsecond, half, 15)
		h.run(900*Microsecond, nil)
		_, a := dataFrames(h, 0)
		h.run(end, nil)
		if s := h.snap(0); s.State != QPReady {
			t.Fatalf("QP %v (%v) after the flapping", s.State, s.Status)
		}
		_, b := dataFrames(h, 0)
		return b - a
	}
	damped, undamped := sent(half), sent(-1)
	t.Logf("data frames sent while every plane flapped: %d damped, %d undamped", damped, undamped)
	if damped*4 < undamped {
		t.Errorf("with damping the QP sent %d data frames while every plane flapped, want ≥ 1/4 of the %d without: every path was held", damped, undamped)
	}
}

// TestSharedPathDampCountsEachOutageOnce: the QPs toward a peer report the
// outages of a path they each saw; one outage reported by two QPs counts
// once (it began before the last counted one ended), so a path that went
// out once is not held however many QPs saw it, and from the second
// outage each QP's report holds it, for 2·FlapHold doubled per further
// outage, capped at FlapHoldMax.
func TestSharedPathDampCountsEachOutageOnce(t *testing.T) {
	cfg := Config{FlapWindow: 1000, FlapHold: 10, FlapHoldMax: 100}
	type report struct {
		deadAt, now Time
		held        bool
		until       Time // when held
	}
	cases := []struct {
		name    string
		reports []report
	}{
		{"one outage, two QPs", []report{{0, 50, false, 0}, {5, 55, false, 0}}},
		{"two outages, one QP", []report{{0, 50, false, 0}, {100, 150, true, 170}}},
		{"two outages, two QPs each", []report{{0, 50, false, 0}, {5, 55, false, 0}, {100, 150, true, 170}, {110, 160, true, 180}}},
		{"growing, capped", []report{{0, 50, false, 0}, {100, 150, true, 170}, {200, 250, true, 290}, {300, 350, true, 430}, {400, 450, true, 550}, {500, 550, true, 650}}},
		{"far apart: decays", []report{{0, 50, false, 0}, {2000, 2050, false, 0}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var d sharedDamp
			for i, r := range tc.reports {
				held := d.outage(r.deadAt, r.now, &cfg)
				if held != r.held || held && d.until != r.until {
					t.Errorf("report %d (%d..%d): held %v until %d, want %v until %d", i, r.deadAt, r.now, held, d.until, r.held, r.until)
				}
			}
		})
	}
}

// flapHarness is the damping tests' set-up: a 10 Gb/s engine pair with the
// given flap window and holds, moving size bytes in 256 KiB writes.
func flapHarness(t *testing.T, seed uint64, window, hold, holdMax Time, size int) *harness {
	t.Helper()
	h := newHarness(t, hopts{seed: seed, cfg: func(c *Config) {
		c.PortRate = 10
		c.FlapWindow, c.FlapHold, c.FlapHoldMax = window, hold, holdMax
	}})
	h.Rate = 10
	h.startTransfer(size, 256<<10)
	return h
}

// TestPlaneFlapCountsFirstHopOutages: outages reported through paths of
// two T1s or more of a plane in one down phase count once for the plane;
// outages through one T1 only (a T0–T1 link or a T1 flapping) never count;
// from the second counted outage within FlapWindow the plane is held.
func TestPlaneFlapCountsFirstHopOutages(t *testing.T) {
	cfg := Config{FlapWindow: 1000, FlapHold: 10, FlapHoldMax: 100}
	type report struct {
		t1          uint8
		deadAt, now Time
		held        bool
	}
	cases := []struct {
		name    string
		reports []report
	}{
		{"one T1, many outages", []report{{1, 0, 50, false}, {1, 100, 150, false}, {1, 200, 250, false}, {1, 300, 350, false}}},
		{"two T1s, one outage", []report{{1, 0, 50, false}, {2, 5, 55, false}, {3, 8, 56, false}}},
		{"two T1s, two outages", []report{{1, 0, 50, false}, {2, 5, 55, false}, {1, 100, 150, false}, {3, 105, 152, true}, {0, 110, 153, true}}},
		{"second outage through one T1 only", []report{{1, 0, 50, false}, {2, 5, 55, false}, {1, 100, 150, false}, {1, 200, 250, false}}},
		{"far apart: decays", []report{{1, 0, 50, false}, {2, 5, 55, false}, {1, 2000, 2050, false}, {2, 2005, 2055, false}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var d planeFlap
			for i, r := range tc.reports {
				if held := d.outage(r.t1, r.deadAt, r.now, &cfg); held != r.held {
					t.Errorf("report %d (T1 %d, %d..%d): held %v, want %v", i, r.t1, r.deadAt, r.now, held, r.held)
				}
			}
		})
	}
}

// TestPlaneKnownFlappingHoldsEveryPath: once the peer's count says a
// plane's first hops flap (planeFlap holding), a QP holds any group of that
// plane at the first EV failure on it, as for a path that flapped twice
// itself, until the plane's hold ends; a group of another plane is not
// held for a failure, nor is a group of the plane when its count is not
// holding. Before planeFlap a group of a flapping plane was held only once
// its own path (plane, T1) had two counted outages: in mrc-lab S3 the
// flapping planes carried 0.08–0.21 of the full rate in the first half
// second of the claim's window, 0.03–0.21 with it (docs/engine.md).
func TestPlaneKnownFlappingHoldsEveryPath(t *testing.T) {
	for _, tc := range []struct {
		name     string
		holding  bool
		plane    wire.Plane
		wantHeld bool
	}{
		{"plane flapping, its group", true, 1, true},
		{"plane flapping, another plane's group", true, 2, false},
		{"plane not flapping", false, 1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, hopts{seed: 81})
			h.startTransfer(8<<20, 256<<10)
			h.run(100*Microsecond, nil)
			q := h.eng[0].qps[h.qp[0]]
			until := h.now + 5*Millisecond
			if tc.holding {
				q.peer.planeFlap[1].until = until
			}
			idx := int32(-1)
			for i := range q.evs {
				if x := &q.evs[i]; x.plane == tc.plane && x.state == EVGood {
					idx = int32(i)
					break
				}
			}
			if idx < 0 {
				t.Fatalf("no GOOD EV on plane %d", tc.plane)
			}
			q.pathFailedAt(idx, h.now)
			g := &q.grps[q.evs[idx].grp]
			if g.held != tc.wantHeld {
				t.Fatalf("group (plane %d, T1 %d) held %v after one EV failure, want %v", g.plane, g.t1, g.held, tc.wantHeld)
			}
			if tc.wantHeld && g.until != until {
				t.Fatalf("held until %d, want the plane's hold %d", g.until, until)
			}
		})
	}
}
