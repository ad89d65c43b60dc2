package daemon

import (
	"bufio"
	"encoding/json"
	"net"
	"time"

	"github.com/softmrc/softmrc/internal/telemetry"
	"github.com/softmrc/softmrc/switchd/ctl"
	"github.com/softmrc/softmrc/switchd/dataplane"
)

// queueReader is the part of the data plane that reads the port models'
// queues (dataplane.Dataplane has it; test fakes may not).
type queueReader interface {
	QueueBytes(id dataplane.PortID, now int64) (uint64, error)
}

// watch answers CmdWatch on c and then streams one sample per port every
// interval until the client closes the connection, the daemon stops or a
// write fails. The samples come from the counters the switch program keeps
// (per-CPU maps, summed) and the port models' queues: reading them does
// not touch the data path.
func (s *controlServer) watch(c net.Conn, r *bufio.Reader, req ctl.Request) {
	iv, err := telemetry.CheckInterval(time.Duration(req.IntervalNS))
	resp := ctl.Response{OK: err == nil}
	if err != nil {
		resp.Error = err.Error()
	}
	b, _ := json.Marshal(resp)
	c.SetWriteDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write(append(b, '\n')); err != nil || !resp.OK {
		return
	}
	// The client sends nothing more; its reads end when it goes away.
	gone := make(chan struct{})
	go func() {
		defer close(gone)
		for {
			if _, err := ctl.ReadLine(r); err != nil {
				return
			}
		}
	}()
	// A writer goroutine does the (blocking) socket writes, so that a
	// subscriber that reads slowly loses batches (counted) instead of
	// holding up the sampling or, with a write timeout, getting a torn line.
	out := make(chan []byte, 8)
	free := make(chan []byte, 8)
	for range cap(free) {
		free <- nil
	}
	werr := make(chan struct{})
	go func() {
		defer close(werr)
		for b := range out {
			c.SetWriteDeadline(time.Now().Add(time.Minute))
			if _, err := c.Write(b); err != nil {
				return
			}
			free <- b[:0]
		}
	}()
	defer close(out)
	tick := time.NewTicker(iv)
	defer tick.Stop()
	buf := <-free
	var lastWrite time.Time
	rec := telemetry.NewRecord(telemetry.KeyTxBytes, telemetry.KeyTxPackets, telemetry.KeyRxBytes, telemetry.KeyRxPackets,
		telemetry.KeyDrops, telemetry.KeyDropBuffer, telemetry.KeyDropFault, telemetry.KeyECNMarked, telemetry.KeyTrimmed,
		telemetry.KeyFaultDown, telemetry.KeyQueueBytes)
	for {
		select {
		case <-gone:
			return
		case <-werr:
			return
		case <-s.d.detached:
			return
		case <-tick.C:
		}
		buf = s.d.appendSamples(buf, rec)
		// Samples keep the interval's resolution but go out at most every
		// flushEvery: at 1 ms, one socket write (and one wakeup of the
		// client) per 10 samples.
		if len(buf) == 0 || time.Since(lastWrite) < flushEvery {
			continue
		}
		select {
		case nb := <-free:
			out <- buf
			buf = nb
		default:
			s.d.teleDropped.Add(1)
			buf = buf[:0]
		}
		lastWrite = time.Now()
	}
}

// flushEvery is how often a watch writes the samples it has gathered.
const flushEvery = 10 * time.Millisecond

// appendSamples appends one JSON Lines sample per port to buf (nothing
// while the data plane is not loaded).
func (d *Daemon) appendSamples(buf []byte, r *telemetry.Record) []byte {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.plane == nil {
		return buf
	}
	hang, _ := d.plane.Hang()
	qr, _ := d.plane.(queueReader)
	now := telemetry.Now()
	for i, p := range d.cfg.Ports {
		id := dataplane.PortID(i)
		c, err := d.plane.Counters(id)
		if err != nil {
			continue
		}
		f, _ := d.plane.Fault(id)
		r.Set(telemetry.KeyTxBytes, float64(c.TxBytes))
		r.Set(telemetry.KeyTxPackets, float64(c.TxPackets))
		r.Set(telemetry.KeyRxBytes, float64(c.RxBytes))
		r.Set(telemetry.KeyRxPackets, float64(c.RxPackets))
		r.Set(telemetry.KeyDrops, float64(c.Dropped()))
		r.Set(telemetry.KeyDropBuffer, float64(c.DropBuffer))
		r.Set(telemetry.KeyDropFault, float64(c.DropFault))
		r.Set(telemetry.KeyECNMarked, float64(c.ECNMarked))
		r.Set(telemetry.KeyTrimmed, float64(c.Trimmed))
		down := 0.0
		if hang || f.Down || f.Blackhole {
			down = 1
		}
		r.Set(telemetry.KeyFaultDown, down)
		// A data plane that cannot read its queues (a test fake) reports 0.
		q := uint64(0)
		if qr != nil {
			q, _ = qr.QueueBytes(id, now)
		}
		r.Set(telemetry.KeyQueueBytes, float64(q))
		buf = r.Append(buf, now, d.cfg.Name, telemetry.KindSwitchPort, p.Name)
	}
	return buf
}
