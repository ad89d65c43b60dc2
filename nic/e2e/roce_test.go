package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/softmrc/softmrc/nic/config"
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

// engineCounters reads a host's engine counters (mrcctl -json counters).
func (tb *testbed) engineCounters(t *testing.T, hostName string) map[string]uint64 {
	t.Helper()
	b, err := exec.Command(filepath.Join(tb.bin, "mrcctl"), "-d", tb.hosts[hostName].cfg.DeviceSocket, "-json", "counters").Output()
	if err != nil {
		t.Fatalf("mrcctl counters on %s: %v", hostName, err)
	}
	var c struct {
		Engine map[string]uint64 `json:"Engine"`
	}
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatalf("mrcctl counters on %s: %v: %s", hostName, err, b)
	}
	return c.Engine
}

// switchECNMarked sums a switch's ecn_marked counters.
func (tb *testbed) switchECNMarked(t *testing.T, sw string) uint64 {
	t.Helper()
	b, err := exec.Command(filepath.Join(tb.bin, "mrc-switchd"), "stats", "-c", filepath.Join(tb.dir, "switch", sw+".yaml"), "--json").Output()
	if err != nil {
		t.Fatalf("mrc-switchd stats %s: %v", sw, err)
	}
	var st struct {
		Ports []struct {
			Counters struct {
				ECNMarked uint64 `json:"ecn_marked"`
			} `json:"counters"`
		} `json:"ports"`
	}
	if err := json.Unmarshal(b, &st); err != nil {
		t.Fatal(err)
	}
	var n uint64
	for _, p := range st.Ports {
		n += p.Counters.ECNMarked
	}
	return n
}

// TestTestbedRoCEDCQCN: DCQCN on real packets. One plane, fabric links of
// 200 Mb/s with an ECN threshold, NIC ports paced to 1 Gb/s, RoCE from h0
// (T0 0) to h2 (T0 1): the
// T0's uplink queue marks CE, mrc-nicd on h2 answers with CNPs, h0 receives
// them, and the verified run completes. The bandwidth is logged.
func TestTestbedRoCEDCQCN(t *testing.T) {
	requireNetns(t)
	topoFile := filepath.Join(t.TempDir(), "dcqcn.yaml")
	if err := os.WriteFile(topoFile, []byte(`mode: ecmp
dataplane: xdp
planes: 1
t0_per_plane: 2
t1_per_plane: 1
hosts_per_t0: 2
mtu: 3500
links:
  fabric:
    capacity: 200Mbit
    buffer: 128KiB
    ecn_threshold: 16KiB
    trim_threshold: 64KiB
`), 0o644); err != nil {
		t.Fatal(err)
	}
	// The NIC ports are paced to 1 Gb/s: DCQCN's line rate (the engine's
	// port rate) is then 5 times the bottleneck, as a 100G NIC behind a
	// 20G link, rather than an unpaced engine's 100 Gb/s. h2 runs DCQCN
	// at the mlx5 defaults, h1 (same T0 as h0) with dcqcn_scale 100 (1 Gb/s
	// standing for 100 Gb/s; only the sender's RP uses it, the NP's CNP
	// interval is the receiver's, which is h2 in both runs).
	tb := upTestbedArgs(t, "", []string{topoFile}, func(c *config.Config) {
		for i := range c.Ports {
			c.Ports[i].PacingBps = 1e9
		}
		if c.Host == "h1" {
			c.RoCE.DCQCNScale = 100
		}
	}, nil, "h0", "h1", "h2")
	for _, from := range []string{"h0", "h1"} {
		rx0, tx0 := tb.engineCounters(t, from)["RxCNP"], tb.engineCounters(t, "h2")["TxCNP"]
		out, err := tb.run(t, "mrc-write-bw", from, "h2", "--transport", "roce", "-s", "65536", "-D", "3", "--verify")
		if err != nil {
			t.Fatalf("mrc-write-bw --transport roce from %s: %v\n%s", from, err, out)
		}
		marked := tb.switchECNMarked(t, "p0-t0-0")
		tx, rx := tb.engineCounters(t, "h2")["TxCNP"]-tx0, tb.engineCounters(t, from)["RxCNP"]-rx0
		m := bwRow.FindStringSubmatch(out)
		if m == nil {
			t.Fatalf("no result row:\n%s", out)
		}
		t.Logf("RoCE %s -> h2 over 200 Mb/s (23.8 MiB/s): %s MiB/s; CE marks at p0-t0-0 so far: %d; CNPs sent by h2: %d, received by %s: %d",
			from, m[4], marked, tx, from, rx)
		if marked == 0 {
			t.Fatal("the T0 never marked CE: the queue model did not engage")
		}
		if tx == 0 || rx == 0 || rx > tx {
			t.Fatalf("CNPs sent %d, received %d: want CNPs from the receiver reaching the sender", tx, rx)
		}
	}
	// MRC on the same fabric, for the log (docs/roce.md quotes all three).
	out, err := tb.run(t, "mrc-write-bw", "h0", "h2", "-s", "65536", "-D", "3", "--verify")
	if m := bwRow.FindStringSubmatch(out); err == nil && m != nil {
		t.Logf("MRC h0 -> h2 on the same fabric: %s MiB/s", m[4])
	} else {
		t.Logf("MRC run: %v\n%s", err, out)
	}
}
