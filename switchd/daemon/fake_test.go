package daemon

import (
	"fmt"
	"net"
	"net/netip"
	"sort"
	"sync"

	"github.com/softmrc/softmrc/switchd/dataplane"
)

// fakePlane records what the daemon programs. Its state lives in a fakePins
// so that a "restarted" daemon can adopt it, as with bpffs pins.
type fakePins struct {
	mu       sync.Mutex
	pinned   bool
	sc       dataplane.SwitchConfig
	ports    map[dataplane.PortID]dataplane.Port
	routes   map[netip.Prefix]dataplane.NextHop
	groups   map[dataplane.GroupID][]dataplane.PortID
	faults   map[dataplane.PortID]dataplane.Fault
	hang     bool
	links    map[int]string // ifindex -> "switch" | "pass"
	local    map[netip.Addr]bool
	counters map[dataplane.PortID]dataplane.PortCounters
	loads    int
	adopts   int
	newLinks int
	gone     map[int]bool // links whose device vanished (still pinned)
	// dropGone makes Adopt drop gone links and report them as stale, as
	// dataplane does when the kernel reports the link without a device.
	dropGone bool
	stale    []dataplane.Attachment
}

func newFakePins() *fakePins {
	return &fakePins{
		ports:    map[dataplane.PortID]dataplane.Port{},
		routes:   map[netip.Prefix]dataplane.NextHop{},
		groups:   map[dataplane.GroupID][]dataplane.PortID{},
		faults:   map[dataplane.PortID]dataplane.Fault{},
		links:    map[int]string{},
		local:    map[netip.Addr]bool{},
		counters: map[dataplane.PortID]dataplane.PortCounters{},
		gone:     map[int]bool{},
	}
}

type fakePlane struct {
	p      *fakePins
	closed bool
}

func (f *fakePins) backend() Backend {
	return Backend{
		Load: func(opts dataplane.LoadOptions) (Plane, error) {
			f.mu.Lock()
			defer f.mu.Unlock()
			f.loads++
			f.pinned = true
			return &fakePlane{p: f}, nil
		},
		Adopt: func(string) (Plane, error) {
			f.mu.Lock()
			defer f.mu.Unlock()
			if !f.pinned {
				return nil, fmt.Errorf("nothing pinned")
			}
			f.adopts++
			f.stale = nil
			if f.dropGone {
				for ifx := range f.gone {
					kind := dataplane.LinkSwitch
					if f.links[ifx] == "pass" {
						kind = dataplane.LinkPass
					}
					f.stale = append(f.stale, dataplane.Attachment{Ifindex: ifx, Kind: kind})
					delete(f.links, ifx)
					delete(f.gone, ifx)
				}
			}
			return &fakePlane{p: f}, nil
		},
	}
}

func (fp *fakePlane) lock() func() { fp.p.mu.Lock(); return fp.p.mu.Unlock }

// Attach and AttachPass count new links: an existing link is updated in
// place, as dataplane does.
func (fp *fakePlane) Attach(ifindex int, _ dataplane.AttachMode) error {
	defer fp.lock()()
	if _, ok := fp.p.links[ifindex]; !ok {
		fp.p.newLinks++
	}
	fp.p.links[ifindex] = "switch"
	return nil
}
func (fp *fakePlane) AttachPass(ifindex int) error {
	defer fp.lock()()
	if _, ok := fp.p.links[ifindex]; !ok {
		fp.p.newLinks++
	}
	fp.p.links[ifindex] = "pass"
	return nil
}
func (fp *fakePlane) Detach(ifindex int) error {
	defer fp.lock()()
	delete(fp.p.links, ifindex)
	delete(fp.p.gone, ifindex)
	return nil
}
func (fp *fakePlane) Attached() []dataplane.Attachment {
	defer fp.lock()()
	var out []dataplane.Attachment
	for i, kind := range fp.p.links {
		k := dataplane.LinkSwitch
		if kind == "pass" {
			k = dataplane.LinkPass
		}
		out = append(out, dataplane.Attachment{Ifindex: i, Kind: k})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Ifindex < out[j].Ifindex })
	return out
}
func (fp *fakePlane) StaleLinks() []dataplane.Attachment {
	defer fp.lock()()
	return append([]dataplane.Attachment(nil), fp.p.stale...)
}
func (fp *fakePlane) SetSwitchConfig(cfg dataplane.SwitchConfig) error {
	defer fp.lock()()
	fp.p.sc = cfg
	return nil
}
func (fp *fakePlane) AddLocalAddr(a netip.Addr) error {
	defer fp.lock()()
	fp.p.local[a] = true
	return nil
}
func (fp *fakePlane) SetPort(id dataplane.PortID, p dataplane.Port) error {
	defer fp.lock()()
	fp.p.ports[id] = p
	return nil
}
func (fp *fakePlane) Port(id dataplane.PortID) (dataplane.Port, bool, error) {
	defer fp.lock()()
	p, ok := fp.p.ports[id]
	return p, ok, nil
}
func (fp *fakePlane) DelPort(id dataplane.PortID) error {
	defer fp.lock()()
	delete(fp.p.ports, id)
	delete(fp.p.faults, id) // as dataplane
	return nil
}
func (fp *fakePlane) AddRoute(prefix netip.Prefix, nh dataplane.NextHop) error {
	defer fp.lock()()
	fp.p.routes[prefix] = nh
	return nil
}
func (fp *fakePlane) DelRoute(prefix netip.Prefix) error {
	defer fp.lock()()
	delete(fp.p.routes, prefix)
	return nil
}
func (fp *fakePlane) Routes() ([]dataplane.Route, error) {
	defer fp.lock()()
	var out []dataplane.Route
	for p, nh := range fp.p.routes {
		out = append(out, dataplane.Route{Prefix: p, NextHop: nh})
	}
	return out, nil
}
func (fp *fakePlane) SetECMPGroup(id dataplane.GroupID, members []dataplane.PortID) error {
	defer fp.lock()()
	fp.p.groups[id] = members
	return nil
}
func (fp *fakePlane) SetFault(id dataplane.PortID, f dataplane.Fault) error {
	defer fp.lock()()
	fp.p.faults[id] = f
	return nil
}
func (fp *fakePlane) Fault(id dataplane.PortID) (dataplane.Fault, error) {
	defer fp.lock()()
	return fp.p.faults[id], nil
}
func (fp *fakePlane) Hang() (bool, error) {
	defer fp.lock()()
	return fp.p.hang, nil
}
func (fp *fakePlane) SetHang(hang bool) error {
	defer fp.lock()()
	fp.p.hang = hang
	return nil
}
func (fp *fakePlane) Counters(id dataplane.PortID) (dataplane.PortCounters, error) {
	defer fp.lock()()
	return fp.p.counters[id], nil
}
func (fp *fakePlane) Close() error { fp.closed = true; return nil }
func (fp *fakePlane) Destroy() error {
	defer fp.lock()()
	n := newFakePins()
	p := fp.p
	p.pinned, p.sc, p.hang = false, dataplane.SwitchConfig{}, false
	p.ports, p.routes, p.groups, p.faults, p.links, p.local, p.counters = n.ports, n.routes, n.groups, n.faults, n.links, n.local, n.counters
	return nil
}

// fakeLinks is a namespace with a few interfaces.
type fakeLinks struct {
	pins  *fakePins // XDP state of an interface comes from here
	mu    sync.Mutex
	links map[string]*Link
	up    map[string]bool
	addrs map[string][]netip.Addr
}

func newFakeLinks() *fakeLinks {
	return &fakeLinks{links: map[string]*Link{}, up: map[string]bool{}, addrs: map[string][]netip.Addr{}}
}

func (f *fakeLinks) add(name string, index int, peer int, peerName string) {
	f.links[name] = &Link{Index: index, MAC: net.HardwareAddr{2, 0xee, 0, 0, 0, byte(index)}, Up: true, Peer: peer, PeerName: peerName}
	f.up[name] = true
}

func (f *fakeLinks) Lookup(name string) (Link, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	l, ok := f.links[name]
	if !ok {
		return Link{}, fmt.Errorf("interface %q: no such device", name)
	}
	c := *l
	c.Up = f.up[name]
	if f.pins != nil {
		f.pins.mu.Lock()
		if _, ok := f.pins.links[c.Index]; ok && !f.pins.gone[c.Index] {
			c.XDP = "native"
		}
		f.pins.mu.Unlock()
	}
	return c, nil
}
func (f *fakeLinks) SetUp(name string, up bool) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.links[name]; !ok {
		return fmt.Errorf("interface %q: no such device", name)
	}
	f.up[name] = up
	return nil
}
func (f *fakeLinks) isUp(name string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.up[name]
}
func (f *fakeLinks) Addrs(name string) ([]netip.Addr, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.addrs[name], nil
}

// snapshot is a comparable summary of the fault and hang state.
func (f *fakePins) snapshot() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return fmt.Sprint(f.faults, f.hang)
}
