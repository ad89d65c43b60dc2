package daemon

import (
	"fmt"
	"sync/atomic"
	"time"

	"github.com/softmrc/softmrc/internal/mrc"
	"github.com/softmrc/softmrc/internal/telemetry"
	"github.com/softmrc/softmrc/internal/wire"
	"github.com/softmrc/softmrc/nic/service"
	"github.com/softmrc/softmrc/nic/verbs/vproto"
	"github.com/softmrc/softmrc/nic/xsk"
)

// Telemetry: the loop copies the counters the engine and the ports already
// keep into a tick at each subscriber's interval (no lock, no allocation on
// the loop once warm), and an encoder goroutine turns the tick into JSON
// Lines and hands it to the subscribers' sessions. With no subscriber the
// loop pays one comparison per turn. docs/telemetry.md.

var _ service.Watcher = (*Daemon)(nil)

// teleState is the daemon's telemetry state.
type teleState struct {
	// Loop only.
	subs []*teleSub
	next mrc.Time // earliest due time over subs; Never without subscribers
	snap mrc.QPSnapshot
	free chan *teleTick // ticks the encoder has finished with
	work chan *teleTick // ticks for the encoder

	// Counters.
	ticks, skipped, dropped, missed atomic.Uint64
}

type teleSub struct {
	owner uint32
	sched telemetry.Schedule
	push  func([]byte) bool
}

// teleTick is one sampling instant's copy of the counters.
type teleTick struct {
	t     int64 // CLOCK_MONOTONIC
	qps   []teleQP
	ports []telePort
	to    []func([]byte) bool // subscribers due
	final bool                // one QP's last sample (teleFinal)
}

type teleQP struct {
	qpn            wire.QPN
	state          mrc.QPState
	srtt           mrc.Time
	cwnd, inflight int
	cs             mrc.QPCounters
	ecn, trims     uint64
	evs            [wire.MaxPlanes][len(telemetry.EVStates)]uint16
}

type telePort struct {
	up bool
	st xsk.Stats
}

// teleTicks is the number of ticks in flight between the loop and the
// encoder; when all are taken (the encoder is behind) the loop skips the
// instant and counts it.
const teleTicks = 4

func (t *teleState) init() {
	t.next = mrc.Never
}

// Watch subscribes owner (service.Watcher).
func (d *Daemon) Watch(owner uint32, interval time.Duration, push func([]byte) bool) (vproto.WatchInfo, func(), error) {
	iv, err := telemetry.CheckInterval(interval)
	if err != nil {
		return vproto.WatchInfo{}, nil, err
	}
	if e := d.exec(func() {
		t := &d.tele
		if t.free == nil {
			t.free, t.work = make(chan *teleTick, teleTicks), make(chan *teleTick, teleTicks)
			for range teleTicks {
				t.free <- &teleTick{}
			}
			go d.teleEncoder()
		}
		d.teleRemove(owner)
		t.subs = append(t.subs, &teleSub{owner: owner, sched: telemetry.NewSchedule(int64(d.now()), int64(iv)), push: push})
		d.teleNext()
	}); e != nil {
		return vproto.WatchInfo{}, nil, e
	}
	stop := func() { d.enqueue(func() { d.teleRemove(owner); d.teleNext() }) }
	return vproto.WatchInfo{IntervalNS: int64(iv), Source: d.teleSource()}, stop, nil
}

func (d *Daemon) teleSource() string {
	if d.cfg.Host != "" {
		return d.cfg.Host
	}
	return "nic"
}

// teleRemove drops owner's subscription; loop only.
func (d *Daemon) teleRemove(owner uint32) {
	t := &d.tele
	for i, s := range t.subs {
		if s.owner == owner {
			t.subs = append(t.subs[:i], t.subs[i+1:]...)
			return
		}
	}
}

// teleNext recomputes the next due time; loop only.
func (d *Daemon) teleNext() {
	t := &d.tele
	t.next = mrc.Never
	for _, s := range t.subs {
		if n := mrc.Time(s.sched.Next()); n < t.next {
			t.next = n
		}
	}
}

// teleSample copies the counters for the subscribers due at now; loop only.
func (d *Daemon) teleSample(now mrc.Time) {
	t := &d.tele
	var k *teleTick
	select {
	case k = <-t.free:
		k.to = k.to[:0]
	default:
	}
	for _, s := range t.subs {
		m := s.sched.Missed
		if s.sched.Due(int64(now)) && k != nil {
			k.to = append(k.to, s.push)
		}
		t.missed.Add(s.sched.Missed - m)
	}
	d.teleNext()
	if k == nil {
		t.skipped.Add(1)
		return
	}
	d.teleFill(k, nil)
	t.ticks.Add(1)
	t.work <- k // never blocks: at most teleTicks ticks exist
}

// teleFinal sends every subscriber the last sample of qpn, marked final,
// just before the QP is destroyed: a series ends with the QP's totals even
// when the QP goes away between two instants. Loop only.
func (d *Daemon) teleFinal(qpn wire.QPN) {
	t := &d.tele
	if len(t.subs) == 0 {
		return
	}
	var k *teleTick
	select {
	case k = <-t.free:
	case <-time.After(50 * time.Millisecond): // the encoder never holds a tick longer than one encoding
		t.skipped.Add(1)
		return
	}
	k.to = k.to[:0]
	for _, s := range t.subs {
		k.to = append(k.to, s.push)
	}
	d.teleFill(k, &qpn)
	t.work <- k
}

// teleFill copies the counters of every QP (only *only, when set, marked
// final) and, for a regular tick, of every port into k; loop only.
func (d *Daemon) teleFill(k *teleTick, only *wire.QPN) {
	t := &d.tele
	k.t = telemetry.Now()
	k.qps, k.ports = k.qps[:0], k.ports[:0]
	k.final = only != nil
	for qpn := range d.qps {
		if only != nil && qpn != *only {
			continue
		}
		s := &t.snap
		s.EVs = s.EVs[:0]
		if d.eng.Snapshot(qpn, s) != nil {
			continue
		}
		k.qps = append(k.qps, teleQP{})
		q := &k.qps[len(k.qps)-1]
		q.qpn, q.state, q.srtt, q.cwnd, q.inflight, q.cs = qpn, s.State, s.SRTT, s.Cwnd, s.InFlight, s.Counters
		for i := range s.EVs {
			e := &s.EVs[i]
			q.ecn += e.ECN
			q.trims += e.Trims + e.TrimsLastHop
			if e.Active && int(e.Plane) < wire.MaxPlanes && int(e.State) < len(telemetry.EVStates) {
				q.evs[e.Plane][e.State]++
			}
		}
	}
	if only != nil {
		return
	}
	for i, p := range d.ports {
		k.ports = append(k.ports, telePort{up: d.portUp[i].Load(), st: p.Stats()})
	}
}

// teleEncoder encodes ticks and hands them to the subscribers until the
// loop stops.
func (d *Daemon) teleEncoder() {
	t := &d.tele
	src := d.teleSource()
	planes := len(d.cfg.Ports)
	evKeys := make([][len(telemetry.EVStates)]string, planes)
	qpKeys := []string{telemetry.KeyAckedBytes, telemetry.KeyTxBytes, telemetry.KeyRtxBytes, telemetry.KeyTxPackets,
		telemetry.KeyRtxPackets, telemetry.KeyRxBytes, telemetry.KeyLosses, telemetry.KeyTimeouts, telemetry.KeyNACKs,
		telemetry.KeyTrims, telemetry.KeyECNEchoes, telemetry.KeyNoEVStalls, telemetry.KeyMsgsSent, telemetry.KeyCwnd,
		telemetry.KeyInFlight, telemetry.KeySRTT, telemetry.KeyQPState}
	for p := range evKeys {
		for st, name := range telemetry.EVStates {
			evKeys[p][st] = telemetry.EVStateKey(p, name)
			qpKeys = append(qpKeys, evKeys[p][st])
		}
	}
	qpRec := telemetry.NewRecord(qpKeys...)
	finalRec := telemetry.NewRecord(append(qpKeys, telemetry.KeyFinal)...)
	portRec := telemetry.NewRecord(telemetry.KeyTxBytes, telemetry.KeyRxBytes, telemetry.KeyTxPackets,
		telemetry.KeyRxPackets, telemetry.KeyPlane, telemetry.KeyCarrier)
	portNames := make([]string, planes)
	for i, p := range d.cfg.Ports {
		portNames[i] = p.PortName()
	}
	const maxBody = vproto.MaxMessage - vproto.HeaderLen
	var line []byte
	var idBuf []byte
	for {
		var k *teleTick
		select {
		case <-d.stopped:
			return
		case k = <-t.work:
		}
		var bodies [][]byte
		body := make([]byte, 0, 4096)
		add := func() {
			if len(body)+len(line) > maxBody {
				bodies = append(bodies, body)
				body = make([]byte, 0, 4096)
			}
			body = append(body, line...)
		}
		for i := range k.qps {
			q := &k.qps[i]
			c := &q.cs
			r := qpRec
			if k.final {
				r = finalRec
				r.Set(telemetry.KeyFinal, 1)
			}
			r.Set(telemetry.KeyAckedBytes, float64(c.AckedBytes))
			r.Set(telemetry.KeyTxBytes, float64(c.TxBytes))
			r.Set(telemetry.KeyRtxBytes, float64(c.RtxBytes))
			r.Set(telemetry.KeyTxPackets, float64(c.TxData))
			r.Set(telemetry.KeyRtxPackets, float64(c.TxRtx))
			r.Set(telemetry.KeyRxBytes, float64(c.RxBytes))
			r.Set(telemetry.KeyLosses, float64(c.Losses))
			r.Set(telemetry.KeyTimeouts, float64(c.Timeouts))
			r.Set(telemetry.KeyNACKs, float64(c.RxNACK))
			r.Set(telemetry.KeyTrims, float64(q.trims))
			r.Set(telemetry.KeyECNEchoes, float64(q.ecn))
			r.Set(telemetry.KeyNoEVStalls, float64(c.NoEVStalls))
			r.Set(telemetry.KeyMsgsSent, float64(c.MsgsSent))
			r.Set(telemetry.KeyCwnd, float64(q.cwnd))
			r.Set(telemetry.KeyInFlight, float64(q.inflight))
			r.Set(telemetry.KeySRTT, float64(q.srtt))
			r.Set(telemetry.KeyQPState, float64(q.state))
			for p := range planes {
				for st := range telemetry.EVStates {
					r.Set(evKeys[p][st], float64(q.evs[p][st]))
				}
			}
			idBuf = fmt.Appendf(idBuf[:0], "%#06x", uint32(q.qpn))
			line = r.Append(line[:0], k.t, src, telemetry.KindQP, string(idBuf))
			add()
		}
		for i := range k.ports {
			p := &k.ports[i]
			r := portRec
			r.Set(telemetry.KeyTxBytes, float64(p.st.TxBytes))
			r.Set(telemetry.KeyRxBytes, float64(p.st.RxBytes))
			r.Set(telemetry.KeyTxPackets, float64(p.st.TxFrames))
			r.Set(telemetry.KeyRxPackets, float64(p.st.RxFrames))
			r.Set(telemetry.KeyPlane, float64(d.cfg.Ports[i].Plane))
			carrier := 0.0
			if p.up {
				carrier = 1
			}
			r.Set(telemetry.KeyCarrier, carrier)
			line = r.Append(line[:0], k.t, src, telemetry.KindNICPort, portNames[i])
			add()
		}
		if len(body) > 0 {
			bodies = append(bodies, body)
		}
		for _, push := range k.to {
			for _, b := range bodies {
				if !push(b) {
					t.dropped.Add(1)
				}
			}
		}
		t.free <- k
	}
}
