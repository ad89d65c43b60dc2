package daemon

import (
	"fmt"
	"net/http"
	"reflect"
	"slices"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/softmrc/softmrc/internal/mrc"
	"github.com/softmrc/softmrc/internal/tagmetrics"
	"github.com/softmrc/softmrc/internal/wire"
	"github.com/softmrc/softmrc/nic/vproto"
	"github.com/softmrc/softmrc/nic/xsk"
)

// collector exports the daemon's counters. Engine state is read on the loop
// goroutine (exec), bounded by a timeout so a wedged loop cannot hang a
// scrape.
type collector struct{ d *Daemon }

var (
	descPortRx      = prometheus.NewDesc("mrc_port_rx_frames_total", "Frames received on a NIC port.", []string{"port", "plane"}, nil)
	descPortRxBytes = prometheus.NewDesc("mrc_port_rx_bytes_total", "Bytes received on a NIC port.", []string{"port", "plane"}, nil)
	descPortTx      = prometheus.NewDesc("mrc_port_tx_frames_total", "Frames queued for transmission on a NIC port.", []string{"port", "plane"}, nil)
	descPortTxBytes = prometheus.NewDesc("mrc_port_tx_bytes_total", "Bytes queued for transmission on a NIC port.", []string{"port", "plane"}, nil)
	descPortDrop    = prometheus.NewDesc("mrc_port_rx_dropped_total", "Frames the kernel dropped for the AF_XDP socket (ring full, fill ring empty).", []string{"port", "plane"}, nil)
	descPortTxFull  = prometheus.NewDesc("mrc_port_tx_full_total", "Frames the port could not take (ring or pool full).", []string{"port", "plane"}, nil)
	descPortUp      = prometheus.NewDesc("mrc_port_up", "1 when the port has carrier and is up.", []string{"port", "plane"}, nil)
	descEngine      = prometheus.NewDesc("mrc_engine_events_total", "Engine-wide counters.", []string{"counter"}, nil)
	descQPEvents    = prometheus.NewDesc("mrc_qp_events_total", "Every QP counter of the engine, summed over the daemon's QPs (destroyed ones included).", []string{"counter"}, nil)
	descQPs         = prometheus.NewDesc("mrc_qps", "QPs open.", nil, nil)
	descQPTx        = prometheus.NewDesc("mrc_qp_tx_bytes_total", "Payload bytes sent by a QP.", []string{"qpn"}, nil)
	descQPRx        = prometheus.NewDesc("mrc_qp_rx_bytes_total", "Payload bytes received by a QP.", []string{"qpn"}, nil)
	descQPRtx       = prometheus.NewDesc("mrc_qp_retransmits_total", "Data packets retransmitted by a QP.", []string{"qpn"}, nil)
	descQPGoodEVs   = prometheus.NewDesc("mrc_qp_good_evs", "EVs of a QP in state GOOD.", []string{"qpn"}, nil)

	// Per path, not per EV: an EV's series would number QPs × EVs
	// (thousands per host); (peer, plane, T1) is bounded by the fabric.
	pathLabels      = []string{"peer", "plane", "t1"}
	descPathSent    = prometheus.NewDesc("mrc_path_sent_packets_total", "Data packets sent on the EVs of a path (peer, plane, T1 index), summed over QPs and EVs.", pathLabels, nil)
	descPathAcked   = prometheus.NewDesc("mrc_path_acked_packets_total", "Packets acknowledged on the EVs of a path.", pathLabels, nil)
	descPathLosses  = prometheus.NewDesc("mrc_path_losses_total", "Losses detected on the EVs of a path.", pathLabels, nil)
	descPathTimeout = prometheus.NewDesc("mrc_path_timeouts_total", "Retransmission timeouts on the EVs of a path.", pathLabels, nil)
	descPathECN     = prometheus.NewDesc("mrc_path_ecn_total", "ECN-marked packets on the EVs of a path.", pathLabels, nil)
	descPathTrims   = prometheus.NewDesc("mrc_path_trims_total", "Trimmed packets on the EVs of a path.", pathLabels, nil)
	descPathEVs     = prometheus.NewDesc("mrc_path_evs", "EVs of a path in each state, over the QPs toward that peer.", append(slices.Clone(pathLabels), "state"), nil)
)

// pathKey is one physical path toward a peer: plane and T1 index.
type pathKey struct {
	peer      string
	plane, t1 int
}

// pathStats is the sum over the EVs of one path.
type pathStats struct {
	sent, acked, losses, timeouts, ecn, trims uint64
	states                                    map[string]int
}

// addPathEVs adds the EVs of a QP toward peer to m.
func addPathEVs(m map[pathKey]*pathStats, peer string, evs []mrc.EVSnapshot) {
	for _, e := range evs {
		k := pathKey{peer, int(e.Plane), int(e.EV.T1())}
		ps := m[k]
		if ps == nil {
			ps = &pathStats{states: map[string]int{}}
			m[k] = ps
		}
		ps.sent += e.Sent
		ps.acked += e.Acked
		ps.losses += e.Losses
		ps.timeouts += e.Timeouts
		ps.ecn += e.ECN
		ps.trims += e.Trims + e.TrimsLastHop
		ps.states[e.State.String()]++
	}
}

func (c collector) Describe(ch chan<- *prometheus.Desc) { prometheus.DescribeByCollect(c, ch) }

func (c collector) Collect(ch chan<- prometheus.Metric) {
	d := c.d
	counter := func(desc *prometheus.Desc, v uint64, l ...string) {
		ch <- prometheus.MustNewConstMetric(desc, prometheus.CounterValue, float64(v), l...)
	}
	threads := d.threads()
	for i, p := range d.cfg.Ports {
		if i >= len(d.ports) {
			break
		}
		var s xsk.Stats
		for _, t := range threads {
			if i < len(t.ports) {
				s = addStats(s, t.ports[i].Stats())
			}
		}
		l := []string{p.PortName(), strconv.Itoa(p.Plane)}
		counter(descPortRx, s.RxFrames, l...)
		counter(descPortRxBytes, s.RxBytes, l...)
		counter(descPortTx, s.TxFrames, l...)
		counter(descPortTxBytes, s.TxBytes, l...)
		counter(descPortDrop, s.RxDropped+s.RxRingFull+s.FillEmpty, l...)
		counter(descPortTxFull, s.TxFull, l...)
		up := 0.0
		if d.portUp[i].Load() {
			up = 1
		}
		ch <- prometheus.MustNewConstMetric(descPortUp, prometheus.GaugeValue, up, l...)
	}
	d.collectDelay(ch)
	tagmetrics.Collect(ch, daemonPrefix, d.threadFields(), nil)
	type qpRow struct {
		qpn         wire.QPN
		tx, rx, rtx uint64
		good        int
	}
	engine := map[string]uint64{}
	qpTotals := map[string]uint64{}
	var rows []qpRow
	paths := map[pathKey]*pathStats{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		// Each engine thread's state on its own loop, one after the other
		// (the scrape's goroutine owns the sums).
		for _, t := range threads {
			_ = t.exec(func() {
				addCounters(engine, engineMetrics(t.eng.Counters()))
				addCounters(qpTotals, t.qpTotals())
				var s mrc.QPSnapshot
				for _, q := range t.sortedQPs() {
					s.EVs = s.EVs[:0]
					if t.eng.Snapshot(q.qpn, &s) != nil {
						continue
					}
					r := qpRow{qpn: q.qpn, tx: s.Counters.TxBytes, rx: s.Counters.RxBytes, rtx: s.Counters.TxRtx}
					for _, e := range s.EVs {
						if e.State == mrc.EVGood {
							r.good++
						}
					}
					rows = append(rows, r)
					addPathEVs(paths, t.peerName(q), s.EVs)
				}
			})
		}
	}()
	select {
	case <-done:
	case <-time.After(2 * time.Second):
		return
	}
	for k, v := range engine {
		counter(descEngine, v, k)
	}
	for k, v := range qpTotals {
		counter(descQPEvents, v, k)
	}
	ch <- prometheus.MustNewConstMetric(descQPs, prometheus.GaugeValue, float64(len(rows)))
	for _, r := range rows {
		q := r.qpn.String()
		counter(descQPTx, r.tx, q)
		counter(descQPRx, r.rx, q)
		counter(descQPRtx, r.rtx, q)
		ch <- prometheus.MustNewConstMetric(descQPGoodEVs, prometheus.GaugeValue, float64(r.good), q)
	}
	for k, ps := range paths {
		l := []string{k.peer, strconv.Itoa(k.plane), strconv.Itoa(k.t1)}
		counter(descPathSent, ps.sent, l...)
		counter(descPathAcked, ps.acked, l...)
		counter(descPathLosses, ps.losses, l...)
		counter(descPathTimeout, ps.timeouts, l...)
		counter(descPathECN, ps.ecn, l...)
		counter(descPathTrims, ps.trims, l...)
		for st, n := range ps.states {
			ch <- prometheus.MustNewConstMetric(descPathEVs, prometheus.GaugeValue, float64(n), append(slices.Clone(l), st)...)
		}
	}
}

func (d *Daemon) metricsHandler() http.Handler {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collector{d})
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	return mux
}

// engineMetrics is mrc_engine_events_total's counter label -> value: every
// uint64 field of the engine's counters, named in snake_case, so that no
// counter is left out of a hand-kept list; per-plane arrays (TxDataByPlane,
// TxCtrlByPlane) give one label per plane that has counted anything,
// tx_data_by_plane_plane0 and so on.
func engineMetrics(ec mrc.EngineCounters) map[string]uint64 {
	m := vproto.CounterMap(ec)
	out := make(map[string]uint64, len(m))
	for k, v := range m {
		out[snakeCase(k)] = v
	}
	v := reflect.ValueOf(ec)
	for i := 0; i < v.NumField(); i++ {
		f := v.Field(i)
		if f.Kind() != reflect.Array || f.Type().Elem().Kind() != reflect.Uint64 {
			continue
		}
		for k := 0; k < f.Len(); k++ {
			if x := f.Index(k).Uint(); x != 0 {
				out[fmt.Sprintf("%s_plane%d", snakeCase(v.Type().Field(i).Name), k)] = x
			}
		}
	}
	return out
}

// snakeCase turns a Go field name into a metric label: RxBadICRC ->
// rx_bad_icrc, CQOverflow -> cq_overflow.
func snakeCase(s string) string {
	b := make([]byte, 0, len(s)+4)
	for i := 0; i < len(s); i++ {
		c := s[i]
		upper := c >= 'A' && c <= 'Z'
		if upper && i > 0 {
			prevLower := s[i-1] >= 'a' && s[i-1] <= 'z' || s[i-1] >= '0' && s[i-1] <= '9'
			nextLower := i+1 < len(s) && s[i+1] >= 'a' && s[i+1] <= 'z'
			if prevLower || (s[i-1] >= 'A' && s[i-1] <= 'Z' && nextLower) {
				b = append(b, '_')
			}
		}
		if upper {
			c += 'a' - 'A'
		}
		b = append(b, c)
	}
	return string(b)
}

// daemonPrefix names the daemon's own counters: mrc_daemon_<name>_total.
const daemonPrefix = "mrc_daemon_"

// counterSources are the structs whose tagged fields are the daemon's
// counters (`mrcctl counters` "daemon." rows and mrc_daemon_*_total). A
// field tagged metric:"name" help:"..." in any of them is exported
// (internal/tagmetrics); there is no list of names to keep in step.
func (d *Daemon) counterSources() []any {
	srcs := []any{&d.c, &d.oam, &d.tele}
	if d.svc != nil && d.shard == 0 { // the engine threads share the front's
		srcs = append(srcs, d.svc)
	}
	return srcs
}

// counterFields lists the tagged counters of every source.
func (d *Daemon) counterFields() []tagmetrics.Field {
	var out []tagmetrics.Field
	for _, s := range d.counterSources() {
		out = append(out, tagmetrics.Fields(s)...)
	}
	return out
}

// threadFields is counterFields with each value summed over the engine
// threads (the front's own with one thread).
func (d *Daemon) threadFields() []tagmetrics.Field {
	fs := d.counterFields()
	if d.sh == nil {
		return fs
	}
	byKey := map[string][]func() uint64{}
	for _, t := range d.sh.ds {
		for _, f := range t.counterFields() {
			byKey[f.Key()] = append(byKey[f.Key()], f.Load)
		}
	}
	for i := range fs {
		loads := byKey[fs[i].Key()]
		fs[i].Load = func() uint64 {
			var n uint64
			for _, l := range loads {
				n += l()
			}
			return n
		}
	}
	return fs
}

// daemonCounters is counter name -> value over counterFields.
func (d *Daemon) daemonCounters() map[string]uint64 { return tagmetrics.Map(d.counterFields()) }
