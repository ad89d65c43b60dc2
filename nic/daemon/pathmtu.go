package daemon

import (
	"net"

	"github.com/softmrc/softmrc/nic/config"
	"github.com/softmrc/softmrc/nic/pathmtu"
)

// checkPathMTU checks, when a QP connects, that every port's interface can
// carry the frames of the device's RoCE MTU (perftest's check_mtu, against
// the interfaces the frames leave on). The MTUs are read now, not at start:
// an operator may have changed them. Ports injected by tests (no interface
// of their own) are not checked.
func (d *Daemon) checkPathMTU() error {
	if !d.ifPorts {
		return nil
	}
	ports := make([]pathmtu.Port, 0, len(d.cfg.Ports))
	for _, p := range d.cfg.Ports {
		pp := pathmtu.Port{Name: p.PortName(), Interface: p.Interface}
		if ifi, err := net.InterfaceByName(p.Interface); err == nil {
			pp.MTU = ifi.MTU
		}
		ports = append(ports, pp)
	}
	return pathmtu.Check(d.cfg.MTU, d.cfg.Mode == config.ModeSRv6, ports)
}
