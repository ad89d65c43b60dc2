package scenario

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"time"

	"github.com/softmrc/softmrc/testbed/plan"
	"github.com/softmrc/softmrc/testbed/run"
)

// Timeline is the scenario's fault list with the random faults drawn and
// their clears added, sorted by time. The same scenario and plan always give
// the same timeline (the generator is seeded).
func (s *Scenario) Timeline(pl *plan.Plan) ([]Fault, error) {
	out := slices.Clone(s.Faults)
	if r := s.Random; r != nil {
		rf, err := r.draw(pl)
		if err != nil {
			return nil, err
		}
		out = append(out, rf...)
	}
	// Faults before the traffic come first, then by time.
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].BeforeTraffic != out[j].BeforeTraffic {
			return out[i].BeforeTraffic
		}
		return out[i].At < out[j].At
	})
	return out, nil
}

type candidate struct {
	target string
	plane  int
}

// candidates expands target classes and names. With KeepPlanePath only
// targets that leave every host pair a path in their plane qualify
// (fabric links and T1 switches with ≥ 2 T1s per plane).
func (r *RandomFaults) candidates(pl *plan.Plan) ([]candidate, error) {
	var out []candidate
	add := func(t string, plane int, cutsHost bool) {
		if r.KeepPlanePath && (cutsHost || pl.T1PerPlane < 2) {
			return
		}
		out = append(out, candidate{t, plane})
	}
	for _, t := range r.Targets {
		switch t {
		case "host-links":
			for _, l := range pl.Links {
				if l.Kind == plan.LinkHost {
					add(l.Name, planeOf(pl, l.B.Node), true)
				}
			}
		case "nic-ports":
			for _, h := range pl.Hosts {
				for i, p := range h.Ports {
					add(h.Name+":"+p.Ifname, i, true)
				}
			}
		case "fabric-links":
			for _, l := range pl.Links {
				if l.Kind == plan.LinkFabric {
					add(l.Name, planeOf(pl, l.A.Node), false)
				}
			}
		case "t1-switches":
			for _, sw := range pl.Switches {
				if sw.Role == plan.KindT1 {
					add(sw.Name, sw.Plane, false)
				}
			}
		default:
			sw := pl.Switch(t)
			cuts := sw == nil || sw.Role != plan.KindT1
			plane := -1
			if sw != nil {
				plane = sw.Plane
			} else if l := pl.Link(t); l != nil {
				plane = planeOf(pl, l.B.Node)
				cuts = l.Kind != plan.LinkFabric
			}
			add(t, plane, cuts)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s:%d: random_faults.targets: no target qualifies (keep_plane_path allows only fabric-links and t1-switches, with at least 2 T1s per plane)", "scenario", r.Line)
	}
	return out, nil
}

// drawnOp is the fault a random op becomes on target: a hang, which only
// a switch takes, blackholes a link or port instead.
func drawnOp(pl *plan.Plan, target string, op run.Op) run.Op {
	if op.Kind == "hang" && pl.Switch(target) == nil {
		return run.Op{Kind: "blackhole"}
	}
	return op
}

func planeOf(pl *plan.Plan, node string) int {
	if sw := pl.Switch(node); sw != nil {
		return sw.Plane
	}
	return -1
}

// draw places one fault every MinGap..MaxGap from From until Until, each
// cleared Hold later. At most one random fault is active per plane at a
// time, so with KeepPlanePath every plane keeps a path.
func (r *RandomFaults) draw(pl *plan.Plan) ([]Fault, error) {
	cands, err := r.candidates(pl)
	if err != nil {
		return nil, err
	}
	rng := rand.New(rand.NewPCG(uint64(r.Seed), 0x6d72632d6c6162))
	busy := map[int]time.Duration{} // plane -> end of its active fault
	var out []Fault
	for t := r.From; ; {
		t += r.MinGap + time.Duration(rng.Int64N(int64(r.MaxGap-r.MinGap)+1))
		t = t.Round(time.Millisecond)
		if t+r.Hold > r.Until {
			break
		}
		var free []candidate
		for _, c := range cands {
			if c.plane < 0 || busy[c.plane] <= t {
				free = append(free, c)
			}
		}
		if len(free) == 0 {
			continue
		}
		c := free[rng.IntN(len(free))]
		op := drawnOp(pl, c.target, r.Ops[rng.IntN(len(r.Ops))])
		if c.plane >= 0 {
			busy[c.plane] = t + r.Hold
		}
		out = append(out, Fault{At: t, Target: c.target, Op: op, Line: r.Line},
			Fault{At: t + r.Hold, Target: c.target, Op: run.Op{Kind: "clear"}, Line: r.Line})
	}
	return out, nil
}
