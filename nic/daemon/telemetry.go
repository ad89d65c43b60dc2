package daemon

import (
	"fmt"
	"sync/atomic"
	"time"

	"github.com/softmrc/softmrc/internal/mrc"
	"github.com/softmrc/softmrc/internal/telemetry"
	"github.com/softmrc/softmrc/internal/wire"
	"github.com/softmrc/softmrc/nic/service"
	"github.com/softmrc/softmrc/nic/vproto"
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
	default:
	}
	k0 := k
	if k != nil {
		k.to = k.to[:0]
	}
	for _, s := range t.subs {
		m := s.sched.Missed
		if s.sched.Due(int64(now)) && k != nil {
			k.to = append(k.to, s.push)
		}
		t.missed.Add(s.sched.Missed - m)
	}
	d.teleNext()
	if k0 == nil {
		t.skipped.Add(1)
		return
	}
	k.t = telemetry.Now()
	k.qps = k.qps[:0]
	for qpn := range d.qps {
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
	k.ports = k.ports[:0]
	for i, p := range d.ports {
		k.ports = append(k.ports, telePort{up: d.portUp[i].Load(), st: p.Stats()})
	}
	t.ticks.Add(1)
	t.work <- k // never blocks: at most teleTicks ticks exist
}

// teleEncoder encodes ticks and hands them to the subscribers until the
// loop stops.
func (d *Daemon) teleEncoder() {
	t := &d.tele
	src := d.teleSource()
	planes := len(d.cfg.Ports)
	keys := make([][len(telemetry.EVStates)]string, planes)
	for p := range keys {
		for st, name := range telemetry.EVStates {
			keys[p][st] = telemetry.EVStateKey(p, name)
		}
	}
	s := telemetry.Sample{Source: src, Values: map[string]float64{}}
	const maxBody = vproto.MaxMessage - vproto.HeaderLen
	var line []byte
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
			line = telemetry.AppendJSON(line[:0], &s)
			if len(body)+len(line) > maxBody {
				bodies = append(bodies, body)
				body = make([]byte, 0, 4096)
			}
			body = append(body, line...)
		}
		s.T = k.t
		for i := range k.qps {
			q := &k.qps[i]
			c := &q.cs
			clear(s.Values)
			s.Kind, s.ID = telemetry.KindQP, fmt.Sprintf("%#06x", uint32(q.qpn))
			v := s.Values
			v[telemetry.KeyAckedBytes] = float64(c.AckedBytes)
			v[telemetry.KeyTxBytes] = float64(c.TxBytes)
			v[telemetry.KeyRtxBytes] = float64(c.RtxBytes)
			v[telemetry.KeyTxPackets] = float64(c.TxData)
			v[telemetry.KeyRtxPackets] = float64(c.TxRtx)
			v[telemetry.KeyRxBytes] = float64(c.RxBytes)
			v[telemetry.KeyLosses] = float64(c.Losses)
			v[telemetry.KeyTimeouts] = float64(c.Timeouts)
			v[telemetry.KeyNACKs] = float64(c.RxNACK)
			v[telemetry.KeyTrims] = float64(q.trims)
			v[telemetry.KeyECNEchoes] = float64(q.ecn)
			v[telemetry.KeyNoEVStalls] = float64(c.NoEVStalls)
			v[telemetry.KeyMsgsSent] = float64(c.MsgsSent)
			v[telemetry.KeyCwnd] = float64(q.cwnd)
			v[telemetry.KeyInFlight] = float64(q.inflight)
			v[telemetry.KeySRTT] = float64(q.srtt)
			v[telemetry.KeyQPState] = float64(q.state)
			for p := range planes {
				for st := range telemetry.EVStates {
					v[keys[p][st]] = float64(q.evs[p][st])
				}
			}
			add()
		}
		for i := range k.ports {
			p := &k.ports[i]
			clear(s.Values)
			s.Kind, s.ID = telemetry.KindNICPort, d.cfg.Ports[i].PortName()
			v := s.Values
			v[telemetry.KeyTxBytes] = float64(p.st.TxBytes)
			v[telemetry.KeyRxBytes] = float64(p.st.RxBytes)
			v[telemetry.KeyTxPackets] = float64(p.st.TxFrames)
			v[telemetry.KeyRxPackets] = float64(p.st.RxFrames)
			v[telemetry.KeyPlane] = float64(d.cfg.Ports[i].Plane)
			if p.up {
				v[telemetry.KeyCarrier] = 1
			} else {
				v[telemetry.KeyCarrier] = 0
			}
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
