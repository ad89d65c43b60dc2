package daemon

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"reflect"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/softmrc/softmrc/switchd/ctl"
)

// Metric names. Counters are read from the data plane at scrape time, so
// they are exact and survive a daemon restart (the maps are pinned).
var (
	labelsPort = []string{"switch", "port", "interface", "role"}

	descRxPackets = prometheus.NewDesc("softmrc_switch_rx_packets_total", "Frames received on the port and seen by the switch program.", labelsPort, nil)
	descRxBytes   = prometheus.NewDesc("softmrc_switch_rx_bytes_total", "Bytes received on the port.", labelsPort, nil)
	descTxPackets = prometheus.NewDesc("softmrc_switch_tx_packets_total", "Frames sent out of the port.", labelsPort, nil)
	descTxBytes   = prometheus.NewDesc("softmrc_switch_tx_bytes_total", "Bytes sent out of the port.", labelsPort, nil)
	descForwarded = prometheus.NewDesc("softmrc_switch_forwarded_total", "Frames forwarded out of the port.", labelsPort, nil)
	descPass      = prometheus.NewDesc("softmrc_switch_pass_total", "Frames received on the port and handed to the kernel.", labelsPort, nil)
	descMarked    = prometheus.NewDesc("softmrc_switch_ecn_marked_total", "Frames CE-marked on the port.", labelsPort, nil)
	descTrimmed   = prometheus.NewDesc("softmrc_switch_trimmed_total", "Frames trimmed on the port.", labelsPort, nil)
	descDropped   = prometheus.NewDesc("softmrc_switch_dropped_total", "Frames dropped, by reason.", append(append([]string{}, labelsPort...), "reason"), nil)
	descFault     = prometheus.NewDesc("softmrc_switch_port_fault", "1 when a fault of this kind is set on the port.", append(append([]string{}, labelsPort...), "fault"), nil)
	descLoss      = prometheus.NewDesc("softmrc_switch_port_loss_probability", "Injected random loss probability.", labelsPort, nil)
	descHang      = prometheus.NewDesc("softmrc_switch_hang", "1 while the data plane is hung by a fault.", []string{"switch"}, nil)
	descReady     = prometheus.NewDesc("softmrc_switch_ready", "1 when the switch is programmed and forwarding.", []string{"switch"}, nil)
	descScrapeErr = prometheus.NewDesc("softmrc_switch_scrape_errors", "1 when the last scrape could not read the data plane.", []string{"switch"}, nil)
)

type collector struct{ d *Daemon }

func (c collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descRxPackets, descRxBytes, descTxPackets, descTxBytes, descForwarded, descPass, descMarked, descTrimmed, descDropped, descFault, descLoss, descHang, descReady, descScrapeErr} {
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
		lv := []string{name, p.Name, p.Interface, p.Role}
		k := p.Counters
		counter := func(desc *prometheus.Desc, v uint64, extra ...string) {
			ch <- prometheus.MustNewConstMetric(desc, prometheus.CounterValue, float64(v), append(append([]string{}, lv...), extra...)...)
		}
		counter(descRxPackets, k.RxPackets)
		counter(descRxBytes, k.RxBytes)
		counter(descTxPackets, k.TxPackets)
		counter(descTxBytes, k.TxBytes)
		counter(descForwarded, k.Forwarded)
		counter(descPass, k.Pass)
		counter(descMarked, k.ECNMarked)
		counter(descTrimmed, k.Trimmed)
		for _, r := range dropReasons(k.Drops) {
			counter(descDropped, r.v, r.name)
		}
		f := p.Fault
		for _, fk := range []struct {
			name string
			on   bool
		}{{"down", f.Down}, {"blackhole", f.Blackhole}, {"loss", f.Loss > 0}, {"flap", f.FlapOnNS > 0}} {
			ch <- prometheus.MustNewConstMetric(descFault, prometheus.GaugeValue, b2f(fk.on), append(append([]string{}, lv...), fk.name)...)
		}
		ch <- prometheus.MustNewConstMetric(descLoss, prometheus.GaugeValue, f.Loss, lv...)
	}
}

type reason struct {
	name string
	v    uint64
}

// dropReasons lists every field of ctl.Drops under its JSON name (the name
// `mrc-switchctl` shows): a reason added to ctl.Drops is exported as
// softmrc_switch_dropped_total{reason=...} with no edit here.
func dropReasons(d ctl.Drops) []reason {
	v := reflect.ValueOf(d)
	t := v.Type()
	out := make([]reason, 0, t.NumField())
	for i := 0; i < t.NumField(); i++ {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		out = append(out, reason{name, v.Field(i).Uint()})
	}
	return out
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
