package daemon

import (
	"fmt"
	"reflect"
	"sync/atomic"
	"testing"
	"unsafe"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/softmrc/softmrc/internal/mrc"
	"github.com/softmrc/softmrc/internal/tagmetrics"
	"github.com/softmrc/softmrc/internal/wire"
	"github.com/softmrc/softmrc/nic/service"
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

// counterSourcesOf is a daemon with every counter source present.
func counterSourcesOf() *Daemon { return &Daemon{svc: &service.Service{}} }

// Every uint64 or atomic.Uint64 field of a counter source is a counter and
// must say so with a metric tag (or metric:"-"), with help text and a
// unique snake_case name: a counter added without a tag fails here, not
// silently in production. (The hand-kept list this replaces had missed
// service.TelemetryDropped.)
func TestCounterSourcesTagEveryCounter(t *testing.T) {
	srcs := counterSourcesOf().counterSources()
	for _, err := range tagmetrics.Check(srcs...) {
		t.Error(err)
	}
	names := tagmetrics.Map(counterSourcesOf().counterFields())
	for _, want := range []string{"loops", "cqes", "oam_sent", "telemetry_ticks", "sessions", "telemetry_sub_dropped"} {
		if _, ok := names[want]; !ok {
			t.Errorf("counter %q not found in the counter sources", want)
		}
	}
}

// Each tagged field of the daemon's sources reaches daemonCounters (what
// `mrcctl counters` prints) with its own value.
func TestDaemonCountersFromTags(t *testing.T) {
	d := counterSourcesOf()
	want := map[string]uint64{}
	n := uint64(1000)
	for _, src := range d.counterSources() {
		v := reflect.ValueOf(src).Elem()
		for i := 0; i < v.NumField(); i++ {
			name, ok := v.Type().Field(i).Tag.Lookup("metric")
			if !ok || name == "-" {
				continue
			}
			n++
			setCounter(v.Field(i), n)
			want[name] = n
		}
	}
	got := d.daemonCounters()
	if len(got) != len(want) {
		t.Errorf("%d daemon counters, want %d: %v", len(got), len(want), got)
	}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("daemon counter %q = %d, want %d", k, got[k], w)
		}
	}
}

// setCounter stores x into an addressable uint64 or atomic.Uint64 field.
func setCounter(f reflect.Value, x uint64) {
	p := unsafe.Pointer(f.UnsafeAddr())
	if f.Type() == atomicUint64 {
		(*atomic.Uint64)(p).Store(x)
		return
	}
	*(*uint64)(p) = x
}

// A counter field added to a struct with tags appears in the Prometheus
// exposition, named and explained by its tags, with no other edit; an
// untagged field does not.
func TestNewCounterFieldIsExported(t *testing.T) {
	var s struct {
		loops   atomic.Uint64 `metric:"test_added" help:"A counter the test adds."`
		loopy   uint64        `metric:"test_added_plain" help:"A loop-only counter the test adds."`
		notMine uint64
	}
	s.loops.Store(7)
	s.loopy = 9
	s.notMine = 11
	reg := prometheus.NewRegistry()
	reg.MustRegister(fieldsCollector(tagmetrics.Fields(&s)))
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, mf := range mfs {
		got[mf.GetName()] = fmt.Sprintf("%s=%g", mf.GetHelp(), mf.GetMetric()[0].GetCounter().GetValue())
	}
	want := map[string]string{
		"mrc_daemon_test_added_total":       "A counter the test adds.=7",
		"mrc_daemon_test_added_plain_total": "A loop-only counter the test adds.=9",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("exposition %v, want %v", got, want)
	}
}

type fieldsCollector []tagmetrics.Field

func (c fieldsCollector) Describe(ch chan<- *prometheus.Desc) { prometheus.DescribeByCollect(c, ch) }
func (c fieldsCollector) Collect(ch chan<- prometheus.Metric) {
	tagmetrics.Collect(ch, daemonPrefix, c, nil)
}

var atomicUint64 = reflect.TypeFor[atomic.Uint64]()
