package daemon

import (
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/softmrc/softmrc/internal/mrc"
	"github.com/softmrc/softmrc/internal/telemetry"
	"github.com/softmrc/softmrc/internal/wire"
	"github.com/softmrc/softmrc/nic/service"
	"github.com/softmrc/softmrc/nic/vproto"
	"github.com/softmrc/softmrc/nic/xsk"
)

// Telemetry. At each subscriber's interval the loop copies the counters the
// engine and the ports already keep into a tick (no lock; no allocation
// once warm) and queues it; an encoder goroutine turns ticks into JSON
// Lines and hands them to the subscribers' sessions. The loop wakes the
// encoder only every teleFlush (and for a QP's final sample): at a 1 ms
// interval that is one wakeup and one socket message per 10 samples
// instead of one each, which on a 2-core machine is what keeps the
// sampler from taking CPU from the data path (docs/telemetry.md has the
// measurement). With no subscriber the loop pays one comparison per turn.

var _ service.Watcher = (*Daemon)(nil)

// teleFlush is how often the loop hands queued ticks to the encoder:
// samples keep their interval's resolution and reach the subscriber at
// most this late.
const teleFlush = 10 * mrc.Millisecond

// teleTicks bounds the ticks between the loop and the encoder (a flush
// period's worth at 1 ms, twice over); when none is free (the encoder is
// behind) the loop skips the instant and counts it.
const teleTicks = 32

// teleState is the daemon's telemetry state.
type teleState struct {
	// Loop only.
	subs      []*teleSub
	next      mrc.Time // earliest due time over subs; Never without subscribers
	lastFlush mrc.Time
	queued    int // ticks sent since the last flush
	snap      mrc.QPSnapshot

	// finals are QPs' last samples (teleFinal), for the encoder after the
	// queued ticks.
	finalMu sync.Mutex
	finals  []*teleTick

	free  chan *teleTick // ticks the encoder has finished with
	work  chan *teleTick // ticks for the encoder, in order
	flush chan struct{}  // wakes the encoder (cap 1)

	// Counters (metrics.go exports them by their tags).
	ticks   atomic.Uint64 `metric:"telemetry_ticks" help:"Telemetry samples sent."`
	skipped atomic.Uint64 `metric:"telemetry_skipped" help:"Telemetry samples skipped: no free buffer, the encoder was behind."`
	dropped atomic.Uint64 `metric:"telemetry_dropped" help:"Telemetry messages a subscriber could not take (its queue full)."`
	missed  atomic.Uint64 `metric:"telemetry_missed" help:"Telemetry sample times passed without a sample."`
}

type teleSub struct {
	owner uint32
	admin bool // sees every QP; else only owner's
	sched telemetry.Schedule
	push  func(body []byte, wait bool) bool // set once; the encoder calls it
}

// teleTick is one sampling instant's copy of the counters.
type teleTick struct {
	t     int64 // CLOCK_MONOTONIC
	qps   []teleQP
	ports []telePort
	to    []*teleSub // subscribers due
	final bool       // one QP's last sample (teleFinal)
}

// teleQP is what a sample shows of a QP: a copy of the counters the
// samples need (not the whole QPCounters, whose per-reason NACK arrays are
// 4 KiB).
type teleQP struct {
	qpn                             wire.QPN
	owner                           uint32
	state                           mrc.QPState
	srtt                            mrc.Time
	cwnd, inflight                  int
	acked, tx, rtx, txPkts, rtxPkts uint64
	rx, losses, timeouts, nacks     uint64
	noEV, msgs, ecn, trims          uint64
	inflightAtBad                   uint64
	evs                             [wire.MaxPlanes][len(telemetry.EVStates)]uint16
	more                            [maxQPCounterFields]uint64 // every uint64 QPCounters field (qpCounterFields)
}

type telePort struct {
	up bool
	st xsk.Stats
}

func (t *teleState) init() {
	t.next = mrc.Never
}

// Watch subscribes the caller's session (service.Watcher).
func (d *Daemon) Watch(caller service.Caller, interval time.Duration, push func(body []byte, wait bool) bool) (vproto.WatchInfo, func(), error) {
	owner := caller.Session
	iv, err := telemetry.CheckInterval(interval)
	if err != nil {
		return vproto.WatchInfo{}, nil, err
	}
	if e := d.exec(func() {
		t := &d.tele
		if t.free == nil {
			t.free, t.work, t.flush = make(chan *teleTick, teleTicks), make(chan *teleTick, teleTicks), make(chan struct{}, 1)
			for range teleTicks {
				t.free <- &teleTick{}
			}
			go d.teleEncoder()
		}
		d.teleRemove(owner)
		t.subs = append(t.subs, &teleSub{owner: owner, admin: caller.Admin, sched: telemetry.NewSchedule(int64(d.now()), int64(iv)), push: push})
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
			k.to = append(k.to, s)
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
	d.teleQueue(k, now, false)
}

// teleQueue hands k to the encoder (never blocks: at most teleTicks ticks
// exist) and wakes it when a flush is due; loop only.
func (d *Daemon) teleQueue(k *teleTick, now mrc.Time, urgent bool) {
	t := &d.tele
	t.work <- k
	t.queued++
	if urgent || now-t.lastFlush >= teleFlush || t.queued >= teleTicks/2 {
		t.lastFlush, t.queued = now, 0
		select {
		case t.flush <- struct{}{}:
		default:
		}
	}
}

// teleFinal sends every subscriber the last sample of qpn, marked final,
// just before the QP is destroyed: a series ends with the QP's totals even
// when the QP goes away between two instants. Its tick is allocated, not
// taken from the pool, so that it is never skipped (destroying a QP is
// rare; the loop must not wait for the encoder). Loop only.
func (d *Daemon) teleFinal(qpn wire.QPN) {
	t := &d.tele
	if len(t.subs) == 0 {
		return
	}
	k := &teleTick{to: slices.Clone(t.subs)}
	d.teleFill(k, &qpn)
	t.finalMu.Lock()
	t.finals = append(t.finals, k)
	t.finalMu.Unlock()
	select {
	case t.flush <- struct{}{}:
	default:
	}
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
		c := &s.Counters
		k.qps = append(k.qps, teleQP{qpn: qpn, owner: d.qps[qpn].owner, state: s.State, srtt: s.SRTT, cwnd: s.Cwnd, inflight: s.InFlight,
			acked: c.AckedBytes, tx: c.TxBytes, rtx: c.RtxBytes, txPkts: c.TxData, rtxPkts: c.TxRtx, rx: c.RxBytes,
			losses: c.Losses, timeouts: c.Timeouts, nacks: c.RxNACK, noEV: c.NoEVStalls, msgs: c.MsgsSent, inflightAtBad: c.InFlightAtBad})
		q := &k.qps[len(k.qps)-1]
		copyQPCounters(&q.more, c)
		for i := range s.EVs {
			e := &s.EVs[i]
			q.ecn += e.ECN
			q.trims += e.Trims + e.TrimsLastHop
			if e.Active && int(e.Plane) < wire.MaxPlanes && int(e.State) < len(telemetry.EVStates) {
				q.evs[e.Plane][e.State]++
			}
		}
	}
	if only != nil || d.shard > 0 {
		return // with engine threads the front samples the ports for all
	}
	for i := range d.ports {
		var st xsk.Stats
		for _, t := range d.threads() {
			st = addStats(st, t.ports[i].Stats())
		}
		k.ports = append(k.ports, telePort{up: d.portUp[i].Load(), st: st})
	}
}

// teleEncoder encodes the queued ticks each time the loop flushes and
// hands every subscriber one message body (more past MaxMessage) with its
// samples, until the loop stops.
func (d *Daemon) teleEncoder() {
	t := &d.tele
	src := d.teleSource()
	planes := len(d.cfg.Ports)
	evKeys := make([][len(telemetry.EVStates)]string, planes)
	qpKeys := []string{telemetry.KeyAckedBytes, telemetry.KeyTxBytes, telemetry.KeyRtxBytes, telemetry.KeyTxPackets,
		telemetry.KeyRtxPackets, telemetry.KeyRxBytes, telemetry.KeyLosses, telemetry.KeyTimeouts, telemetry.KeyNACKs,
		telemetry.KeyTrims, telemetry.KeyECNEchoes, telemetry.KeyNoEVStalls, telemetry.KeyInFlightAtBad, telemetry.KeyMsgsSent, telemetry.KeyCwnd,
		telemetry.KeyInFlight, telemetry.KeySRTT, telemetry.KeyQPState}
	for p := range evKeys {
		for st, name := range telemetry.EVStates {
			evKeys[p][st] = telemetry.EVStateKey(p, name)
			qpKeys = append(qpKeys, evKeys[p][st])
		}
	}
	// Every other QP counter, by its snake_case name (qpcounters.go);
	// the ones the keys above already carry are not repeated.
	var moreIdx []int
	for i, f := range qpCounterFields {
		if !slices.Contains(qpKeys, f.key) && f.key != "in_flight_at_bad" {
			moreIdx = append(moreIdx, i)
			qpKeys = append(qpKeys, f.key)
		}
	}
	qpRec := telemetry.NewRecord(qpKeys...)
	finalRec := telemetry.NewRecord(append(qpKeys, telemetry.KeyFinal)...)
	finalRec.Set(telemetry.KeyFinal, 1)
	portRec := telemetry.NewRecord(telemetry.KeyTxBytes, telemetry.KeyRxBytes, telemetry.KeyTxPackets,
		telemetry.KeyRxPackets, telemetry.KeyPlane, telemetry.KeyCarrier)
	portNames := make([]string, planes)
	for i, p := range d.cfg.Ports {
		portNames[i] = p.PortName()
	}
	const maxBody = vproto.MaxMessage - vproto.HeaderLen
	bodies := map[*teleSub][]byte{}
	var lines, idBuf []byte
	var ends []int      // where each line of lines ends
	var owners []uint32 // the QP owner of each line (0: a port)
	var own []byte      // a non-admin subscriber's lines
	var ownEnds []int
	wait := false // this flush carries a final sample: deliver, do not drop
	send := func(s *teleSub, b []byte) {
		if !s.push(b, wait) {
			t.dropped.Add(1)
		}
	}
	encode := func(k *teleTick) {
		lines, ends, owners = lines[:0], ends[:0], owners[:0]
		for i := range k.qps {
			q := &k.qps[i]
			r := qpRec
			if k.final {
				r = finalRec
			}
			r.Set(telemetry.KeyAckedBytes, float64(q.acked))
			r.Set(telemetry.KeyTxBytes, float64(q.tx))
			r.Set(telemetry.KeyRtxBytes, float64(q.rtx))
			r.Set(telemetry.KeyTxPackets, float64(q.txPkts))
			r.Set(telemetry.KeyRtxPackets, float64(q.rtxPkts))
			r.Set(telemetry.KeyRxBytes, float64(q.rx))
			r.Set(telemetry.KeyLosses, float64(q.losses))
			r.Set(telemetry.KeyTimeouts, float64(q.timeouts))
			r.Set(telemetry.KeyNACKs, float64(q.nacks))
			r.Set(telemetry.KeyTrims, float64(q.trims))
			r.Set(telemetry.KeyECNEchoes, float64(q.ecn))
			r.Set(telemetry.KeyNoEVStalls, float64(q.noEV))
			r.Set(telemetry.KeyInFlightAtBad, float64(q.inflightAtBad))
			r.Set(telemetry.KeyMsgsSent, float64(q.msgs))
			r.Set(telemetry.KeyCwnd, float64(q.cwnd))
			r.Set(telemetry.KeyInFlight, float64(q.inflight))
			r.Set(telemetry.KeySRTT, float64(q.srtt))
			r.Set(telemetry.KeyQPState, float64(q.state))
			for p := range planes {
				for st := range telemetry.EVStates {
					r.Set(evKeys[p][st], float64(q.evs[p][st]))
				}
			}
			for _, i := range moreIdx {
				r.Set(qpCounterFields[i].key, float64(q.more[i]))
			}
			idBuf = fmt.Appendf(idBuf[:0], "%#06x", uint32(q.qpn))
			lines = r.Append(lines, k.t, src, telemetry.KindQP, string(idBuf))
			ends, owners = append(ends, len(lines)), append(owners, q.owner)
		}
		for i := range k.ports {
			p := &k.ports[i]
			portRec.Set(telemetry.KeyTxBytes, float64(p.st.TxBytes))
			portRec.Set(telemetry.KeyRxBytes, float64(p.st.RxBytes))
			portRec.Set(telemetry.KeyTxPackets, float64(p.st.TxFrames))
			portRec.Set(telemetry.KeyRxPackets, float64(p.st.RxFrames))
			portRec.Set(telemetry.KeyPlane, float64(d.cfg.Ports[i].Plane))
			carrier := 0.0
			if p.up {
				carrier = 1
			}
			portRec.Set(telemetry.KeyCarrier, carrier)
			lines = portRec.Append(lines, k.t, src, telemetry.KindNICPort, portNames[i])
			ends, owners = append(ends, len(lines)), append(owners, 0)
		}
		for _, s := range k.to {
			l, e := lines, ends
			if !s.admin {
				// Only the ports and the subscriber's own QPs (mrcctl's rule
				// for other applications' QPs).
				own, ownEnds = own[:0], ownEnds[:0]
				start := 0
				for i, end := range ends {
					if owners[i] == 0 || owners[i] == s.owner {
						own = append(own, lines[start:end]...)
						ownEnds = append(ownEnds, len(own))
					}
					start = end
				}
				l, e = own, ownEnds
			}
			bodies[s] = appendLines(bodies[s], l, e, maxBody, func(b []byte) { send(s, b) })
		}
	}
	for {
		select {
		case <-d.stopped:
			return
		case <-t.flush:
		}
		wait = false
		for more := true; more; {
			select {
			case k := <-t.work:
				encode(k)
				t.free <- k
			default:
				more = false
			}
		}
		t.finalMu.Lock()
		finals := t.finals
		t.finals = nil
		t.finalMu.Unlock()
		wait = len(finals) > 0
		for _, k := range finals {
			encode(k)
		}
		for s, b := range bodies {
			if len(b) > 0 {
				send(s, b)
			}
			delete(bodies, s)
		}
	}
}

// appendLines appends lines (which end at ends) to body; whenever the next
// line would take body past max it hands body to send first and starts a
// new one. A single line longer than max goes alone.
func appendLines(body, lines []byte, ends []int, max int, send func([]byte)) []byte {
	if len(body)+len(lines) <= max {
		return append(body, lines...)
	}
	start := 0
	for _, end := range ends {
		if len(body)+end-start > max && len(body) > 0 {
			send(body)
			body = nil
		}
		body = append(body, lines[start:end]...)
		start = end
	}
	return body
}
