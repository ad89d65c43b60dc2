package mrcsim

import (
	"testing"

	"github.com/softmrc/softmrc/internal/mrc"
)

// TestScenarioEqualEVsPerPlane: 4 planes with 2 T1s each; one T1 of plane
// 0 hangs mid-transfer. Its EVs (half of the plane's active ones, and half
// of its reserve) go ASSUMED_BAD; the plane's reserve runs out long before
// every slot is refilled. The plane still has a working path (the other
// T1), so it must keep as many usable active EVs as the other planes
// (reusing its GOOD paths) and carry its share of the packets: fewer EVs
// on one plane make the planes' loads unequal (the "false incast" of the
// brief). When the T1 comes back, probes return its EVs to service.
// Every claim on every seed.
func TestScenarioEqualEVsPerPlane(t *testing.T) {
	share := dist{name: "plane 0's packet share while its T1 was down"}
	sweep(t, func(t *testing.T, seed uint64) {
		if s, ok := equalEVsPerPlane(t, seed); ok {
			share.add(seed, s)
		}
	})
	share.eachAtLeast(t, 0.22)
}

func equalEVsPerPlane(t *testing.T, seed uint64) (share0 float64, ok bool) {
	sc := crossT1(100)
	sc.T1s = 2
	sc.Seed = seed
	f := newFabric(t, sc, seed, nil)
	fl := connect(t, f, 0, 1, mrc.QPConfig{}, 48<<20, 64<<10, 64)
	fl.StartAt(0)
	const hang, check, reboot = 200 * us, 400 * us, 800 * us
	f.Sim.At(hang, func() { f.Sim.T1(0, 1).SetHung(true) })
	f.Sim.At(reboot, func() { f.Sim.T1(0, 1).SetHung(false) })

	usable := func(s mrc.QPSnapshot) (n [4]int) {
		for _, e := range s.EVs {
			if e.Active && (e.State == mrc.EVGood || e.State == mrc.EVSkip) {
				n[e.Plane] += e.Slots
			}
		}
		return
	}
	sent := func(s mrc.QPSnapshot) (n [4]uint64) {
		for _, e := range s.EVs {
			n[e.Plane] += e.Sent
		}
		return
	}
	var atCheck, atEnd [4]uint64
	var slots [4]int
	var bad int
	f.Sim.At(check, func() {
		s := fl.Snapshot()
		slots, atCheck = usable(s), sent(s)
		for _, e := range s.EVs {
			if e.Plane == 0 && int(e.EV.T1())%sc.T1s == 1 && e.State == mrc.EVAssumedBad {
				bad++
			}
		}
	})
	f.Sim.At(reboot, func() { atEnd = sent(fl.Snapshot()) })
	f.RunUntilDone(1e9)
	checkFlow(t, fl)
	var share [4]float64
	var tot uint64
	for p := range atEnd {
		tot += atEnd[p] - atCheck[p]
	}
	for p := range atEnd {
		share[p] = float64(atEnd[p]-atCheck[p]) / float64(tot)
	}
	t.Logf("dead T1: %d EVs ASSUMED_BAD; usable rotation slots per plane %v; packet shares while the T1 was down %.3f", bad, slots, share)
	if bad < 16 {
		t.Errorf("only %d EVs through the hung T1 went ASSUMED_BAD: the scenario did not exhaust the plane's reserve", bad)
		return 0, false
	}
	for p := 1; p < 4; p++ {
		if slots[p] != slots[0] {
			t.Errorf("plane %d has %d usable rotation slots, plane 0 %d: want equal while plane 0 has a working path", p, slots[p], slots[0])
		}
	}
	s := fl.Snapshot()
	if got := usable(s); got[0] != got[1] {
		t.Errorf("after the reboot: usable rotation slots per plane %v", got)
	}
	if s.Counters.EVTransitions[mrc.EVAssumedBad][mrc.EVGood] == 0 {
		t.Errorf("no EV returned from ASSUMED_BAD after the reboot: %v", s.Counters.EVTransitions)
	}
	return share[0], true
}
