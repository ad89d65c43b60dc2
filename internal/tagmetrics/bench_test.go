package tagmetrics

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// The price of generating the metrics from the tags at each scrape, next
// to the hand list of descriptors it replaced (the same series, the same
// labels): a scrape of one switch port. Not a hot path (one scrape per
// Prometheus interval), measured so that a change that makes it costly
// shows.
//
//	go test -run '^$' -bench Collect -benchmem ./internal/tagmetrics
func BenchmarkCollect(b *testing.B) {
	c := &counters{tx: 2, Drops: reasons{NoRoute: 3, Fault: 4}}
	c.Rx.Store(1)
	labels := []string{"switch", "port", "interface", "role"}
	lv := []string{"tsw", "u0", "eth-u0", "fabric"}
	drain := func(ch chan prometheus.Metric) {
		for range ch {
		}
	}
	b.Run("tags", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			ch := make(chan prometheus.Metric, 8)
			Collect(ch, "test_", Fields(c), labels, lv...)
			close(ch)
			drain(ch)
		}
	})
	b.Run("hand-list", func(b *testing.B) {
		rx := prometheus.NewDesc("test_rx_total", "Frames received.", labels, nil)
		tx := prometheus.NewDesc("test_tx_total", "Frames sent.", labels, nil)
		dropped := prometheus.NewDesc("test_dropped_total", "Frames dropped, by reason.", append(labels[:4:4], "reason"), nil)
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			ch := make(chan prometheus.Metric, 8)
			ch <- prometheus.MustNewConstMetric(rx, prometheus.CounterValue, float64(c.Rx.Load()), lv...)
			ch <- prometheus.MustNewConstMetric(tx, prometheus.CounterValue, float64(c.tx), lv...)
			ch <- prometheus.MustNewConstMetric(dropped, prometheus.CounterValue, float64(c.Drops.NoRoute), append(lv[:4:4], "no_route")...)
			ch <- prometheus.MustNewConstMetric(dropped, prometheus.CounterValue, float64(c.Drops.Fault), append(lv[:4:4], "fault")...)
			close(ch)
			drain(ch)
		}
	})
}
