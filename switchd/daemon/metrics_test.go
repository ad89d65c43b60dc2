package daemon

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/softmrc/softmrc/internal/tagmetrics"
	"github.com/softmrc/softmrc/switchd/ctl"
)

// portCollector exposes one port's metrics as the daemon's collector does.
type portCollector ctl.PortStats

func (c portCollector) Describe(ch chan<- *prometheus.Desc) { collector{}.Describe(ch) }
func (c portCollector) Collect(ch chan<- prometheus.Metric) {
	collectPort(ch, "tsw", ctl.PortStats(c))
}

// Every counter of ctl.Counters is tagged (a counter without a tag fails
// here, not silently in production).
func TestCountersTagged(t *testing.T) {
	for _, err := range tagmetrics.Check(&ctl.Counters{}) {
		t.Error(err)
	}
}

// Every field of ctl.Counters (and every drop reason in ctl.Drops) is a
// series of the port's metrics with its own value. The expected names are
// made here from the fields' JSON names (what mrc-switchctl shows), not
// from the metric tags the exposition uses, so a counter added to the
// struct appears with no edit to the daemon, and a tag that disagrees with
// the JSON name fails. The fixed list pins the names dashboards use.
func TestPortMetricsFromCounters(t *testing.T) {
	p := ctl.PortStats{Name: "u0", Interface: "eth-u0", Role: "fabric"}
	want := map[string]float64{}
	n := uint64(100)
	cv := reflect.ValueOf(&p.Counters).Elem()
	for i := 0; i < cv.NumField(); i++ {
		name := jsonName(cv.Type().Field(i))
		f := cv.Field(i)
		if f.Kind() == reflect.Struct { // the drop reasons
			for j := 0; j < f.NumField(); j++ {
				n++
				f.Field(j).SetUint(n)
				want[fmt.Sprintf("softmrc_switch_dropped_total{reason=%s}", jsonName(f.Type().Field(j)))] = float64(n)
			}
			continue
		}
		n++
		f.SetUint(n)
		want["softmrc_switch_"+name+"_total"] = float64(n)
	}
	reg := prometheus.NewPedanticRegistry() // Describe must match Collect
	reg.MustRegister(portCollector(p))
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			if m.GetCounter() == nil {
				continue
			}
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["switch"] != "tsw" || labels["port"] != "u0" || labels["interface"] != "eth-u0" || labels["role"] != "fabric" {
				t.Errorf("%s has port labels %v, want switch tsw, port u0, interface eth-u0, role fabric", mf.GetName(), labels)
			}
			key := mf.GetName()
			if r, ok := labels["reason"]; ok {
				key += "{reason=" + r + "}"
			}
			got[key] = m.GetCounter().GetValue()
		}
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("port counters\n got %v\nwant %v", got, want)
	}
	for _, name := range []string{
		"softmrc_switch_rx_packets_total", "softmrc_switch_rx_bytes_total", "softmrc_switch_tx_packets_total",
		"softmrc_switch_tx_bytes_total", "softmrc_switch_forwarded_total", "softmrc_switch_pass_total",
		"softmrc_switch_ecn_marked_total", "softmrc_switch_trimmed_total", "softmrc_switch_dropped_total{reason=no_route}",
	} {
		if _, ok := got[name]; !ok {
			t.Errorf("metric %s is gone: dashboards and docs/switchd.md name it", name)
		}
	}
	var sum float64
	for k, v := range got {
		if strings.HasPrefix(k, "softmrc_switch_dropped_total") {
			sum += v
		}
	}
	if sum != float64(p.Counters.Drops.Total()) {
		t.Errorf("reasons sum to %g, Drops.Total() = %d: Total misses a reason", sum, p.Counters.Drops.Total())
	}
}

func jsonName(f reflect.StructField) string {
	name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
	return name
}
