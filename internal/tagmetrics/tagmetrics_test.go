package tagmetrics

import (
	"fmt"
	"sort"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"
)

type reasons struct {
	NoRoute uint64 `metric:"no_route"`
	Fault   uint64 `metric:"fault"`
}

type counters struct {
	Rx      atomic.Uint64 `metric:"rx" help:"Frames received."`
	tx      uint64        `metric:"tx" help:"Frames sent."`
	Drops   reasons       `metric:"dropped" help:"Frames dropped, by reason." label:"reason"`
	skipped uint64        `metric:"-"`
	notes   string
}

// collector exposes one counters struct with a port label, as the daemons do.
type collector struct{ c *counters }

var portLabels = []string{"port"}

func (c collector) Describe(ch chan<- *prometheus.Desc) {
	Describe(ch, "test_", Fields(c.c), portLabels)
}
func (c collector) Collect(ch chan<- prometheus.Metric) {
	Collect(ch, "test_", Fields(c.c), portLabels, "p0")
}

// The exposition is generated from the tags: every tagged field is a
// series with its help text, a labelled struct is one metric with a series
// per inner field, untagged and "-" fields are left out.
func TestExpositionFromTags(t *testing.T) {
	c := &counters{tx: 2, skipped: 99, notes: "x"}
	c.Rx.Store(1)
	c.Drops = reasons{NoRoute: 3, Fault: 4}
	reg := prometheus.NewPedanticRegistry() // checks Describe against Collect
	reg.MustRegister(collector{c})
	want := `# HELP test_dropped_total Frames dropped, by reason.
# TYPE test_dropped_total counter
test_dropped_total{port="p0",reason="fault"} 4
test_dropped_total{port="p0",reason="no_route"} 3
# HELP test_rx_total Frames received.
# TYPE test_rx_total counter
test_rx_total{port="p0"} 1
# HELP test_tx_total Frames sent.
# TYPE test_tx_total counter
test_tx_total{port="p0"} 2
`
	if got := exposition(t, reg); got != want {
		t.Errorf("exposition:\n%s\nwant:\n%s", got, want)
	}
	got := Map(Fields(c))
	wantMap := map[string]uint64{"rx": 1, "tx": 2, "dropped.no_route": 3, "dropped.fault": 4}
	if fmt.Sprint(got) != fmt.Sprint(wantMap) {
		t.Errorf("Map = %v, want %v", got, wantMap)
	}
}

// Fields reads the live value at each call of Load, not a copy taken when
// the list was made: a daemon builds the list once per scrape.
func TestFieldsLoadLiveValues(t *testing.T) {
	var c counters
	fs := Fields(&c)
	c.Rx.Add(5)
	c.tx = 6
	c.Drops.Fault = 7
	if got := Map(fs); got["rx"] != 5 || got["tx"] != 6 || got["dropped.fault"] != 7 {
		t.Errorf("Map after the writes = %v, want rx 5, tx 6, dropped.fault 7", got)
	}
}

func TestFieldsPanicsOnWrongType(t *testing.T) {
	for _, tc := range []struct {
		name string
		ptr  any
		want string
	}{
		{"int counter", &struct {
			n int `metric:"n" help:"x"`
		}{}, "want uint64 or atomic.Uint64"},
		{"struct without label", &struct {
			r reasons `metric:"r" help:"x"`
		}{}, "needs a label tag"},
		{"not a pointer", counters{}, "want a pointer to a struct"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			defer func() {
				if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), tc.want) {
					t.Errorf("recover() = %v, want a panic containing %q", r, tc.want)
				}
			}()
			Fields(tc.ptr)
		})
	}
}

func TestCheck(t *testing.T) {
	type other struct {
		Rx uint64 `metric:"rx" help:"again"`
	}
	for _, tc := range []struct {
		name string
		ptrs []any
		want []string // substrings, one per error, in order
	}{
		{"good", []any{&counters{}}, nil},
		{"untagged counter", []any{&struct {
			a uint64 `metric:"a" help:"x"`
			b atomic.Uint64
		}{}}, []string{".b is a counter without a metric tag"}},
		{"not snake_case", []any{&struct {
			a uint64 `metric:"RxFrames" help:"x"`
		}{}}, []string{`"RxFrames" is not snake_case`}},
		{"no help", []any{&struct {
			a uint64 `metric:"a"`
		}{}}, []string{`"a" has no help tag`}},
		{"twice over two structs", []any{&counters{}, &other{}}, []string{`"rx" named twice`}},
		{"untagged inner reason", []any{&struct {
			d struct {
				a uint64 `metric:"a"`
				b uint64
			} `metric:"d" help:"x" label:"why"`
		}{}}, []string{".b is a counter without a metric tag"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			errs := Check(tc.ptrs...)
			var got []string
			for _, e := range errs {
				got = append(got, e.Error())
			}
			sort.Strings(got)
			if len(got) != len(tc.want) {
				t.Fatalf("Check = %q, want %d errors like %q", got, len(tc.want), tc.want)
			}
			for i, w := range tc.want {
				if !strings.Contains(got[i], w) {
					t.Errorf("error %q does not say %q", got[i], w)
				}
			}
		})
	}
}

// exposition is reg's Prometheus text format, families sorted by name.
func exposition(t *testing.T, reg *prometheus.Registry) string {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, mf := range mfs {
		if _, err := expfmt.MetricFamilyToText(&b, mf); err != nil {
			t.Fatal(err)
		}
	}
	return b.String()
}
