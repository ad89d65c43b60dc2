package daemon

import (
	"net/netip"

	"github.com/softmrc/softmrc/switchd/dataplane"
)

// Plane is what the daemon needs from the data plane: the methods of
// *dataplane.Dataplane. It is an interface so that the control protocol and
// the config-to-map programming can be tested without root.
type Plane interface {
	Attach(ifindex int, mode dataplane.AttachMode) error
	AttachPass(ifindex int) error
	Detach(ifindex int) error
	Attached() []dataplane.Attachment
	StaleLinks() []dataplane.Attachment
	SetSwitchConfig(cfg dataplane.SwitchConfig) error
	AddLocalAddr(a netip.Addr) error
	SetPort(id dataplane.PortID, p dataplane.Port) error
	Port(id dataplane.PortID) (dataplane.Port, bool, error)
	DelPort(id dataplane.PortID) error
	AddRoute(prefix netip.Prefix, nh dataplane.NextHop) error
	DelRoute(prefix netip.Prefix) error
	Routes() ([]dataplane.Route, error)
	SetECMPGroup(id dataplane.GroupID, members []dataplane.PortID) error
	SetFault(id dataplane.PortID, f dataplane.Fault) error
	Fault(id dataplane.PortID) (dataplane.Fault, error)
	SetHang(hang bool) error
	Hang() (bool, error)
	Counters(id dataplane.PortID) (dataplane.PortCounters, error)
	Close() error
	Destroy() error
}

var _ Plane = (*dataplane.Dataplane)(nil)

// Backend opens a Plane: fresh (Load) or by taking over the pins of a
// previous process (Adopt).
type Backend struct {
	Load  func(opts dataplane.LoadOptions) (Plane, error)
	Adopt func(pinDir string) (Plane, error)
}

// BPF is the real backend: the XDP program through switchd/dataplane.
var BPF = Backend{
	Load: func(opts dataplane.LoadOptions) (Plane, error) {
		d, err := dataplane.Load(opts)
		if err != nil {
			return nil, err
		}
		return d, nil
	},
	Adopt: func(pinDir string) (Plane, error) {
		d, err := dataplane.Adopt(pinDir)
		if err != nil {
			return nil, err
		}
		return d, nil
	},
}
