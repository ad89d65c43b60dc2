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
	tick := time.NewTicker(iv)
	defer tick.Stop()
	var buf []byte
	smp := telemetry.Sample{Source: s.d.cfg.Name, Kind: telemetry.KindSwitchPort, Values: map[string]float64{}}
	for {
		select {
		case <-gone:
			return
		case <-s.d.detached:
			return
		case <-tick.C:
		}
		buf = s.d.appendSamples(buf[:0], &smp)
		if len(buf) == 0 {
			continue // not ready yet
		}
		c.SetWriteDeadline(time.Now().Add(5 * time.Second))
		if _, err := c.Write(buf); err != nil {
			return
		}
	}
}

// appendSamples appends one JSON Lines sample per port to buf (nothing
// while the data plane is not loaded).
func (d *Daemon) appendSamples(buf []byte, smp *telemetry.Sample) []byte {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.plane == nil {
		return buf
	}
	hang, _ := d.plane.Hang()
	qr, _ := d.plane.(queueReader)
	smp.T = telemetry.Now()
	for i, p := range d.cfg.Ports {
		id := dataplane.PortID(i)
		c, err := d.plane.Counters(id)
		if err != nil {
			continue
		}
		f, _ := d.plane.Fault(id)
		v := smp.Values
		clear(v)
		smp.ID = p.Name
		v[telemetry.KeyTxBytes] = float64(c.TxBytes)
		v[telemetry.KeyTxPackets] = float64(c.TxPackets)
		v[telemetry.KeyRxBytes] = float64(c.RxBytes)
		v[telemetry.KeyRxPackets] = float64(c.RxPackets)
		v[telemetry.KeyDrops] = float64(c.Dropped())
		v[telemetry.KeyDropBuffer] = float64(c.DropBuffer)
		v[telemetry.KeyDropFault] = float64(c.DropFault)
		v[telemetry.KeyECNMarked] = float64(c.ECNMarked)
		v[telemetry.KeyTrimmed] = float64(c.Trimmed)
		down := 0.0
		if hang || f.Down || f.Blackhole {
			down = 1
		}
		v[telemetry.KeyFaultDown] = down
		if qr != nil {
			if q, err := qr.QueueBytes(id, smp.T); err == nil {
				v[telemetry.KeyQueueBytes] = float64(q)
			}
		}
		buf = telemetry.AppendJSON(buf, smp)
	}
	return buf
}
