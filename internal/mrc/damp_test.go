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
			h := newHarness(t, hopts{seed: 77, cfg: func(c *Config) {
				c.PortRate = 10
				c.FlapWindow, c.FlapHold, c.FlapHoldMax = 200*Microsecond, tc.hold, holdMax
			}})
			h.Rate = 10
			h.startTransfer(16<<20, 256<<10)
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
		h := newHarness(t, hopts{seed: 78, cfg: func(c *Config) {
			c.PortRate = 10
			c.FlapWindow, c.FlapHold, c.FlapHoldMax = 200*Microsecond, hold, 200*Microsecond
		}})
		h.Rate = 10
		h.startTransfer(16<<20, 256<<10)
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
