package daemon

import (
	"fmt"
	"time"

	"github.com/softmrc/softmrc/internal/mrc"
	"github.com/softmrc/softmrc/internal/wire"
	"github.com/softmrc/softmrc/nic/oam"
	"github.com/softmrc/softmrc/nic/pathprobe"
)

// The path-probe agent (path_probes in the NIC config): every interval one
// OAM loop probe per plane to the NIC's T0 and back, and through the T0
// to each T1 and back, sent through the AF_XDP ports like mrc-ping's. The
// prober (nic/pathprobe) keeps a sliding window per loop; `mrcctl paths`
// and mrc-mapper read it. Probe ids carry pathProbeID so that they never
// meet mrc-ping's.

const pathProbeID = 1 << 31

func (d *Daemon) initPathProbes() error {
	iv := d.cfg.PathProbes
	if iv == 0 {
		return nil
	}
	if iv < time.Millisecond {
		return fmt.Errorf("path_probes %v: at least 1ms", iv)
	}
	if d.tmpl == nil {
		return fmt.Errorf("path_probes needs srv6 mode and a path template")
	}
	var ts []pathprobe.Target
	for _, lp := range d.tmpl.Local.Planes {
		if lp.Plane >= len(d.ports) {
			continue
		}
		self, err := d.selfUSID(lp.Plane)
		if err != nil {
			return err
		}
		t0 := oam.SwitchName(lp.T0)
		ts = append(ts, pathprobe.Target{Host: d.tmpl.Local.Name, Plane: lp.Plane, T0: t0, T1: -1, USIDs: []wire.USID{lp.T0, self}})
		for j, u := range lp.T1 {
			ts = append(ts, pathprobe.Target{Host: d.tmpl.Local.Name, Plane: lp.Plane, T0: t0, T1: j, T1Sw: oam.SwitchName(u),
				USIDs: []wire.USID{lp.T0, u, lp.T0, self}})
		}
	}
	// A probe is lost when unanswered for 10 intervals, at least 20 ms
	// (loops take tens of µs; a loaded 2-core VM can stall the loop ms).
	d.prober = pathprobe.New(ts, iv, max(10*iv, 20*time.Millisecond))
	d.log.Info("path probes on", "interval", iv, "loops", len(ts))
	return nil
}

func (d *Daemon) probeDeadline() mrc.Time {
	if d.prober == nil || d.probesOff {
		return mrc.Never
	}
	return mrc.Time(d.prober.Next())
}

// sendPathProbes queues the loops that are due.
func (d *Daemon) sendPathProbes(now mrc.Time) int {
	if d.prober == nil || d.probesOff || time.Duration(now) < d.prober.Next() {
		return 0
	}
	d.probeBuf = d.prober.Due(time.Duration(now), d.probeBuf[:0])
	sent := 0
	for _, pr := range d.probeBuf {
		t := d.prober.Targets[pr.Target]
		i := d.byPlane[t.Plane]
		dst, err := d.tmpl.Format().Build(d.tmpl.BlockAddr(), t.USIDs...)
		buf := d.txq[i].slot()
		if err != nil || buf == nil {
			continue // counted as lost by the prober: a full queue is a busy port
		}
		port := d.cfg.Ports[i]
		n, err := oam.Build(buf, oam.Net{SrcMAC: port.MAC, DstMAC: port.NeighborMAC, Src: wire.Addr128FromNetip(port.Address), Dst: dst},
			oam.Probe{Kind: oam.Loop, ID: pathProbeID | uint32(pr.Target), Seq: pr.Seq, EV: wire.MakeEV(wire.Plane(t.Plane), uint8(max(t.T1, 0)), 0), TxTime: int64(now)})
		if err != nil {
			continue
		}
		d.txq[i].push(n)
		d.oam.pathSent++
		sent++
	}
	return sent
}
