package daemon

import (
	"errors"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/softmrc/softmrc/internal/mrc"
	"github.com/softmrc/softmrc/internal/tagmetrics"
	"github.com/softmrc/softmrc/nic/config"
	"github.com/softmrc/softmrc/nic/delayline"
	"github.com/softmrc/softmrc/nic/xsk"
)

// delayPort is a port whose wire has a propagation delay (config Port
// delay): frames the engine transmits wait in one delay line before they
// reach the port, frames the port receives wait in another before they
// reach the engine. Both lines copy frames into pools of their own
// (nic/delayline), so no UMEM frame is held, nothing allocates per frame,
// and a full pool drops (counted) rather than blocks.
//
// It wraps the xsk.Port, so the run loop needs no other change than the
// wakeup at the next due frame (delayDeadline): its RecvFunc, called every
// loop turn, first moves the transmit line's due frames to the port, then
// takes what the port received into the receive line, then hands the
// receive line's due frames to the engine.
type delayPort struct {
	xsk.Port
	tx, rx *delayline.Line
	now    func() int64
	batch  [][]byte
	one    [][]byte // SendFunc's one-frame batch over scratch
	frame  int
	fill   func(frame []byte) // rx.Put at putNow, bound once (no closure per turn)
	putNow int64
	// Mirrors of the lines' counters for the metrics goroutine.
	txC, rxC delayCounters
}

// delayCounters mirror one line's counters; out and dropped are exported
// through tagmetrics (mrc_port_delay_frames_total, _dropped_total), held
// and peak as gauges.
type delayCounters struct {
	out     atomic.Uint64 `metric:"delay_frames" help:"Frames a port's delay line released after the delay."`
	dropped atomic.Uint64 `metric:"delay_dropped" help:"Frames a port's delay line dropped: its pool (delay_frames) was full."`
	held    atomic.Uint64
	peak    atomic.Uint64
}

func (c *delayCounters) store(s delayline.Counters) {
	c.held.Store(s.Held)
	c.peak.Store(s.PeakHeld)
	c.dropped.Store(s.Dropped + s.TooLong)
	c.out.Store(s.Out)
}

func newDelayPort(p xsk.Port, cp config.Port, now func() int64) (*delayPort, error) {
	frame := xsk.FrameSize
	if m, ok := p.(interface{ MaxFrame() int }); ok {
		frame = m.MaxFrame()
	}
	n := cp.DelayFrames
	if n == 0 {
		n = config.DefaultDelayFrames
	}
	tx, err := delayline.New(cp.Delay, n, frame)
	if err != nil {
		return nil, err
	}
	rx, err := delayline.New(cp.Delay, n, frame)
	if err != nil {
		return nil, err
	}
	d := &delayPort{Port: p, tx: tx, rx: rx, now: now, batch: make([][]byte, 0, txBatch), one: [][]byte{make([]byte, frame)}, frame: frame}
	d.fill = func(f []byte) { d.rx.Put(d.putNow, f) }
	return d, nil
}

// MaxFrame is the largest frame the lines hold (the port's own).
func (d *delayPort) MaxFrame() int { return d.frame }

// FD is the wrapped port's (the loop polls it for received frames).
func (d *delayPort) FD() int {
	if f, ok := d.Port.(interface{ FD() int }); ok {
		return f.FD()
	}
	return -1
}

// TxSlot builds no frame in the port: every frame goes through Send and
// the transmit line.
func (d *delayPort) TxSlot() []byte        { return nil }
func (d *delayPort) TxCommit(int) error    { return errDelayTxSlot }
func (d *delayPort) TxFlush() (int, error) { return 0, nil }

// Recv is not used by the daemon (it receives with RecvFunc).
func (d *delayPort) Recv([][]byte) (int, error) { return 0, errDelayRecv }

// Send puts the frames on the wire: into the transmit line. A frame the
// full line drops counts as sent, as a frame lost on a wire does.
func (d *delayPort) Send(frames [][]byte) (int, error) {
	now := d.now()
	for _, f := range frames {
		d.tx.Put(now, f)
	}
	d.pumpTx(now)
	return len(frames), nil
}

// SendFunc builds each frame in a scratch buffer (allocated once) and puts
// it in the transmit line.
func (d *delayPort) SendFunc(max int, build func(frame []byte) int) (int, error) {
	scratch := d.one[0][:cap(d.one[0])]
	k := 0
	for ; k < max; k++ {
		n := build(scratch)
		if n <= 0 {
			break
		}
		d.one[0] = scratch[:n]
		if _, err := d.Send(d.one); err != nil {
			return k, err
		}
	}
	return k, nil
}

// pumpTx hands the transmit line's due frames to the port, as many as its
// ring takes; the rest wait, in order.
func (d *delayPort) pumpTx(now int64) {
	for d.tx.Len() > 0 {
		d.batch = d.tx.Due(now, txBatch, d.batch[:0])
		if len(d.batch) == 0 {
			break
		}
		n, err := d.Port.Send(d.batch)
		d.tx.Pop(n)
		if err != nil || n < len(d.batch) {
			break
		}
	}
	d.txC.store(d.tx.Counters())
}

// RecvFunc moves due transmissions out, takes everything the port
// received into the receive line (as much as the line has room for), and
// hands up to max due frames to fn. Taking it all stamps each frame with
// the first turn that saw it: one batch per call would leave the rest in
// the port's ring, each later call stamping them later, and after a stall
// their delay (and their ACKs' age at the peer) would grow by the backlog.
func (d *delayPort) RecvFunc(max int, fn func(frame []byte)) (int, error) {
	now := d.now()
	d.pumpTx(now)
	d.putNow = now
	var err error
	for room := d.rx.Cap() - d.rx.Len(); room > 0; {
		want := min(max, room)
		var got int
		got, err = d.Port.RecvFunc(want, d.fill)
		room -= got
		if err != nil || got < want {
			break
		}
	}
	n := d.rx.Release(now, max, fn)
	d.rxC.store(d.rx.Counters())
	return n, err
}

// RxPending is how many received frames are due for the engine now (up
// to a receive batch): frames still in the port, or held in the receive
// line, have not arrived yet on the delayed wire.
func (d *delayPort) RxPending() int { return d.rx.Ready(d.now(), rxBatch) }

// due is the earliest time a held frame is due in either line.
func (d *delayPort) due() (mrc.Time, bool) {
	t, ok := d.tx.Next()
	if r, rok := d.rx.Next(); rok && (!ok || r < t) {
		t, ok = r, true
	}
	return mrc.Time(t), ok
}

var (
	errDelayRecv   = errors.New("daemon: a delayed port hands frames out through RecvFunc only")
	errDelayTxSlot = errors.New("daemon: a delayed port has no transmit slots; send with Send")
)

// wrapDelayPorts puts a delay line on every port whose config asks for one.
func (d *Daemon) wrapDelayPorts() error {
	for i, cp := range d.cfg.Ports {
		if cp.Delay <= 0 {
			continue
		}
		dp, err := newDelayPort(d.ports[i], cp, func() int64 { return int64(d.clk.wall()) })
		if err != nil {
			return err
		}
		d.ports[i] = dp
		d.delayed = append(d.delayed, dp)
		d.log.Info("port delay line", "port", cp.PortName(), "delay", cp.Delay, "pool_frames", dp.tx.Cap())
	}
	return nil
}

// delayDeadline is when the next held frame of any delayed port is due
// (mrc.Never when none is held): the loop must wake for it.
func (d *Daemon) delayDeadline() mrc.Time {
	dl := mrc.Never
	for _, p := range d.delayed {
		if t, ok := p.due(); ok && t < dl {
			dl = t
		}
	}
	return dl
}

// logDelayLines reports what the delay lines held, at shutdown.
func (d *Daemon) logDelayLines() {
	for _, p := range d.delayed {
		tc, rc := p.tx.Counters(), p.rx.Counters()
		d.log.Info("port delay line", "port", p.Name(), "delay", time.Duration(p.tx.Delay()),
			"tx_frames", tc.Out, "tx_peak_held", tc.PeakHeld, "tx_dropped", tc.Dropped+tc.TooLong,
			"rx_frames", rc.Out, "rx_peak_held", rc.PeakHeld, "rx_dropped", rc.Dropped+rc.TooLong)
	}
}

var (
	descDelayHeld = prometheus.NewDesc("mrc_port_delay_held", "Frames a port's delay line holds now.", []string{"port", "dir"}, nil)
	descDelayPeak = prometheus.NewDesc("mrc_port_delay_peak_held", "The most frames a port's delay line held at once.", []string{"port", "dir"}, nil)
)

// collectDelay adds the delay lines' metrics.
func (d *Daemon) collectDelay(ch chan<- prometheus.Metric) {
	for _, p := range d.delayed {
		for _, x := range []struct {
			dir string
			c   *delayCounters
		}{{"tx", &p.txC}, {"rx", &p.rxC}} {
			ch <- prometheus.MustNewConstMetric(descDelayHeld, prometheus.GaugeValue, float64(x.c.held.Load()), p.Name(), x.dir)
			ch <- prometheus.MustNewConstMetric(descDelayPeak, prometheus.GaugeValue, float64(x.c.peak.Load()), p.Name(), x.dir)
			tagmetrics.Collect(ch, "mrc_port_", tagmetrics.Fields(x.c), []string{"port", "dir"}, p.Name(), x.dir)
		}
	}
}
