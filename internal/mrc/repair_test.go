package mrc

import (
	"testing"

	"github.com/softmrc/softmrc/internal/wire"
)

// TestPathOutageNotHeldAfterRepair: a path (plane 0, T1 1) that fails once
// for a long time (mrc-lab S5: a T1 down for 2.5 s; S10: hung for 3 s),
// perhaps with a short second outage right after the repair (S10's daemon
// restart), then works, must carry data again within a hold and a few
// probe gaps: path damping holds a path that flaps, not one that failed.
// "congested at repair": the path's probes come back CE-marked for a while
// (M=SKIP_ONCE), so its EVs return as SKIP. Before promote took SKIP EVs
// that case failed: every EV of the path stayed a SKIP reserve (0 slots)
// and the path carried nothing for good, as one path of 16 in S5/S10.
func TestPathOutageNotHeldAfterRepair(t *testing.T) {
	const (
		hold    = 100 * Microsecond
		holdMax = 400 * Microsecond
		within  = holdMax + 4*hold
	)
	type outage struct{ start, end Time }
	cases := []struct {
		name    string
		outages []outage
		ceFor   Time // after the last outage, its probes arrive CE-marked this long (a congested path)
	}{
		{"one long outage", []outage{{200 * Microsecond, 2700 * Microsecond}}, 0},
		{"one long outage, congested at repair", []outage{{200 * Microsecond, 2700 * Microsecond}}, 300 * Microsecond},
		{"long outage, restart blip", []outage{{200 * Microsecond, 2700 * Microsecond}, {2800 * Microsecond, 2850 * Microsecond}}, 0},
		{"long outage, two blips", []outage{{200 * Microsecond, 2700 * Microsecond}, {2800 * Microsecond, 2850 * Microsecond}, {3000 * Microsecond, 3050 * Microsecond}}, 0},
	}
	dead := func(ev wire.EV) bool { return ev.Plane() == 0 && ev.T1()%4 == 1 }
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, hopts{seed: 81, cfg: func(c *Config) {
				c.PortRate = 10
				c.FlapWindow, c.FlapHold, c.FlapHoldMax = 1*Millisecond, hold, holdMax
			}})
			h.Rate = 10
			h.startTransfer(256<<20, 256<<10)
			down, ce := false, false
			last := tc.outages[len(tc.outages)-1].end
			h.at(last, func() { ce = tc.ceFor > 0 })
			h.at(last+tc.ceFor, func() { ce = false })
			h.Filter = func(_ int, _ wire.Plane, f []byte) bool {
				var p wire.Packet
				if (wire.Decoder{}).Decode(f, &p) != nil || !dead(p.EV) {
					return false
				}
				if ce && p.Opcode == wire.OpProbe {
					wire.IPv6(f[wire.EthLen:]).SetECN(wire.ECNCE)
				}
				return down
			}
			for _, o := range tc.outages {
				h.at(o.start, func() { down = true })
				h.at(o.end, func() { down = false })
			}
			sent := func() (n uint64) {
				for _, e := range h.snap(0).EVs {
					if dead(e.EV) {
						n += e.Sent
					}
				}
				return n
			}
			h.run(last, nil)
			a := sent()
			back := h.run(last+within, func() bool { return sent() > a+10 })
			s := h.snap(0)
			t.Logf("path holds %d; back: %v after %v", s.Counters.PathFlapHolds, back, h.now-last)
			if !back {
				for _, e := range s.EVs {
					if dead(e.EV) {
						t.Logf("EV %v: %v active %v slots %d", e.EV, e.State, e.Active, e.Slots)
					}
				}
				t.Fatalf("path (plane 0, T1 1) carried no data within %v after its last outage ended (path holds %d)", within, s.Counters.PathFlapHolds)
			}
		})
	}
}
