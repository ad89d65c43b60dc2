package daemon

import (
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
	for i := 0; i < v.NumField(); i++ {
		v.Field(i).SetUint(uint64(1000 + i)) // distinct values: a swapped label shows
	}
	got := engineMetrics(ec)
	for i := 0; i < v.NumField(); i++ {
		name := v.Type().Field(i).Name
		if got[snakeCase(name)] != uint64(1000+i) {
			t.Errorf("engine counter %s: metric %q = %d, want %d", name, snakeCase(name), got[snakeCase(name)], 1000+i)
		}
	}
	if len(got) != v.NumField() {
		t.Errorf("%d metrics for %d counters", len(got), v.NumField())
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
