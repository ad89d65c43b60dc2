package daemon

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/softmrc/softmrc/internal/tagmetrics"
	"github.com/softmrc/softmrc/switchd/ctl"
)

// Metric names. Counters are read from the data plane at scrape time, so
// they are exact and survive a daemon restart (the maps are pinned). The
// per-port counters are generated from the tags of ctl.Counters
// (internal/tagmetrics), so the list below holds only what is not a counter
// of that struct.
const prefix = "softmrc_switch_"

var (
	labelsPort = []string{"switch", "port", "interface", "role"}

	descFault     = prometheus.NewDesc(prefix+"port_fault", "1 when a fault of this kind is set on the port.", append(slices.Clone(labelsPort), "fault"), nil)
	descLoss      = prometheus.NewDesc(prefix+"port_loss_probability", "Injected random loss probability.", labelsPort, nil)
	descHang      = prometheus.NewDesc(prefix+"hang", "1 while the data plane is hung by a fault.", []string{"switch"}, nil)
	descReady     = prometheus.NewDesc(prefix+"ready", "1 when the switch is programmed and forwarding.", []string{"switch"}, nil)
	descScrapeErr = prometheus.NewDesc(prefix+"scrape_errors", "1 when the last scrape could not read the data plane.", []string{"switch"}, nil)
)

type collector struct{ d *Daemon }

func (c collector) Describe(ch chan<- *prometheus.Desc) {
	tagmetrics.Describe(ch, prefix, tagmetrics.Fields(&ctl.Counters{}), labelsPort)
	for _, d := range []*prometheus.Desc{descFault, descLoss, descHang, descReady, descScrapeErr} {
		ch <- d
	}
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

func (c collector) Collect(ch chan<- prometheus.Metric) {
	d := c.d
	name := d.cfg.Name
	d.mu.Lock()
	ready, hang := d.ready, false
	if d.plane != nil {
		hang, _ = d.plane.Hang() // a read error shows in scrape_error below
	}
	d.mu.Unlock()
	ch <- prometheus.MustNewConstMetric(descReady, prometheus.GaugeValue, b2f(ready), name)
	ch <- prometheus.MustNewConstMetric(descHang, prometheus.GaugeValue, b2f(hang), name)
	st, err := d.stats()
	ch <- prometheus.MustNewConstMetric(descScrapeErr, prometheus.GaugeValue, b2f(err != nil), name)
	if err != nil {
		return
	}
	for _, p := range st.Ports {
		collectPort(ch, name, p)
	}
}

// collectPort sends the metrics of one port: every tagged counter of
// ctl.Counters, then the fault gauges.
func collectPort(ch chan<- prometheus.Metric, sw string, p ctl.PortStats) {
	lv := []string{sw, p.Name, p.Interface, p.Role}
	tagmetrics.Collect(ch, prefix, tagmetrics.Fields(&p.Counters), labelsPort, lv...)
	f := p.Fault
	for _, fk := range []struct {
		name string
		on   bool
	}{{"down", f.Down}, {"blackhole", f.Blackhole}, {"loss", f.Loss > 0}, {"flap", f.FlapOnNS > 0}} {
		ch <- prometheus.MustNewConstMetric(descFault, prometheus.GaugeValue, b2f(fk.on), append(slices.Clone(lv), fk.name)...)
	}
	ch <- prometheus.MustNewConstMetric(descLoss, prometheus.GaugeValue, f.Loss, lv...)
}

type metricsServer struct {
	addr string
	srv  *http.Server
	ln   net.Listener
}

// startMetrics serves /metrics on addr: host:port over TCP, or an absolute
// path as a unix socket.
func startMetrics(d *Daemon, addr string) (*metricsServer, error) {
	reg := prometheus.NewRegistry()
	if err := reg.Register(collector{d}); err != nil {
		return nil, err
	}
	network := "tcp"
	if strings.HasPrefix(addr, "/") {
		network = "unix"
		if err := os.Remove(addr); err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("remove old metrics socket %s: %w", addr, err)
		}
	}
	ln, err := net.Listen(network, addr)
	if err != nil {
		return nil, fmt.Errorf("metrics: listen on %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorLog: nil}))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(ln)
	return &metricsServer{addr: ln.Addr().String(), srv: srv, ln: ln}, nil
}

func (m *metricsServer) close() { m.srv.Close() }
