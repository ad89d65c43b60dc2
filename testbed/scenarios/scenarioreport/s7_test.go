package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// runs builds a result set from busbw values (Mbit/s) keyed
// "config/lossy", the same for both collectives; a negative value omits the run.
func runs(bw map[string]float64) *S7Result {
	r := &S7Result{Setup: S7Setup{Planes: 2, CapBps: 40e6, RoCECapBps: 80e6, Loss: "1%"}}
	for _, tool := range s7Tools {
		for _, cfg := range s7Configs {
			for _, lossy := range []bool{false, true} {
				v, ok := bw[fmt.Sprintf("%s/%v", cfg, lossy)]
				if !ok || v < 0 {
					continue
				}
				r.Runs = append(r.Runs, S7Run{Tool: tool, Config: cfg, Lossy: lossy, BusBWMbps: v, Failed: v == 0})
			}
		}
	}
	return r
}

func seedLike() map[string]float64 {
	return map[string]float64{
		"mrc1/false": 76, "roce16/false": 74, "roce1/false": 40,
		"mrc1/true": 70, "roce16/true": 8, "roce1/true": 0,
	}
}

func TestS7Verdicts(t *testing.T) {
	with := func(k string, v float64) map[string]float64 {
		m := seedLike()
		m[k] = v
		return m
	}
	for _, tc := range []struct {
		name string
		bw   map[string]float64
		// failing lists the expectations (name suffixes) that must fail, for
		// both collectives; all others must pass.
		failing []string
	}{
		{"seed-like result passes", seedLike(), nil},
		{"MRC within tolerance of RoCE 16 QPs", with("mrc1/false", 71), nil},
		{"MRC below RoCE 16 QPs", with("mrc1/false", 60), []string{"MRC 1 QP >= RoCE 16 QPs"}},
		{"RoCE 1 QP as fast as MRC", with("roce1/false", 72), []string{"RoCE 1 QP well below both"}},
		{"MRC collapses under loss", with("mrc1/true", 50), []string{"MRC holds up under loss"}},
		{"RoCE 16 QPs unaffected by loss", with("roce16/true", 60), []string{"RoCE 16 QPs collapses under loss"}},
		{"RoCE 1 QP run missing", with("roce1/false", -1), []string{"RoCE 1 QP well below both", "RoCE 1 QP collapses under loss"}},
		{"RoCE loss-free run failed", with("roce16/false", 0), []string{"RoCE 1 QP well below both", "RoCE 16 QPs collapses under loss"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			vs := S7Verdicts(runs(tc.bw))
			if len(vs) != 10 {
				t.Fatalf("%d verdicts, want 10 (5 per collective)", len(vs))
			}
			for _, v := range vs {
				wantFail := false
				for _, f := range tc.failing {
					wantFail = wantFail || strings.HasSuffix(v.Name, f)
				}
				if v.Pass == wantFail {
					t.Errorf("%s: pass=%v, want %v (got %q)", v.Name, v.Pass, !wantFail, v.Got)
				}
			}
		})
	}
}

// TestLoadS7 reads a raw folder as the script writes it: a failed run has no
// tool JSON, uplink loads come from counter deltas.
func TestLoadS7(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, v any) {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	stats := func(u0, u1 uint64) map[string]any {
		port := func(n string, b uint64) map[string]any {
			// one mark per 100 bytes, one trim and one full-buffer drop per 200
			return map[string]any{"name": n, "counters": map[string]any{"tx_bytes": b, "ecn_marked": b / 100, "trimmed": b / 200,
				"drops": map[string]any{"buffer": b / 200}}}
		}
		return map[string]any{"p0-t0-0": map[string]any{"ports": []any{port("d0", 5), port("u0", u0), port("u1", u1)}}}
	}
	write("setup.json", map[string]any{"planes": 2, "cap_bps": 40e6, "roce_cap_bps": 80e6, "loss": "1%"})
	key := "mrc-allreduce-perf.roce1.loss0"
	write(key+".before.json", stats(100, 100))
	write(key+".after.json", stats(1100, 100)) // all on u0: a collision
	write(key+".json", map[string]any{"avg_busbw": 0.005, "wrong": 0})
	key = "mrc-allreduce-perf.roce1.loss1"
	write(key+".before.json", stats(0, 0))
	write(key+".after.json", stats(300, 100))
	r, err := LoadS7(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Runs) != 2 {
		t.Fatalf("%d runs, want 2: %+v", len(r.Runs), r.Runs)
	}
	free, lossy := r.Runs[0], r.Runs[1]
	if free.Failed || free.BusBWMbps != 40 || free.Imbalance() != 2 {
		t.Errorf("loss-free run %+v (imbalance %v), want 40 Mbit/s, imbalance 2", free, free.Imbalance())
	}
	if c := free.Congestion; c.Marked != 10 || c.Trimmed != 5 || c.Dropped != 5 {
		t.Errorf("loss-free run congestion %+v, want the counter deltas 10 marked, 5 trimmed, 5 dropped", c)
	}
	if !lossy.Failed || lossy.BusBWMbps != 0 || lossy.Imbalance() != 1.5 {
		t.Errorf("lossy run %+v (imbalance %v), want failed, 0, imbalance 1.5", lossy, lossy.Imbalance())
	}
	if err := WriteS7(r, filepath.Join(dir, "out")); err != nil {
		t.Fatal(err)
	}
	md, err := os.ReadFile(filepath.Join(dir, "out", "s7.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(md), "p0-t0-0 100/0") || !strings.Contains(string(md), "**FAIL**") {
		t.Errorf("s7.md lacks the uplink shares or the failed verdicts:\n%s", md)
	}
}
