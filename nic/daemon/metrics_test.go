package daemon

import (
	"fmt"
	"reflect"
	"testing"

	"github.com/softmrc/softmrc/internal/mrc"
	"github.com/softmrc/softmrc/internal/wire"
)

// Every engine counter is exported, under its snake_case name, with its
// value: the metric list is made from the struct, so a counter added to
// the engine cannot be forgotten here.
func TestEngineMetricsCoverEveryCounter(t *testing.T) {
	var ec mrc.EngineCounters
	v := reflect.ValueOf(&ec).Elem()
	want := map[string]uint64{}
	for i := 0; i < v.NumField(); i++ {
		// Distinct values: a swapped label shows. Per-plane arrays
		// give one label per plane.
		name := snakeCase(v.Type().Field(i).Name)
		if f := v.Field(i); f.Kind() == reflect.Array {
			for k := 0; k < f.Len(); k++ {
				f.Index(k).SetUint(uint64(100000 + 100*i + k))
				want[fmt.Sprintf("%s_plane%d", name, k)] = uint64(100000 + 100*i + k)
			}
			continue
		}
		v.Field(i).SetUint(uint64(1000 + i))
		want[name] = uint64(1000 + i)
	}
	got := engineMetrics(ec)
	for k, w := range want {
		if got[k] != w {
			t.Errorf("engine counter metric %q = %d, want %d", k, got[k], w)
		}
	}
	if len(got) != len(want) {
		t.Errorf("%d metrics for %d counters", len(got), len(want))
	}
}

func TestSnakeCase(t *testing.T) {
	for in, want := range map[string]string{
		"RxFrames": "rx_frames", "RxBadICRC": "rx_bad_icrc", "CQOverflow": "cq_overflow",
		"RxUnknownQP": "rx_unknown_qp", "TxNoBuffer": "tx_no_buffer", "PortStatusStale": "port_status_stale",
	} {
		if got := snakeCase(in); got != want {
			t.Errorf("snakeCase(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestPathMetricsPerPath: the per-EV telemetry is summed per (peer,
// plane, T1): 2 QPs toward h3 with 16 EVs each over 2 planes × 2 T1s
// give 4 series, not 32, with the EVs' counters summed and their states
// counted; another peer gets its own.
func TestPathMetricsPerPath(t *testing.T) {
	m := map[pathKey]*pathStats{}
	qp := func() []mrc.EVSnapshot {
		var evs []mrc.EVSnapshot
		for i := 0; i < 16; i++ {
			plane, t1 := wire.Plane(i%2), uint8(i/2%2)
			e := mrc.EVSnapshot{EV: wire.MakeEV(plane, t1, uint32(i)), Plane: plane, State: mrc.EVGood}
			e.Sent, e.Acked, e.Losses = 10, 9, 1
			if plane == 1 && t1 == 1 {
				e.State = mrc.EVAssumedBad
			}
			evs = append(evs, e)
		}
		return evs
	}
	addPathEVs(m, "h3", qp())
	addPathEVs(m, "h3", qp())
	addPathEVs(m, "h1", qp()[:1])
	if len(m) != 5 {
		t.Fatalf("%d series, want 4 paths toward h3 and 1 toward h1: %v", len(m), m)
	}
	for k, ps := range m {
		n := 8 // 2 QPs × 16 EVs / 4 paths
		if k.peer == "h1" {
			n = 1
		}
		if ps.sent != uint64(10*n) || ps.acked != uint64(9*n) || ps.losses != uint64(n) {
			t.Errorf("%+v: sent %d acked %d losses %d, want %d %d %d", k, ps.sent, ps.acked, ps.losses, 10*n, 9*n, n)
		}
		want := map[string]int{mrc.EVGood.String(): n}
		if k.plane == 1 && k.t1 == 1 {
			want = map[string]int{mrc.EVAssumedBad.String(): n}
		}
		if fmt.Sprint(ps.states) != fmt.Sprint(want) {
			t.Errorf("%+v: states %v, want %v", k, ps.states, want)
		}
	}
}
