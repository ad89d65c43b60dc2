package daemon

import (
	"fmt"
	"reflect"
	"testing"

	"github.com/softmrc/softmrc/internal/mrc"
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
