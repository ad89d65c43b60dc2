package mrc

import "github.com/softmrc/softmrc/internal/wire"

// flapDamp is the flap damping of one plane as seen by one side: the local
// port (carrier) or a peer's port (its port-status mask). A plane that went
// down once and came back (a single failure, a maintenance bounce) is usable
// again at once; a plane that went down flapMinDowns times in a row, each
// within FlapWindow of the previous down, is held out of use after it comes
// up, for FlapHold doubled per further down, capped at FlapHoldMax. The
// count restarts when a down comes more than FlapWindow after the previous
// one, so the hold decays once the plane stays up.
//
// Why: a port that flaps (S3 of mrc-lab: 100 ms up, 100 ms down) used to be
// used again in every up phase, since losses on a down plane say nothing
// about EVs and the port coming up re-admits every EV of it: the flapping
// planes carried about the duty cycle of their capacity (0.41–0.57), with a
// burst of losses at every down. The seed keeps flappy paths out until they
// prove themselves over time.
type flapDamp struct {
	downs    int  // downs in a row, each within FlapWindow of the previous
	lastDown Time // time of the latest down
	until    Time // held out of use until then (0: not held)
}

// flapMinDowns is the number of downs in a row (within FlapWindow of each
// other) from which an up is held: one down is a failure, not a flap.
const flapMinDowns = 2

// flapDefaults: FlapWindow, FlapHold and FlapHoldMax when zero.
const (
	defaultFlapWindow  = 1 * Second
	defaultFlapHold    = 100 * Millisecond
	defaultFlapHoldMax = 500 * Millisecond
)

func (c *Config) flapWindow() Time {
	if c.FlapWindow > 0 {
		return c.FlapWindow
	}
	return defaultFlapWindow
}

func (c *Config) flapHold() Time {
	if c.FlapHold != 0 {
		return c.FlapHold
	}
	return defaultFlapHold
}

func (c *Config) flapHoldMax() Time {
	if c.FlapHoldMax > 0 {
		return c.FlapHoldMax
	}
	return defaultFlapHoldMax
}

// down records the plane going down at now.
func (d *flapDamp) down(now Time, cfg *Config) {
	if d.downs > 0 && now-d.lastDown > cfg.flapWindow() {
		d.downs = 0
	}
	d.downs++
	d.lastDown = now
}

// up records the plane coming up at now and returns whether it is held.
func (d *flapDamp) up(now Time, cfg *Config) bool {
	hold := cfg.flapHold()
	if hold < 0 || d.downs < flapMinDowns || now-d.lastDown > cfg.flapWindow() {
		return false
	}
	maxHold := cfg.flapHoldMax()
	for i := flapMinDowns; i < d.downs && hold < maxHold; i++ {
		hold *= 2
	}
	hold = min(hold, maxHold)
	d.until = max(d.until, now+hold)
	return true
}

// holding reports whether the plane is held out of use at now.
func (d *flapDamp) holding(now Time) bool { return now < d.until }

// nextRelease is the earliest end of a hold of ds after now (Never: none).
func nextRelease(ds *[wire.MaxPlanes]flapDamp, now Time) Time {
	t := Never
	for p := range ds {
		if u := ds[p].until; u > now && u < t {
			t = u
		}
	}
	return t
}

// dampMask applies damping to a port mask change from old to cur at now:
// each plane that went down counts a down, each that came up may be held.
// It returns the number of planes held.
func dampMask(ds *[wire.MaxPlanes]flapDamp, old, cur uint32, now Time, cfg *Config) (held uint64) {
	for p := 0; p < cfg.Planes; p++ {
		bit := uint32(1) << p
		switch {
		case old&bit != 0 && cur&bit == 0:
			ds[p].down(now, cfg)
		case old&bit == 0 && cur&bit != 0:
			if ds[p].up(now, cfg) {
				held++
			}
		}
	}
	return held
}
