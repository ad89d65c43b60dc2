package netns

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
	"golang.org/x/sys/unix"

	"github.com/softmrc/softmrc/testbed/plan"
	"github.com/softmrc/softmrc/testbed/topo"

	"github.com/softmrc/softmrc/internal/ethtool"
	"github.com/softmrc/softmrc/internal/wire"
)

// ErrNoNetem reports that a link delay was asked for on a kernel without
// sch_netem (CONFIG_NET_SCH_NETEM). Host links with NICs never need it: their
// delay is mrc-nicd's delay line (plan.HostPort.DelayUS).
var ErrNoNetem = errors.New("link delay needs the netem qdisc, which this kernel lacks (CONFIG_NET_SCH_NETEM)")

// ErrNoSRv6 reports that the kernel dataplane in srv6 mode was asked for on a
// kernel without SRv6 routes (CONFIG_IPV6_SEG6_LWTUNNEL: the uN is a seg6local
// End route). The XDP dataplane never needs it, nor does ecmp mode.
var ErrNoSRv6 = errors.New("the kernel dataplane's uN is a seg6local route, which this kernel lacks (CONFIG_IPV6_SEG6_LWTUNNEL); use dataplane: xdp (the default), or mode: ecmp")

// Workers bounds parallel namespace configuration.
const Workers = 4

// Apply builds the plan's namespaces, veths, bridge, addresses, neighbours
// and (for the kernel dataplane and ecmp hosts) routes. It expects none of
// the plan's namespaces to exist; callers tear a previous run down first.
// On error the caller tears down (the state file lists everything).
func Apply(p *plan.Plan) error {
	if err := forEach(p.Namespaces, func(ns string) error {
		if err := Create(ns); err != nil {
			return err
		}
		return Do(ns, func() error { return baseSysctls(p, ns) })
	}); err != nil {
		return err
	}
	if err := createVeths(p); err != nil {
		return err
	}
	// Everything inside one namespace goes through one netlink handle.
	byNS := map[string][]func(*netlink.Handle) error{}
	add := func(ns string, f func(*netlink.Handle) error) { byNS[ns] = append(byNS[ns], f) }
	add(p.Mgmt.NS, func(h *netlink.Handle) error { return mgmtBridge(h, p) })
	for _, l := range p.Links {
		for _, e := range []plan.End{l.A, l.B} {
			add(e.NS, func(h *netlink.Handle) error { return endUp(h, p, l, e) })
		}
	}
	for i := range p.Hosts {
		hst := &p.Hosts[i]
		add(hst.NS, func(h *netlink.Handle) error { return HostL3(h, p, hst) })
	}
	if p.Dataplane == topo.DataplaneKernel {
		for i := range p.Switches {
			s := &p.Switches[i]
			add(s.NS, func(h *netlink.Handle) error { return KernelFIB(h, p, s) })
		}
	}
	return forEach(p.Namespaces, func(ns string) error {
		h, err := Handle(ns)
		if err != nil {
			return err
		}
		defer h.Close()
		for _, f := range byNS[ns] {
			if err := f(h); err != nil {
				return fmt.Errorf("namespace %s: %w", ns, err)
			}
		}
		// GRO and offloads need the ethtool ioctl, which works on the
		// thread's namespace.
		return Do(ns, func() error {
			for _, l := range p.Links {
				if l.Kind == plan.LinkMgmt {
					continue
				}
				for _, e := range []plan.End{l.A, l.B} {
					if e.NS == ns {
						// GRO on at every veth end: one that receives XDP
						// redirects without running an XDP program itself
						// drops them silently without GRO (SRV6-XDP-FACTS §3).
						if err := ethtool.SetGRO(e.Ifname, true); err != nil {
							return err
						}
						// TX checksum offload, TSO and GSO off: an XDP
						// redirect drops the skb's CHECKSUM_PARTIAL state, so
						// a kernel-sent UDP/TCP packet would reach the far
						// host with an unfinished checksum (and a GSO
						// super-packet would exceed the MTU).
						if err := ethtool.SetTxOffloads(e.Ifname, false); err != nil {
							return err
						}
					}
				}
			}
			return nil
		})
	})
}

// forEach runs f over items with at most Workers in flight and returns the
// first error (all items are attempted).
func forEach(items []string, f func(string) error) error {
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
		sem  = make(chan struct{}, Workers)
	)
	for _, it := range items {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			if err := f(it); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

func baseSysctls(p *plan.Plan, ns string) error {
	kv := [][2]string{
		// Static addresses, no DAD, no RAs: everything is derived, and a
		// fault's link down must not flush addresses.
		{"net.ipv6.conf.all.accept_dad", "0"},
		{"net.ipv6.conf.default.accept_dad", "0"},
		{"net.ipv6.conf.all.accept_ra", "0"},
		{"net.ipv6.conf.default.accept_ra", "0"},
		{"net.ipv6.conf.default.router_solicitations", "0"},
		{"net.ipv6.conf.all.keep_addr_on_down", "1"},
		{"net.ipv6.conf.default.keep_addr_on_down", "1"},
	}
	if p.Dataplane == topo.DataplaneKernel && p.Switch(ns[len(p.Prefix)+1:]) != nil {
		kv = append(kv, [2]string{"net.ipv6.conf.all.forwarding", "1"}, [2]string{"net.ipv6.fib_multipath_hash_policy", "1"})
	}
	for _, x := range kv {
		if err := Sysctl(x[0], x[1]); err != nil {
			return err
		}
	}
	return nil
}

func createVeths(p *plan.Plan) error {
	fds := map[string]int{}
	for _, ns := range p.Namespaces {
		h, err := Open(ns)
		if err != nil {
			return err
		}
		defer h.Close()
		fds[ns] = int(h)
	}
	for _, l := range p.Links {
		ma, mb := l.A.MAC.HardwareAddr(), l.B.MAC.HardwareAddr()
		v := &netlink.Veth{
			LinkAttrs: netlink.LinkAttrs{Name: l.A.Ifname, MTU: p.MTU, HardwareAddr: ma, Namespace: netlink.NsFd(fds[l.A.NS])},
			PeerName:  l.B.Ifname, PeerHardwareAddr: mb, PeerMTU: uint32(p.MTU), PeerNamespace: netlink.NsFd(fds[l.B.NS]),
		}
		if q := p.NICThreads; q > 1 && l.Kind == plan.LinkHost {
			// One queue per engine thread of the NIC, and as many on the
			// T0's end: a veth receives on the queue its peer sent from
			// (or, for XDP_REDIRECT into it, the CPU's), and every queue a
			// frame can land on needs a NIC socket.
			v.NumTxQueues, v.NumRxQueues = q, q
			v.PeerNumTxQueues, v.PeerNumRxQueues = uint32(q), uint32(q)
		}
		if err := netlink.LinkAdd(v); err != nil {
			return fmt.Errorf("veth %s (%s/%s - %s/%s): %w", l.Name, l.A.NS, l.A.Ifname, l.B.NS, l.B.Ifname, err)
		}
	}
	return nil
}

func mgmtBridge(h *netlink.Handle, p *plan.Plan) error {
	mac := p.Mgmt.MAC.HardwareAddr()
	off := false
	br := &netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: p.Mgmt.Bridge, HardwareAddr: mac, MTU: 1500}, MulticastSnooping: &off}
	if err := h.LinkAdd(br); err != nil {
		return fmt.Errorf("bridge %s: %w", p.Mgmt.Bridge, err)
	}
	return h.LinkSetUp(br)
}

func endUp(h *netlink.Handle, p *plan.Plan, l plan.Link, e plan.End) error {
	lk, err := h.LinkByName(e.Ifname)
	if err != nil {
		return fmt.Errorf("%s: %w", e.Ifname, err)
	}
	if l.Kind == plan.LinkMgmt && e.NS == p.Mgmt.NS {
		br, err := h.LinkByName(p.Mgmt.Bridge)
		if err != nil {
			return err
		}
		if err := h.LinkSetMaster(lk, br); err != nil {
			return fmt.Errorf("%s: enslave to %s: %w", e.Ifname, p.Mgmt.Bridge, err)
		}
	}
	if l.DelayUS > 0 {
		q := netlink.NewNetem(netlink.QdiscAttrs{LinkIndex: lk.Attrs().Index, Parent: netlink.HANDLE_ROOT, Handle: netlink.MakeHandle(1, 0)},
			netlink.NetemQdiscAttrs{Latency: uint32(l.DelayUS)})
		if err := h.QdiscReplace(q); err != nil {
			if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.EOPNOTSUPP) {
				hint := "delay works on host links only, where mrc-nicd holds the frames in its delay line (nics: true); " +
					"a switch cannot hold a frame (its XDP program forwards or drops it at once): remove delay from links.fabric"
				if l.Kind == plan.LinkHost {
					hint = "with nics: true mrc-nicd holds a host link's delay in its delay line: set nics: true or remove the delay"
				}
				return fmt.Errorf("%s link %s (%s): %w; %s", l.Kind, l.Name, e.Ifname, ErrNoNetem, hint)
			}
			return fmt.Errorf("%s: netem delay %dus: %w", e.Ifname, l.DelayUS, err)
		}
	}
	if err := h.LinkSetUp(lk); err != nil {
		return fmt.Errorf("%s: up: %w", e.Ifname, err)
	}
	return nil
}

func addAddr(h *netlink.Handle, ifname string, a netip.Prefix) error {
	lk, err := h.LinkByName(ifname)
	if err != nil {
		return err
	}
	ad := &netlink.Addr{IPNet: &net.IPNet{IP: a.Addr().AsSlice(), Mask: net.CIDRMask(a.Bits(), 128)}, Flags: unix.IFA_F_NODAD}
	if err := h.AddrReplace(lk, ad); err != nil {
		return fmt.Errorf("%s: address %s: %w", ifname, a, err)
	}
	return nil
}

func neigh(h *netlink.Handle, ifname string, ip netip.Addr, mac wire.MAC) error {
	lk, err := h.LinkByName(ifname)
	if err != nil {
		return err
	}
	hw := mac.HardwareAddr()
	n := &netlink.Neigh{LinkIndex: lk.Attrs().Index, Family: unix.AF_INET6, State: netlink.NUD_PERMANENT, IP: ip.AsSlice(), HardwareAddr: hw}
	if err := h.NeighSet(n); err != nil {
		return fmt.Errorf("%s: neighbour %s: %w", ifname, ip, err)
	}
	return nil
}

func ipnet(p netip.Prefix) *net.IPNet {
	return &net.IPNet{IP: p.Masked().Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), 128)}
}

// HostL3 gives a host its port and management addresses and permanent
// neighbours for its gateways; in ecmp mode also a route per plane.
func HostL3(h *netlink.Handle, p *plan.Plan, hst *plan.Host) error {
	if err := addAddr(h, hst.MgmtIf, hst.MgmtAddr); err != nil {
		return err
	}
	for _, hp := range hst.Ports {
		if err := addAddr(h, hp.Ifname, hp.Addr); err != nil {
			return err
		}
		if err := neigh(h, hp.Ifname, hp.GatewayLL, hp.GatewayMAC); err != nil {
			return err
		}
		if p.Mode != topo.ModeECMP {
			continue
		}
		lk, err := h.LinkByName(hp.Ifname)
		if err != nil {
			return err
		}
		r := &netlink.Route{LinkIndex: lk.Attrs().Index, Dst: ipnet(plan.PlaneSubnet(p.RunID, hp.Plane)), Gw: hp.GatewayLL.AsSlice()}
		if err := h.RouteReplace(r); err != nil {
			return fmt.Errorf("%s: route %s: %w", hp.Ifname, r.Dst, err)
		}
	}
	return nil
}

// KernelFIB programs a switch's plan FIB into the namespace's kernel: the
// uN as seg6local End with the NEXT-CSID flavour (F3216), each route via the
// peer's link-local address with a permanent neighbour, ECMP groups as
// multipath routes. It is idempotent (replace), so it also restores routes a
// link-down fault flushed.
func KernelFIB(h *netlink.Handle, p *plan.Plan, s *plan.Switch) error {
	idx := map[string]int{}
	for _, pt := range s.Ports {
		lk, err := h.LinkByName(pt.Ifname)
		if err != nil {
			return err
		}
		idx[pt.Ifname] = lk.Attrs().Index
		if err := neigh(h, pt.Ifname, pt.PeerLL, pt.PeerMAC); err != nil {
			return err
		}
	}
	if p.Mode == topo.ModeSRv6 && len(s.Ports) > 0 {
		r := &netlink.Route{Dst: ipnet(s.UN), LinkIndex: idx[s.Ports[0].Ifname],
			Encap: &nextCSIDEncap{blockBits: uint8(p.Block.Bits()), nodeBits: 16}}
		if err := h.RouteReplace(r); err != nil {
			if errors.Is(err, unix.EOPNOTSUPP) {
				// No seg6local encap type registered: the kernel was built
				// without it, not a malformed route.
				return fmt.Errorf("uN %s: %w", s.UN, ErrNoSRv6)
			}
			return fmt.Errorf("uN %s (seg6local End next-csid): %w", s.UN, err)
		}
	}
	for _, rt := range s.Routes {
		r := &netlink.Route{Dst: ipnet(rt.Dst)}
		if rt.Port != "" {
			r.LinkIndex, r.Gw = idx[rt.Port], s.Port(rt.Port).PeerLL.AsSlice()
		} else {
			for _, g := range s.Groups {
				if g.Name != rt.Group {
					continue
				}
				for _, m := range g.Ports {
					r.MultiPath = append(r.MultiPath, &netlink.NexthopInfo{LinkIndex: idx[m], Gw: s.Port(m).PeerLL.AsSlice()})
				}
			}
		}
		if err := h.RouteReplace(r); err != nil {
			return fmt.Errorf("route %s: %w", rt.Dst, err)
		}
	}
	return nil
}

// nextCSIDEncap is seg6local "action End flavors next-csid lblen B nflen N",
// which vishvananda/netlink v1.3.1 cannot express (no SEG6_LOCAL_FLAVORS).
type nextCSIDEncap struct{ blockBits, nodeBits uint8 }

const (
	seg6LocalActionEnd     = 1
	seg6LocalFlavors       = 11 // SEG6_LOCAL_FLAVORS
	seg6LocalFlvOperation  = 1
	seg6LocalFlvLCBlock    = 2
	seg6LocalFlvLCNodeFn   = 3
	seg6LocalFlvOpNextCSID = 4
)

func (e *nextCSIDEncap) Type() int { return nl.LWTUNNEL_ENCAP_SEG6_LOCAL }

func (e *nextCSIDEncap) Encode() ([]byte, error) {
	act := nl.NewRtAttr(nl.SEG6_LOCAL_ACTION, nl.Uint32Attr(seg6LocalActionEnd))
	flv := nl.NewRtAttr(seg6LocalFlavors|unix.NLA_F_NESTED, nil)
	flv.AddRtAttr(seg6LocalFlvOperation, nl.Uint32Attr(1<<seg6LocalFlvOpNextCSID))
	flv.AddRtAttr(seg6LocalFlvLCBlock, []byte{e.blockBits})
	flv.AddRtAttr(seg6LocalFlvLCNodeFn, []byte{e.nodeBits})
	return append(act.Serialize(), flv.Serialize()...), nil
}

func (e *nextCSIDEncap) Decode([]byte) error {
	return errors.New("nextCSIDEncap: decode not supported")
}
func (e *nextCSIDEncap) String() string {
	return fmt.Sprintf("action End flavors next-csid lblen %d nflen %d", e.blockBits, e.nodeBits)
}
func (e *nextCSIDEncap) Equal(o netlink.Encap) bool {
	x, ok := o.(*nextCSIDEncap)
	return ok && *x == *e
}

// SetLinkUp sets an interface of a namespace administratively up or down.
func SetLinkUp(ns, ifname string, up bool) error {
	h, err := Handle(ns)
	if err != nil {
		return err
	}
	defer h.Close()
	lk, err := h.LinkByName(ifname)
	if err != nil {
		return fmt.Errorf("%s/%s: %w", ns, ifname, err)
	}
	if up {
		return h.LinkSetUp(lk)
	}
	return h.LinkSetDown(lk)
}
