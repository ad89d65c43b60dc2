package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// S7 compares three configurations of each collective.
var (
	s7Tools   = []string{"mrc-allreduce-perf", "mrc-alltoall-perf"}
	s7Configs = []string{"mrc1", "roce1", "roce16"}
	s7Labels  = map[string]string{"mrc1": "MRC 1 QP", "roce1": "RoCE 1 QP", "roce16": "RoCE 16 QPs"}
	s7Short   = map[string]string{"mrc-allreduce-perf": "all-reduce", "mrc-alltoall-perf": "all-to-all"}
)

// The expectations and the tolerances this report applies to them.
const (
	// beatTolerance: "MRC 1 QP >= RoCE 16 QPs" passes at >= 95 % of RoCE's
	// busbw, since both may sit at the same link capacity and differ by noise.
	beatTolerance = 0.95
	// wellBelow: "RoCE 1 QP well below both" means at most 80 % of the
	// smaller of the two.
	wellBelow = 0.80
	// mrcLossKeep: with loss MRC keeps >= 80 % of its loss-free busbw.
	mrcLossKeep = 0.80
	// roceLossKeep: with loss RoCE keeps <= 30 % of its own.
	roceLossKeep = 0.30
)

// S7Setup is what the script ran (raw/setup.json).
type S7Setup struct {
	Planes     int     `json:"planes"`
	CapBps     float64 `json:"cap_bps"`
	RoCECapBps float64 `json:"roce_cap_bps"`
	Bytes      string  `json:"bytes"`
	Iters      int     `json:"iters"`
	Loss       string  `json:"loss"`
	DCQCNScale float64 `json:"dcqcn_scale"`
	// HostECN: the T0 downlinks mark CE (host_ecn), so last-hop
	// congestion reaches DCQCN as CNPs; nil in reports made before it
	HostECN *bool  `json:"host_ecn"`
	CPUs    int    `json:"cpus"`
	Date    string `json:"date"`
}

// S7Run is one measured collective run.
type S7Run struct {
	Tool   string `json:"tool"`
	Config string `json:"config"` // mrc1, roce1, roce16
	Lossy  bool   `json:"lossy"`
	// Failed: the tool gave no result (e.g. a RoCE QP hit RETRY_EXCEEDED);
	// its busbw counts as 0.
	Failed bool `json:"failed"`
	// BusBWMbps is the average bus bandwidth in Mbit/s (nccl-tests' busbw,
	// out-of-place and in-place averaged, as the tool's avg_busbw).
	BusBWMbps float64 `json:"busbw_mbps"`
	Wrong     int64   `json:"wrong"`
	// Uplinks: per T0 switch, the tx bytes of its uplinks (u0, u1, ...)
	// during the run, from the switch port counters.
	Uplinks map[string][]uint64 `json:"uplink_tx_bytes"`
	// Congestion sums every T0 port's counters during the run: how often
	// the emulated queues marked, trimmed or dropped (a full buffer).
	Congestion Congestion `json:"t0_congestion"`
}

// Congestion is a sum of switch port counters.
type Congestion struct {
	Marked  uint64 `json:"ecn_marked"`
	Trimmed uint64 `json:"trimmed"`
	Dropped uint64 `json:"dropped_buffer"`
	Fault   uint64 `json:"dropped_fault"`
}

// Imbalance is the worst T0's busiest uplink over its mean uplink load: 1 is
// an even spread, 2 (with two uplinks) all traffic on one. 0: no traffic.
func (r S7Run) Imbalance() float64 {
	worst := 0.0
	for _, ups := range r.Uplinks {
		var sum, max uint64
		for _, b := range ups {
			sum += b
			if b > max {
				max = b
			}
		}
		if sum == 0 {
			continue
		}
		worst = math.Max(worst, float64(max)*float64(len(ups))/float64(sum))
	}
	return worst
}

// S7Result is a whole run set.
type S7Result struct {
	Setup    S7Setup   `json:"setup"`
	Runs     []S7Run   `json:"runs"`
	Verdicts []Verdict `json:"verdicts"`
}

// Verdict is one expectation checked against measured numbers.
type Verdict struct {
	Name string `json:"name"`
	Want string `json:"want"`
	Got  string `json:"got"`
	Pass bool   `json:"pass"`
}

func (r *S7Result) find(tool, config string, lossy bool) (S7Run, bool) {
	for _, x := range r.Runs {
		if x.Tool == tool && x.Config == config && x.Lossy == lossy {
			return x, true
		}
	}
	return S7Run{}, false
}

// S7Verdicts computes the expectations from the measured busbw.
// A missing run is a failed verdict: nothing is assumed.
func S7Verdicts(r *S7Result) []Verdict {
	var vs []Verdict
	for _, tool := range s7Tools {
		name := s7Short[tool]
		get := func(cfg string, lossy bool) (float64, bool) {
			x, ok := r.find(tool, cfg, lossy)
			return x.BusBWMbps, ok
		}
		mrc, okM := get("mrc1", false)
		r1, ok1 := get("roce1", false)
		r16, ok16 := get("roce16", false)
		mrcL, okML := get("mrc1", true)
		r1L, ok1L := get("roce1", true)
		r16L, ok16L := get("roce16", true)

		v := Verdict{Name: name + ": MRC 1 QP >= RoCE 16 QPs", Want: fmt.Sprintf("MRC >= %.0f %% of RoCE 16 QPs", 100*beatTolerance)}
		switch {
		case !okM || !ok16:
			v.Got = "run missing"
		case r16 <= 0:
			v.Got = fmt.Sprintf("MRC %.1f Mbit/s, RoCE 16 QPs 0", mrc)
			v.Pass = mrc > 0
		default:
			v.Got = fmt.Sprintf("MRC %.1f vs %.1f Mbit/s (%.0f %%)", mrc, r16, 100*mrc/r16)
			v.Pass = mrc >= beatTolerance*r16
		}
		vs = append(vs, v)

		v = Verdict{Name: name + ": RoCE 1 QP well below both", Want: fmt.Sprintf("RoCE 1 QP <= %.0f %% of min(MRC, RoCE 16 QPs)", 100*wellBelow)}
		switch {
		case !ok1 || !okM || !ok16:
			v.Got = "run missing"
		case math.Min(mrc, r16) <= 0:
			v.Got = "a reference run measured 0"
		default:
			ref := math.Min(mrc, r16)
			v.Got = fmt.Sprintf("%.1f Mbit/s = %.0f %% of MRC, %.0f %% of RoCE 16 QPs", r1, 100*r1/mrc, 100*r1/r16)
			v.Pass = r1 <= wellBelow*ref
		}
		vs = append(vs, v)

		v = Verdict{Name: name + ": MRC holds up under loss", Want: fmt.Sprintf(">= %.0f %% of its loss-free busbw", 100*mrcLossKeep)}
		switch {
		case !okM || !okML:
			v.Got = "run missing"
		case mrc <= 0:
			v.Got = "loss-free run measured 0"
		default:
			v.Got = fmt.Sprintf("%.1f of %.1f Mbit/s (%.0f %%)", mrcL, mrc, 100*mrcL/mrc)
			v.Pass = mrcL >= mrcLossKeep*mrc
		}
		vs = append(vs, v)

		for _, c := range []struct {
			cfg       string
			free, lss float64
			ok        bool
		}{{"roce16", r16, r16L, ok16 && ok16L}, {"roce1", r1, r1L, ok1 && ok1L}} {
			v = Verdict{Name: name + ": " + s7Labels[c.cfg] + " collapses under loss", Want: fmt.Sprintf("<= %.0f %% of its loss-free busbw", 100*roceLossKeep)}
			switch {
			case !c.ok:
				v.Got = "run missing"
			case c.free <= 0:
				v.Got = "loss-free run measured 0"
			default:
				v.Got = fmt.Sprintf("%.1f of %.1f Mbit/s (%.0f %%)", c.lss, c.free, 100*c.lss/c.free)
				v.Pass = c.lss <= roceLossKeep*c.free
			}
			vs = append(vs, v)
		}
	}
	return vs
}

// toolReport is the part of the tools' --json output used here.
type toolReport struct {
	AvgBusBW float64 `json:"avg_busbw"` // GB/s (1e9 bytes)
	Wrong    int64   `json:"wrong"`
}

// switchStats is the part of `mrc-switchd stats --json` used here.
type switchStats struct {
	Ports []struct {
		Name     string `json:"name"`
		Counters struct {
			TxBytes uint64 `json:"tx_bytes"`
			Marked  uint64 `json:"ecn_marked"`
			Trimmed uint64 `json:"trimmed"`
			Drops   struct {
				Buffer uint64 `json:"buffer"`
				Fault  uint64 `json:"fault"`
			} `json:"drops"`
		} `json:"counters"`
	} `json:"ports"`
}

// LoadS7 reads the script's raw folder: setup.json and, per run KEY =
// TOOL.CONFIG.lossN, KEY.json (absent if the run failed) and
// KEY.before.json / KEY.after.json (T0 port counters).
func LoadS7(dir string) (*S7Result, error) {
	r := &S7Result{}
	if err := readJSON(filepath.Join(dir, "setup.json"), &r.Setup); err != nil {
		return nil, err
	}
	for _, tool := range s7Tools {
		for _, cfg := range s7Configs {
			for _, lossy := range []bool{false, true} {
				key := fmt.Sprintf("%s.%s.loss%d", tool, cfg, map[bool]int{false: 0, true: 1}[lossy])
				before := filepath.Join(dir, key+".before.json")
				if _, err := os.Stat(before); errors.Is(err, fs.ErrNotExist) {
					continue // not run
				}
				run := S7Run{Tool: tool, Config: cfg, Lossy: lossy}
				var tr toolReport
				switch err := readJSON(filepath.Join(dir, key+".json"), &tr); {
				case errors.Is(err, fs.ErrNotExist):
					run.Failed = true
				case err != nil:
					return nil, err
				default:
					run.BusBWMbps = tr.AvgBusBW * 8000
					run.Wrong = tr.Wrong
				}
				up, cong, err := uplinkDelta(before, filepath.Join(dir, key+".after.json"))
				if err != nil {
					return nil, err
				}
				run.Uplinks, run.Congestion = up, cong
				r.Runs = append(r.Runs, run)
			}
		}
	}
	if len(r.Runs) == 0 {
		return nil, fmt.Errorf("%s: no runs (no *.before.json): is this the raw folder of s7-collectives.sh?", dir)
	}
	r.Verdicts = S7Verdicts(r)
	return r, nil
}

func uplinkDelta(before, after string) (map[string][]uint64, Congestion, error) {
	var b, a map[string]switchStats
	var cong Congestion
	if err := readJSON(before, &b); err != nil {
		return nil, cong, err
	}
	if err := readJSON(after, &a); err != nil {
		return nil, cong, err
	}
	out := map[string][]uint64{}
	for sw, st := range a {
		old := map[string]int{}
		for i, p := range b[sw].Ports {
			old[p.Name] = i
		}
		var names []string
		bytes := map[string]uint64{}
		for _, p := range st.Ports {
			c := p.Counters
			if i, ok := old[p.Name]; ok {
				o := b[sw].Ports[i].Counters
				c.TxBytes -= o.TxBytes
				c.Marked -= o.Marked
				c.Trimmed -= o.Trimmed
				c.Drops.Buffer -= o.Drops.Buffer
				c.Drops.Fault -= o.Drops.Fault
			}
			cong.Marked += c.Marked
			cong.Trimmed += c.Trimmed
			cong.Dropped += c.Drops.Buffer
			cong.Fault += c.Drops.Fault
			if strings.HasPrefix(p.Name, "u") {
				names = append(names, p.Name)
				bytes[p.Name] = c.TxBytes
			}
		}
		sort.Strings(names)
		for _, n := range names {
			out[sw] = append(out[sw], bytes[n])
		}
	}
	return out, cong, nil
}

func readJSON(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}
