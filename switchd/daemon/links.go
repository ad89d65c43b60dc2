package daemon

import (
	"fmt"
	"net"
	"net/netip"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
)

// Link is what the daemon needs to know about one interface.
type Link struct {
	Index int
	MAC   net.HardwareAddr
	Up    bool
	// Peer is the ifindex of the other end of a veth when that end is in the
	// same network namespace; 0 otherwise (not a veth, or the peer is in
	// another namespace, where its owner must attach XDP or enable GRO).
	Peer int
	// PeerName names Peer.
	PeerName string
	// PeerHasXDP: Peer already runs an XDP program of its own.
	PeerHasXDP bool
	// PeerNetNS is true when the link is a veth whose peer lives in another
	// namespace.
	PeerNetNS bool
	// XDP is the mode of the XDP program on the link: "native", "generic",
	// "offload" or "" (none).
	XDP string
}

// Links looks up and changes interfaces in the daemon's network namespace.
type Links interface {
	Lookup(name string) (Link, error)
	SetUp(name string, up bool) error
	Addrs(name string) ([]netip.Addr, error)
}

// Netlink is the real Links.
type Netlink struct{}

// Lookup finds interface name and, for a veth, its peer.
func (Netlink) Lookup(name string) (Link, error) {
	l, err := netlink.LinkByName(name)
	if err != nil {
		return Link{}, fmt.Errorf("interface %q: %w (does it exist in this network namespace?)", name, err)
	}
	a := l.Attrs()
	out := Link{Index: a.Index, MAC: a.HardwareAddr, Up: a.Flags&net.FlagUp != 0}
	if a.Xdp != nil && a.Xdp.Attached {
		out.XDP = xdpMode(a.Xdp.AttachMode)
	}
	if l.Type() != "veth" {
		return out, nil
	}
	// IFLA_LINK of a veth is the peer's ifindex, in the namespace named by
	// IFLA_LINK_NETNSID when that attribute is present.
	if a.NetNsID >= 0 {
		out.PeerNetNS = true
		return out, nil
	}
	if a.ParentIndex <= 0 {
		return out, nil
	}
	p, err := netlink.LinkByIndex(a.ParentIndex)
	if err != nil {
		// The peer is not visible here after all.
		out.PeerNetNS = true
		return out, nil
	}
	out.Peer = p.Attrs().Index
	out.PeerName = p.Attrs().Name
	out.PeerHasXDP = p.Attrs().Xdp != nil && p.Attrs().Xdp.Attached
	return out, nil
}

func xdpMode(m uint32) string {
	switch m {
	case nl.XDP_ATTACHED_DRV:
		return "native"
	case nl.XDP_ATTACHED_SKB:
		return "generic"
	case nl.XDP_ATTACHED_HW:
		return "offload"
	}
	return "yes"
}

// SetUp sets the administrative state of interface name.
func (Netlink) SetUp(name string, up bool) error {
	l, err := netlink.LinkByName(name)
	if err != nil {
		return fmt.Errorf("interface %q: %w", name, err)
	}
	if up {
		err = netlink.LinkSetUp(l)
	} else {
		err = netlink.LinkSetDown(l)
	}
	if err != nil {
		return fmt.Errorf("set %s up=%v: %w", name, up, err)
	}
	return nil
}

// Addrs lists the IPv6 addresses of interface name.
func (Netlink) Addrs(name string) ([]netip.Addr, error) {
	l, err := netlink.LinkByName(name)
	if err != nil {
		return nil, fmt.Errorf("interface %q: %w", name, err)
	}
	as, err := netlink.AddrList(l, netlink.FAMILY_V6)
	if err != nil {
		return nil, fmt.Errorf("addresses of %s: %w", name, err)
	}
	var out []netip.Addr
	for _, a := range as {
		if ip, ok := netip.AddrFromSlice(a.IP); ok {
			out = append(out, ip.Unmap())
		}
	}
	return out, nil
}
