package e2e

import (
	"encoding/json"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// t1RxBytes reads every T1 switch's received bytes (all ports) from
// mrc-switchd stats.
func (tb *testbed) t1RxBytes(t *testing.T) map[string]uint64 {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(tb.dir, "switch", "*-t1-*.yaml"))
	if len(files) == 0 {
		t.Fatalf("no T1 switch configs under %s/switch", tb.dir)
	}
	out := map[string]uint64{}
	for _, f := range files {
		b, err := exec.Command(filepath.Join(tb.bin, "mrc-switchd"), "stats", "-c", f, "--json").Output()
		if err != nil {
			t.Fatalf("mrc-switchd stats -c %s: %v", f, err)
		}
		var st struct {
			Ports []struct {
				Counters struct {
					RxBytes uint64 `json:"rx_bytes"`
				} `json:"counters"`
			} `json:"ports"`
		}
		if err := json.Unmarshal(b, &st); err != nil {
			t.Fatalf("stats of %s: %v", f, err)
		}
		name := strings.TrimSuffix(filepath.Base(f), ".yaml")
		for _, p := range st.Ports {
			out[name] += p.Counters.RxBytes
		}
	}
	return out
}

// TestTestbedRoCEECMP: mrc-write-bw --transport roce --verify from h0 to h3
// across a T1 of clos-2p in ECMP mode, real daemons and XDP switches: every
// size verified, and the switches' counters show the QP pinned to one T1
// (one UDP source port and flow label for the QP's life, hashed by the
// switches), while MRC on the same fabric spreads over all of them.
func TestTestbedRoCEECMP(t *testing.T) {
	requireNetns(t)
	tb := upTestbedArgs(t, "clos-2p", []string{"--mode", "ecmp"}, nil, nil, "h0", "h3")
	share := map[string]float64{}
	for _, tc := range []struct {
		transport string
		args      []string
	}{
		{"roce", []string{"-a", "-n", "5", "-t", "4", "--verify"}},
		{"mrc", []string{"-s", "65536", "-n", "200", "--verify"}},
	} {
		t.Run(tc.transport, func(t *testing.T) {
			before := tb.t1RxBytes(t)
			out, err := tb.run(t, "mrc-write-bw", "h0", "h3", append([]string{"--transport", tc.transport}, tc.args...)...)
			t.Logf("\n%s", out)
			if err != nil {
				t.Fatalf("mrc-write-bw --transport %s: %v", tc.transport, err)
			}
			if !strings.Contains(out, "Transport type : "+map[string]string{"roce": "RoCE", "mrc": "MRC"}[tc.transport]) {
				t.Fatalf("banner does not name the transport")
			}
			after := tb.t1RxBytes(t)
			var names []string
			var total, top uint64
			for n := range after {
				names = append(names, n)
				d := after[n] - before[n]
				total += d
				top = max(top, d)
			}
			sort.Strings(names)
			var rows []string
			for _, n := range names {
				rows = append(rows, n+"="+itoa(after[n]-before[n]))
			}
			if total == 0 {
				t.Fatal("no bytes crossed any T1: the run did not cross the fabric")
			}
			share[tc.transport] = float64(top) / float64(total)
			t.Logf("%s: T1 rx bytes %s; busiest T1 carries %.1f%%", tc.transport, strings.Join(rows, " "), 100*share[tc.transport])
		})
	}
	// RoCE: the data of the one QP on one T1 (the reverse ACKs may hash
	// elsewhere: a few % of the bytes). MRC sprays over the 4 T1s.
	if share["roce"] < 0.9 {
		t.Errorf("RoCE: the busiest T1 carried %.1f%% of the T1 bytes, want >= 90%% (one path per QP)", 100*share["roce"])
	}
	if share["mrc"] > 0.6 {
		t.Errorf("MRC: the busiest T1 carried %.1f%%, want < 60%% (spraying)", 100*share["mrc"])
	}
}

func itoa(v uint64) string {
	b, _ := json.Marshal(v)
	return string(b)
}
