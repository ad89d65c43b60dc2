package pathprobe

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"testing"
	"time"
)

// The time the mapper takes to name a fault, by design: a simulation of
// clos-4p's agents (4 hosts, 4 planes, 2 T0s and 4 T1s a plane, 20 loops a
// host) with the real Prober and Localise on an injected clock, every
// probe answered at once unless a faulted port drops it, and the
// collector mapping every PollRounds. Loss acts where the XDP switch
// applies it, at egress (docs/switchd.md): a NIC–T0 link fault at the
// T0's downlink, a T0–T1 link fault at both switches' ports, a switch
// fault at every port. So a T0–T1 link at 5 % loses ~9.75 % of the loops
// through it, a NIC–T0 link or a whole switch 5 %: those are the slow
// cases. Nothing here waits on a real clock: it measures probe rounds,
// which an idle machine turns into time at the interval.

// simPort is an egress port: switch name and port ("d0", "u1").
type simPort struct{ sw, port string }

type simLoop struct {
	Target
	ports []simPort // where the loop can be dropped
}

func clos4p() []simLoop {
	var loops []simLoop
	for h := 0; h < 4; h++ {
		host, k, d := fmt.Sprintf("h%d", h), h/2, h%2
		for p := 0; p < 4; p++ {
			t0 := fmt.Sprintf("p%d-t0-%d", p, k)
			loops = append(loops, simLoop{Target{Host: host, Plane: p, T0: t0, T1: -1}, []simPort{{t0, fmt.Sprintf("d%d", d)}}})
			for j := 0; j < 4; j++ {
				t1 := fmt.Sprintf("p%d-t1-%d", p, j)
				loops = append(loops, simLoop{Target{Host: host, Plane: p, T0: t0, T1: j, T1Sw: t1},
					[]simPort{{t0, fmt.Sprintf("u%d", j)}, {t1, fmt.Sprintf("d%d", k)}, {t0, fmt.Sprintf("d%d", d)}}})
			}
		}
	}
	return loops
}

// faultPorts are the egress ports a fault of target (a testbed link or
// switch name) drops on.
func faultPorts(target string) []simPort {
	var h, p, k, j int
	if n, _ := fmt.Sscanf(target, "h%d--p%d-t0-%d", &h, &p, &k); n == 3 {
		return []simPort{{fmt.Sprintf("p%d-t0-%d", p, k), fmt.Sprintf("d%d", h%2)}}
	}
	if n, _ := fmt.Sscanf(target, "p%d-t0-%d--p%d-t1-%d", &p, &k, &p, &j); n == 4 {
		return []simPort{{fmt.Sprintf("p%d-t0-%d", p, k), fmt.Sprintf("u%d", j)}, {fmt.Sprintf("p%d-t1-%d", p, j), fmt.Sprintf("d%d", k)}}
	}
	var out []simPort
	for _, port := range []string{"d0", "d1", "u0", "u1", "u2", "u3"} {
		out = append(out, simPort{target, port})
	}
	return out
}

// PollRounds is how often (in probe rounds) the simulated collector maps:
// mrc-mapper watch's default 100 ms at the default 5 ms interval.
const pollRounds = 20

// roundsToName runs the agents with targets faulted at loss (1:
// blackhole) from round 0 and returns the first round at which the map's
// bad rows are exactly targets (-1 if not within limit rounds).
func roundsToName(rng *rand.Rand, targets []string, loss float64, limit int) int {
	const iv = 5 * time.Millisecond
	loops := clos4p()
	drop := map[simPort]bool{}
	for _, t := range targets {
		for _, p := range faultPorts(t) {
			drop[p] = true
		}
	}
	byHost := map[string]*Prober{}
	var hosts []string
	idx := map[string][]int{}
	for i, l := range loops {
		idx[l.Host] = append(idx[l.Host], i)
	}
	for h, is := range idx {
		var ts []Target
		for _, i := range is {
			ts = append(ts, loops[i].Target)
		}
		byHost[h] = New(ts, iv, max(10*iv, 20*time.Millisecond))
		hosts = append(hosts, h)
	}
	sort.Strings(hosts)
	want := slices.Clone(targets)
	slices.Sort(want)
	// A warm-up of full windows before the fault, as on a running fabric.
	const warm = Window
	var buf []Probe
	for r := -warm; r < limit; r++ {
		now := time.Duration(r+warm) * iv
		for _, h := range hosts {
			p := byHost[h]
			buf = p.Due(now, buf[:0])
			for _, pr := range buf {
				lost := false
				for _, port := range loops[idx[h][pr.Target]].ports {
					if r >= 0 && drop[port] && rng.Float64() < loss {
						lost = true
					}
				}
				if !lost {
					p.Received(pr.Target, pr.Seq, now+50*time.Microsecond)
				}
			}
		}
		if r < 0 || r%pollRounds != 0 {
			continue
		}
		var all []Stats
		for _, h := range hosts {
			all = append(all, byHost[h].Stats(now+iv/2)...)
		}
		var bad []string
		for _, l := range Localise(all) {
			if l.State != Good {
				bad = append(bad, l.Name)
			}
		}
		slices.Sort(bad)
		if slices.Equal(bad, want) {
			return r
		}
	}
	return -1
}

// TestDetectionRounds: on an idle machine (every round on time) the
// mapper names each kind of fault alone within 2 s at the 5 ms default
// interval — 400 rounds less the 10 of the loss timeout and a poll's 20 —
// in every one of the simulated trials, blackholed and at 5 % loss, one
// fault at a time and one per plane at once as TestTestbedMapper does.
// The quantiles are logged (docs/operations.md).
func TestDetectionRounds(t *testing.T) {
	const budget = 400 - 10 - pollRounds
	trials := 40
	if testing.Short() || raceEnabled {
		trials = 10
	}
	rng := rand.New(rand.NewPCG(13, 2026))
	for _, c := range []struct {
		kind    string
		targets []string
	}{
		{"NIC–T0 link", []string{"h0--p0-t0-0"}},
		{"T0–T1 link", []string{"p0-t0-0--p0-t1-1"}},
		{"T0 switch", []string{"p0-t0-1"}},
		{"T1 switch", []string{"p0-t1-2"}},
		{"4 NIC–T0 links, one per plane", []string{"h0--p0-t0-0", "h1--p1-t0-0", "h2--p2-t0-1", "h3--p3-t0-1"}},
		{"4 T0–T1 links, one per plane", []string{"p0-t0-0--p0-t1-0", "p1-t0-1--p1-t1-1", "p2-t0-0--p2-t1-2", "p3-t0-1--p3-t1-3"}},
		{"a T0 and a T1 switch", []string{"p0-t0-0", "p2-t1-0"}},
	} {
		for _, loss := range []float64{1, 0.05} {
			var rs []int
			for i := 0; i < trials; i++ {
				r := roundsToName(rng, c.targets, loss, 2*400)
				if r < 0 {
					r = 2 * 400
				}
				rs = append(rs, r)
			}
			slices.Sort(rs)
			worst := rs[len(rs)-1]
			t.Logf("%-30s loss %4.0f%%: named alone after %3d / %3d / %3d rounds (median / 90th / worst of %d) = %v at 5 ms",
				c.kind, 100*loss, rs[len(rs)/2], rs[len(rs)*9/10], worst, trials, time.Duration(worst)*5*time.Millisecond)
			if worst > budget {
				t.Errorf("%s at %.0f%% loss: a trial took %d rounds, over the %d that 2 s hold at 5 ms", c.kind, 100*loss, worst, budget)
			}
		}
	}
}
