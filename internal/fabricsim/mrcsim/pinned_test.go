package mrcsim

import (
	"testing"

	"github.com/softmrc/softmrc/internal/fabricsim"
	"github.com/softmrc/softmrc/internal/mrc"
)

// TestScenarioPinnedECNShare is mrc-lab's S6 in the simulator: two flows
// share one fabric link (T0 0 → T1 0, path A); flow 1 (h0→h2) has two EVs,
// one on path A and one on path B (T1 1), flow 2 (h1→h3) has one EV, on
// path A only, and joins after flow 1 has filled both paths. Each must get
// ≥ 45 % of the shared link while both run, flow 2 without a QP error:
// every EV flow 2 has is SKIP most of the time (ECN), and SKIP must never
// starve a QP; flow 1 must yield path A by moving its share to its unmarked
// EV on B.
func TestScenarioPinnedECNShare(t *testing.T) {
	sc := fabricsim.DefaultConfig()
	sc.Planes, sc.T0s, sc.T1s, sc.HostsPerT0 = 1, 2, 2, 2
	sc.Host.RateBps, sc.Fabric.RateBps = 100e9, 50e9
	low := dist{name: "lower flow's goodput / shared link capacity"}
	sweep(t, func(t *testing.T, seed uint64) {
		sc := sc
		sc.Seed = seed
		low.add(seed, pinnedShare(t, sc, seed))
	})
	low.eachAtLeast(t, 0.45)
}

func pinnedShare(t *testing.T, sc fabricsim.Config, seed uint64) float64 {
	// Host 0's template names T1 0 and T1 1 (one EV each), host 1's T1 0
	// only: its single EV takes path A.
	pin := func(h int, c *mrc.Config) {
		if h > 1 {
			return
		}
		tm := c.Template
		lp := &tm.Local.Planes[0]
		a := lp.T1[0]
		if h == 1 {
			tm.T1Count = 1
			lp.T1 = lp.T1[:1:1]
			lp.T1[0] = a
		}
		if err := tm.Validate(); err != nil {
			t.Fatal(err)
		}
	}
	f := newFabric(t, sc, seed, pin)
	const join = 200_000 // ns: flow 1 alone first
	fl1 := connect(t, f, 0, 2, mrc.QPConfig{NumEVs: 2, ReservePerPlane: -1}, 24<<20, 64<<10, 64)
	fl2 := connect(t, f, 1, 3, mrc.QPConfig{NumEVs: 1, ReservePerPlane: -1}, 12<<20, 64<<10, 64)
	fl1.StartAt(0)
	fl2.StartAt(join)
	f.RunUntilDone(1e9)
	checkFlow(t, fl1)
	checkFlow(t, fl2)
	// Measured from 100 µs after the join (about 20 RTTs) to the end of
	// the first flow to finish.
	from, to := int64(join+100_000), min(fl1.End, fl2.End)
	if to <= from {
		t.Fatalf("the flows overlapped only until %d ns", to)
	}
	c := sc.Fabric.RateBps * PayloadEfficiency(2048, sc.Mode, 24)
	g1, g2 := fl1.GoodputIn(from, to), fl2.GoodputIn(from, to)
	s2 := fl2.Snapshot()
	t.Logf("shared link %.1f Gbit/s: flow 1 %.1f Gbit/s (%.0f%%, alone before the join %.1f), flow 2 %.1f (%.0f%%); flow 2: no-EV stalls %d, timeouts %d, ECN %d, losses kept as congestion %d",
		c/1e9, g1/1e9, 100*g1/c, fl1.GoodputIn(0, join)/1e9, g2/1e9, 100*g2/c, s2.Counters.NoEVStalls, s2.Counters.Timeouts, s2.EVs[0].ECN, s2.Counters.LastEVKept)
	if s2.Counters.NoEVStalls > 0 {
		t.Errorf("flow 2 found no usable EV %d times: its one EV left SKIP for ASSUMED_BAD on congestion losses", s2.Counters.NoEVStalls)
	}
	return min(g1, g2) / c
}
