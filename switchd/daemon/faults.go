package daemon

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/softmrc/softmrc/switchd/ctl"
	"github.com/softmrc/softmrc/switchd/dataplane"
)

func dpFault(f ctl.FaultState) dataplane.Fault {
	return dataplane.Fault{
		Down:      f.Down,
		Blackhole: f.Blackhole,
		LossPPM:   uint32(math.Round(f.Loss * 1e6)),
		FlapOn:    time.Duration(f.FlapOnNS),
		FlapOff:   time.Duration(f.FlapOffNS),
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
			d.hang = hang
		}
		if f.Action == ctl.ActHang {
			d.saveState()
			d.log.Warn("fault", "target", f.Target, "action", f.Action)
			return nil
		}
	case ctl.ActDown, ctl.ActBlackhole, ctl.ActLoss, ctl.ActFlap:
	default:
		return fmt.Errorf("unknown fault action %q: want down, up, blackhole, loss, flap, hang or clear", f.Action)
	}

	for _, i := range targets {
		st := d.faults[i]
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
		d.faults[i] = st
	}
	d.saveState()
	d.log.Warn("fault", "target", f.Target, "action", f.String())
	return nil
}

// state is what survives a restart besides the pinned maps: the faults the
// daemon set (the maps hold them too, but are not read back).
type state struct {
	Switch string                    `json:"switch"`
	Hang   bool                      `json:"hang"`
	Faults map[string]ctl.FaultState `json:"faults"`
}

func (d *Daemon) saveState() {
	s := state{Switch: d.cfg.Name, Hang: d.hang, Faults: map[string]ctl.FaultState{}}
	for i, f := range d.faults {
		if f != (ctl.FaultState{}) {
			s.Faults[d.cfg.Ports[i].Name] = f
		}
	}
	b, _ := json.MarshalIndent(s, "", "  ")
	dir := filepath.Dir(d.statePath)
	tmp, err := os.CreateTemp(dir, ".state-*")
	if err == nil {
		_, err = tmp.Write(append(b, '\n'))
		if cerr := tmp.Close(); err == nil {
			err = cerr
		}
		if err == nil {
			err = os.Rename(tmp.Name(), d.statePath)
		}
		if err != nil {
			os.Remove(tmp.Name())
		}
	}
	if err != nil {
		d.log.Warn("cannot save fault state; a restart will forget injected faults", "path", d.statePath, "err", err)
	}
}

// loadState restores faults recorded by the previous process; ports the
// config no longer has are ignored.
func (d *Daemon) loadState() {
	b, err := os.ReadFile(d.statePath)
	if errors.Is(err, os.ErrNotExist) {
		return
	}
	var s state
	if err == nil {
		err = json.Unmarshal(b, &s)
	}
	if err != nil {
		d.log.Warn("ignoring unreadable fault state; adopted ports start healthy", "path", d.statePath, "err", err)
		return
	}
	d.hang = s.Hang
	for name, f := range s.Faults {
		if i, ok := d.cfg.PortIndex(name); ok {
			d.faults[i] = f
		}
	}
}
