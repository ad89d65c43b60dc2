// Package probe sends and captures raw Ethernet frames on interfaces inside
// testbed namespaces (AF_PACKET), and builds the IPv6-in-IPv6 / UDP 4791
// probe frames the testbed uses to check every path of a fabric without a NIC
// daemon.
package probe

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"time"

	"golang.org/x/sys/unix"

	"github.com/softmrc/softmrc/testbed/netns"

	"github.com/softmrc/softmrc/internal/wire"
)

// Frame describes one probe.
type Frame struct {
	DstMAC, SrcMAC wire.MAC
	// Outer is the SRv6 outer header (DA = uSID container); when Outer.Dst is
	// invalid the frame is plain IPv6 (ecmp mode).
	OuterSrc, OuterDst netip.Addr
	InnerSrc, InnerDst netip.Addr
	HopLimit           uint8
	// EV goes into the flow label (bits 31..16) and UDP source port (15..0).
	EV uint32
	// ID is a 64-bit tag in the payload that identifies the probe.
	ID uint64
}

// UDPPort is the RoCEv2 UDP destination port.
const UDPPort = 4791

const magic = 0x6d726370 // "mrcp"

// Build returns the frame bytes.
func (f *Frame) Build() []byte {
	payload := make([]byte, 16)
	binary.BigEndian.PutUint32(payload, magic)
	binary.BigEndian.PutUint64(payload[8:], f.ID)
	udp := make([]byte, 8, 8+len(payload))
	binary.BigEndian.PutUint16(udp, uint16(f.EV))
	binary.BigEndian.PutUint16(udp[2:], UDPPort)
	binary.BigEndian.PutUint16(udp[4:], uint16(8+len(payload)))
	udp = append(udp, payload...)
	hl := f.HopLimit
	if hl == 0 {
		hl = 64
	}
	pkt := ipv6(f.InnerSrc, f.InnerDst, unix.IPPROTO_UDP, hl, f.EV, udp)
	if f.OuterDst.IsValid() {
		pkt = ipv6(f.OuterSrc, f.OuterDst, unix.IPPROTO_IPV6, hl, f.EV, pkt)
	}
	eth := make([]byte, 14, 14+len(pkt))
	copy(eth, f.DstMAC[:])
	copy(eth[6:], f.SrcMAC[:])
	binary.BigEndian.PutUint16(eth[12:], unix.ETH_P_IPV6)
	return append(eth, pkt...)
}

func ipv6(src, dst netip.Addr, nh, hl uint8, ev uint32, payload []byte) []byte {
	b := make([]byte, 40, 40+len(payload))
	// version 6, traffic class 0, flow label = EV bits 31..16 (top 4 bits 0).
	binary.BigEndian.PutUint32(b, 6<<28|(ev>>16)&0xffff)
	binary.BigEndian.PutUint16(b[4:], uint16(len(payload)))
	b[6], b[7] = nh, hl
	s, d := src.As16(), dst.As16()
	copy(b[8:], s[:])
	copy(b[24:], d[:])
	return append(b, payload...)
}

// Seen is a captured probe.
type Seen struct {
	ID       uint64
	OuterDst netip.Addr // invalid for plain IPv6
	InnerDst netip.Addr
	HopLimit uint8 // of the outermost header
	SrcMAC   wire.MAC
	DstMAC   wire.MAC
}

// Parse decodes a probe frame; ok is false for anything else.
func Parse(b []byte) (s Seen, ok bool) {
	if len(b) < 14+40 || binary.BigEndian.Uint16(b[12:]) != unix.ETH_P_IPV6 {
		return s, false
	}
	s.DstMAC, s.SrcMAC = wire.MAC(b[0:6]), wire.MAC(b[6:12])
	ip := b[14:]
	s.HopLimit = ip[7]
	if ip[6] == unix.IPPROTO_IPV6 {
		s.OuterDst = netip.AddrFrom16([16]byte(ip[24:40]))
		ip = ip[40:]
		if len(ip) < 40 {
			return s, false
		}
	}
	if ip[6] != unix.IPPROTO_UDP || len(ip) < 40+8+16 {
		return s, false
	}
	s.InnerDst = netip.AddrFrom16([16]byte(ip[24:40]))
	u := ip[40:]
	if binary.BigEndian.Uint16(u[2:]) != UDPPort || binary.BigEndian.Uint32(u[8:]) != magic {
		return s, false
	}
	s.ID = binary.BigEndian.Uint64(u[16:])
	return s, true
}

// Socket is an AF_PACKET socket bound to one interface of a namespace.
type Socket struct {
	fd      int
	ifindex int
}

// Open opens a packet socket on ns/ifname. Capturing starts immediately.
func Open(ns, ifname string) (*Socket, error) {
	s := &Socket{fd: -1}
	err := netns.Do(ns, func() error {
		ifi, err := net.InterfaceByName(ifname)
		if err != nil {
			return err
		}
		s.ifindex = ifi.Index
		fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, int(htons(unix.ETH_P_ALL)))
		if err != nil {
			return err
		}
		if err := unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ALL), Ifindex: ifi.Index}); err != nil {
			unix.Close(fd)
			return err
		}
		s.fd = fd
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("packet socket on %s/%s: %w", ns, ifname, err)
	}
	return s, nil
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

// Send transmits one frame.
func (s *Socket) Send(frame []byte) error {
	return unix.Sendto(s.fd, frame, 0, &unix.SockaddrLinklayer{Ifindex: s.ifindex, Halen: 6})
}

// Recv returns incoming probes until want returns true for one of them or
// the deadline passes; outgoing frames are ignored.
func (s *Socket) Recv(deadline time.Time, want func(Seen) bool) (Seen, error) {
	buf := make([]byte, 4096)
	for {
		left := time.Until(deadline)
		if left <= 0 {
			return Seen{}, ErrTimeout
		}
		tv := unix.NsecToTimeval(left.Nanoseconds())
		if err := unix.SetsockoptTimeval(s.fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
			return Seen{}, err
		}
		n, from, err := unix.Recvfrom(s.fd, buf, 0)
		if errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return Seen{}, err
		}
		if ll, ok := from.(*unix.SockaddrLinklayer); ok && ll.Pkttype == unix.PACKET_OUTGOING {
			continue
		}
		if seen, ok := Parse(buf[:n]); ok && want(seen) {
			return seen, nil
		}
	}
}

// ErrTimeout reports that no matching probe arrived in time.
var ErrTimeout = errors.New("probe: nothing matching arrived before the deadline")

// Close closes the socket.
func (s *Socket) Close() error { return unix.Close(s.fd) }
