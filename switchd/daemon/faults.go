package daemon

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/softmrc/softmrc/switchd/ctl"
	"github.com/softmrc/softmrc/switchd/dataplane"
)

// The faults map of the data plane is the only record of injected faults:
// the daemon reads it back for stats, for read-modify-write of a fault
// request and after a restart (pinned maps), so nothing can disagree with
// what the switch does. Loss is kept in parts per million.

func dpFault(f ctl.FaultState) dataplane.Fault {
	return dataplane.Fault{
		Down:      f.Down,
		Blackhole: f.Blackhole,
		LossPPM:   uint32(math.Round(f.Loss * 1e6)),
		FlapOn:    time.Duration(f.FlapOnNS),
		FlapOff:   time.Duration(f.FlapOffNS),
	}
}

func ctlFault(f dataplane.Fault) ctl.FaultState {
	return ctl.FaultState{
		Down:      f.Down,
		Blackhole: f.Blackhole,
		Loss:      float64(f.LossPPM) / 1e6,
		FlapOnNS:  int64(f.FlapOn),
		FlapOffNS: int64(f.FlapOff),
	}
}

// setFault applies a fault request. "down" also takes the interface down so
// the neighbour loses carrier, as with a pulled cable; "up" and "clear"
// bring it back.
func (d *Daemon) setFault(f ctl.Fault) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.plane == nil {
		return errors.New("not ready: the data plane is not loaded yet")
	}
	var targets []int
	if f.Target == ctl.TargetSwitch {
		for i := range d.cfg.Ports {
			targets = append(targets, i)
		}
	} else {
		i, ok := d.cfg.PortIndex(f.Target)
		if !ok {
			names := make([]string, len(d.cfg.Ports))
			for k, p := range d.cfg.Ports {
				names[k] = p.Name
			}
			return fmt.Errorf("no port named %q on switch %s: want %q or one of %s", f.Target, d.cfg.Name, ctl.TargetSwitch, strings.Join(names, ", "))
		}
		targets = []int{i}
	}
	if f.Action == ctl.ActHang && f.Target != ctl.TargetSwitch {
		return fmt.Errorf("hang applies to the whole switch: use target %q", ctl.TargetSwitch)
	}
	if f.Action == ctl.ActLoss && !(f.Loss >= 0 && f.Loss <= 1) {
		return fmt.Errorf("loss %v is not a probability in [0,1]", f.Loss)
	}
	if f.Action == ctl.ActFlap && (f.FlapOnNS <= 0 || f.FlapOffNS <= 0) {
		return errors.New("flap needs positive on and off durations")
	}

	switch f.Action {
	case ctl.ActHang, ctl.ActUp, ctl.ActClear:
		if f.Target == ctl.TargetSwitch {
			hang := f.Action == ctl.ActHang
			if err := d.plane.SetHang(hang); err != nil {
				return fmt.Errorf("set hang=%v: %w", hang, err)
			}
		}
		if f.Action == ctl.ActHang {
			d.log.Warn("fault", "target", f.Target, "action", f.Action)
			return nil
		}
	case ctl.ActDown, ctl.ActBlackhole, ctl.ActLoss, ctl.ActFlap:
	default:
		return fmt.Errorf("unknown fault action %q: want down, up, blackhole, loss, flap, hang or clear", f.Action)
	}

	for _, i := range targets {
		cur, err := d.plane.Fault(dataplane.PortID(i))
		if err != nil {
			return fmt.Errorf("read fault of %s: %w", d.cfg.Ports[i].Name, err)
		}
		st := ctlFault(cur)
		wasDown := st.Down
		switch f.Action {
		case ctl.ActDown:
			st.Down = true
		case ctl.ActUp:
			st.Down = false
		case ctl.ActBlackhole:
			st.Blackhole = true
		case ctl.ActLoss:
			st.Loss = f.Loss
		case ctl.ActFlap:
			st.FlapOnNS, st.FlapOffNS = f.FlapOnNS, f.FlapOffNS
		case ctl.ActClear:
			st = ctl.FaultState{}
		}
		p := d.cfg.Ports[i]
		// Data plane first, carrier second: when going down, no frame is
		// forwarded once the neighbour sees the carrier drop; when coming
		// up, the carrier returns after forwarding does.
		if st.Down && !wasDown {
			if err := d.plane.SetFault(dataplane.PortID(i), dpFault(st)); err != nil {
				return fmt.Errorf("set fault on %s: %w", p.Name, err)
			}
			if err := d.links.SetUp(p.Interface, false); err != nil {
				return err
			}
		} else {
			if err := d.plane.SetFault(dataplane.PortID(i), dpFault(st)); err != nil {
				return fmt.Errorf("set fault on %s: %w", p.Name, err)
			}
			if wasDown && !st.Down {
				if err := d.links.SetUp(p.Interface, true); err != nil {
					return err
				}
			}
		}
	}
	d.log.Warn("fault", "target", f.Target, "action", f.String())
	return nil
}
