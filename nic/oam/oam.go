// Package oam is softmrc's uSID OAM: probe frames that follow one exact
// SRv6 uSID path and come back to their sender, for mrc-ping,
// mrc-traceroute and path probes. It is pure (no I/O, no clock): mrc-nicd
// builds and sends the frames through its AF_XDP ports and timestamps them.
//
// Frame (docs/wire-format.md, "OAM probe"):
//
//	Ethernet | outer IPv6 (next header 41, dst = uSID container)
//	         | inner IPv6 (next header UDP, src = sender, dst = target) | UDP (dst 4793) | OAM (48 bytes)
//
// IPv6-in-IPv6 like MRC's own SRv6 frames, so that the NICs' steering
// programs hand it to AF_XDP by the outer destination (the locator).
// The XDP switches forward it as any uN traffic (they look only at the
// destination); its last uSID is the downlink of the host it ends at, whose
// NIC steers the locator into AF_XDP, where mrc-nicd tells it from MRC
// traffic by the UDP port before the engine sees it.
package oam

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/softmrc/softmrc/internal/pathtmpl"
	"github.com/softmrc/softmrc/internal/wire"
)

// UDPPort is the UDP destination port of OAM probes.
const UDPPort = 4793

// Magic starts every OAM payload ("MRCO").
const Magic = 0x4d52434f

// Version of the OAM payload (2: 48 bytes, with the return container).
const Version = 2

// Kind is what a probe is.
type Kind uint8

const (
	// Loop: the path ends at the sender itself (host → T0 → host, host →
	// T0 → T1 → T0 → host, ...); nobody answers it.
	Loop Kind = 1
	// EchoRequest: the path ends at another host, whose NIC answers with
	// an EchoReply along its own path back (same plane and T1 index).
	EchoRequest Kind = 2
	// EchoReply answers an EchoRequest.
	EchoReply Kind = 3
	// Reflect: the path ends at another host, whose NIC sends the probe
	// back unanswered along the exact uSID path the sender put in
	// Probe.Return (host → … → another host → back, both halves chosen
	// by the sender), as Reflected.
	Reflect Kind = 4
	// Reflected is a Reflect probe on its way back to its sender.
	Reflected Kind = 5
)

func (k Kind) String() string {
	switch k {
	case Loop:
		return "loop"
	case EchoRequest:
		return "echo-request"
	case EchoReply:
		return "echo-reply"
	case Reflect:
		return "reflect"
	case Reflected:
		return "reflected"
	}
	return fmt.Sprintf("kind-%d", uint8(k))
}

// Probe is the OAM payload.
type Probe struct {
	Kind Kind
	// ID names the sender's probe (its pending table key); Seq is the
	// sequence number of mrc-ping.
	ID  uint32
	Seq uint32
	// EV is the EV whose path the probe follows (plane, T1 index).
	EV wire.EV
	// TxTime is the sender's clock at sending (ns), echoed unchanged.
	TxTime int64
	// Return is the uSID container a Reflect probe goes back on (the
	// outer destination the reflecting NIC gives it); zero otherwise.
	Return wire.Addr128
}

// Header sizes.
const (
	ethLen     = 14
	ipv6Len    = 40
	udpLen     = 8
	payloadLen = 48
	innerOff   = ethLen + ipv6Len
	udpOff     = innerOff + ipv6Len
	// FrameLen is the length of every OAM frame.
	FrameLen = udpOff + udpLen + payloadLen
)

// Net is the addressing of one probe frame.
type Net struct {
	SrcMAC, DstMAC [6]byte
	Src            wire.Addr128 // the sender's inner address on the plane (outer and inner source)
	Dst            wire.Addr128 // the uSID container (outer destination)
	Target         wire.Addr128 // inner destination: the host the probe ends at (zero: Src)
	HopLimit       uint8
}

// Build writes the frame into b (at least FrameLen bytes) and returns its
// length.
func Build(b []byte, n Net, p Probe) (int, error) {
	if len(b) < FrameLen {
		return 0, fmt.Errorf("oam: buffer of %d bytes, a probe needs %d", len(b), FrameLen)
	}
	b = b[:FrameLen]
	copy(b[0:6], n.DstMAC[:])
	copy(b[6:12], n.SrcMAC[:])
	binary.BigEndian.PutUint16(b[12:14], 0x86dd)
	if n.Target.IsZero() {
		n.Target = n.Src
	}
	hl := n.HopLimit
	if hl == 0 {
		hl = 64
	}
	// Traffic class 0 (best effort, never trimmed: the switch's trim
	// model only touches MRC's trimmable classes), flow label = the EV's
	// (as MRC packets carry it).
	ip := b[ethLen:]
	binary.BigEndian.PutUint32(ip[0:4], 6<<28|p.EV.FlowLabel()&0xFFFFF)
	binary.BigEndian.PutUint16(ip[4:6], ipv6Len+udpLen+payloadLen)
	ip[6], ip[7] = 41, hl
	n.Src.Put(ip[8:24])
	n.Dst.Put(ip[24:40])
	in := b[innerOff:]
	binary.BigEndian.PutUint32(in[0:4], 6<<28|p.EV.FlowLabel()&0xFFFFF)
	binary.BigEndian.PutUint16(in[4:6], udpLen+payloadLen)
	in[6], in[7] = 17, 64
	n.Src.Put(in[8:24])
	n.Target.Put(in[24:40])
	u := b[udpOff:]
	binary.BigEndian.PutUint16(u[0:2], p.EV.SrcPort())
	binary.BigEndian.PutUint16(u[2:4], UDPPort)
	binary.BigEndian.PutUint16(u[4:6], udpLen+payloadLen)
	binary.BigEndian.PutUint16(u[6:8], 0)
	pl := u[udpLen:]
	binary.BigEndian.PutUint32(pl[0:4], Magic)
	pl[4], pl[5], pl[6], pl[7] = Version, byte(p.Kind), 0, 0
	binary.BigEndian.PutUint32(pl[8:12], p.ID)
	binary.BigEndian.PutUint32(pl[12:16], p.Seq)
	binary.BigEndian.PutUint32(pl[16:20], uint32(p.EV))
	binary.BigEndian.PutUint64(pl[20:28], uint64(p.TxTime))
	binary.BigEndian.PutUint32(pl[28:32], 0)
	p.Return.Put(pl[32:48])
	binary.BigEndian.PutUint16(u[6:8], udpChecksum(in[8:40], u[:udpLen+payloadLen]))
	return FrameLen, nil
}

// udpChecksum is the IPv6 UDP checksum (pseudo-header of src and dst).
func udpChecksum(addrs, udp []byte) uint16 {
	var s uint32
	add := func(b []byte) {
		for i := 0; i+1 < len(b); i += 2 {
			s += uint32(b[i])<<8 | uint32(b[i+1])
		}
		if len(b)%2 == 1 {
			s += uint32(b[len(b)-1]) << 8
		}
	}
	add(addrs)
	s += uint32(len(udp)) + 17
	add(udp)
	for s > 0xffff {
		s = s&0xffff + s>>16
	}
	c := ^uint16(s)
	if c == 0 {
		c = 0xffff
	}
	return c
}

// Is reports cheaply whether frame is an OAM probe (IPv6 in IPv6, UDP,
// port 4793): the receive path's test before the MRC engine.
func Is(frame []byte) bool {
	return len(frame) >= FrameLen && frame[12] == 0x86 && frame[13] == 0xdd && frame[ethLen+6] == 41 &&
		frame[innerOff+6] == 17 && binary.BigEndian.Uint16(frame[udpOff+2:]) == UDPPort
}

// ErrNotProbe is returned by Parse for a frame that is not a valid probe.
var ErrNotProbe = errors.New("oam: not a probe")

// Parse reads a probe frame: the payload and the sender's address.
func Parse(frame []byte) (Probe, wire.Addr128, error) {
	if !Is(frame) {
		return Probe{}, wire.Addr128{}, ErrNotProbe
	}
	pl := frame[udpOff+udpLen:]
	if binary.BigEndian.Uint32(pl[0:4]) != Magic || pl[4] != Version {
		return Probe{}, wire.Addr128{}, fmt.Errorf("%w: magic %#x version %d", ErrNotProbe, binary.BigEndian.Uint32(pl[0:4]), pl[4])
	}
	p := Probe{Kind: Kind(pl[5]), ID: binary.BigEndian.Uint32(pl[8:12]), Seq: binary.BigEndian.Uint32(pl[12:16]),
		EV: wire.EV(binary.BigEndian.Uint32(pl[16:20])), TxTime: int64(binary.BigEndian.Uint64(pl[20:28])),
		Return: wire.Addr128FromSlice(pl[32:48])}
	if p.Kind < Loop || p.Kind > Reflected {
		return Probe{}, wire.Addr128{}, fmt.Errorf("%w: kind %d", ErrNotProbe, pl[5])
	}
	return p, wire.Addr128FromSlice(frame[innerOff+8 : innerOff+24]), nil
}

// Hop is one switch (or the destination host) of an EV's path.
type Hop struct {
	// Name is the testbed's switch name (p0-t0-1), or the peer host's.
	Name string
	// USID is the switch's uSID (for the last hop, the host's downlink).
	USID uint16
	// Via is the container that reaches this hop and comes back (Loop),
	// or, for the last hop, the container to the peer (EchoRequest).
	Via  []uint16
	Kind Kind
}

// Trace lists the hops of ev's path from this host to peer (a template
// row) and, per hop, the uSIDs of a probe cut there: the path up to the
// hop, then the same switches back in reverse, then self (this host's
// downlink uSID on ev's plane). The last hop is the peer itself, reached
// by an EchoRequest. The uSIDs must fit one container.
func Trace(t *pathtmpl.Template, peer int, ev wire.EV, self uint16) ([]Hop, error) {
	ps, err := t.Compile(peer)
	if err != nil {
		return nil, err
	}
	if int(ev.Plane()) >= t.Planes {
		return nil, fmt.Errorf("oam: EV %v is on plane %d, the template has planes 0..%d", ev, ev.Plane(), t.Planes-1)
	}
	u := ps.USIDs(ev)
	var hops []Hop
	for k := 1; k < len(u); k++ {
		via := append([]uint16(nil), u[:k]...)
		for i := k - 2; i >= 0; i-- {
			via = append(via, u[i])
		}
		via = append(via, self)
		if len(via) > t.Format().Slots() {
			return nil, fmt.Errorf("oam: the loop to hop %d needs %d uSIDs, a container holds %d", k, len(via), t.Format().Slots())
		}
		hops = append(hops, Hop{Name: SwitchName(u[k-1]), USID: u[k-1], Via: via, Kind: Loop})
	}
	hops = append(hops, Hop{Name: t.Peers[peer].Name, USID: u[len(u)-1], Via: append([]uint16(nil), u...), Kind: EchoRequest})
	return hops, nil
}

// SwitchName names the switch of a uSID by the allocation of
// docs/conventions.md: T1 j = 0x01+j, T0 k = 0x40+k, the plane in the low
// byte (the testbed's names, p<p>-t1-<j>, p<p>-t0-<k>).
func SwitchName(u uint16) string {
	idx, p := int(u>>8), int(u&0xff)
	switch {
	case idx >= 0x01 && idx < 0x40:
		return fmt.Sprintf("p%d-t1-%d", p, idx-0x01)
	case idx >= 0x40 && idx < 0xc0:
		return fmt.Sprintf("p%d-t0-%d", p, idx-0x40)
	}
	return fmt.Sprintf("usid-%04x", u)
}

// RoundTrip is the exact path of a Reflect probe from this host to peer
// and back: out along ev's path (plane, T1 index) to the peer's downlink,
// back from the peer on the same plane through T1 index back (the T0s'
// uplinks to a T1 have the same index from either side), ending at self
// (this host's downlink uSID on that plane). Each half is one container;
// the peer's NIC swaps the second in (docs/wire-format.md).
func RoundTrip(t *pathtmpl.Template, peer int, ev wire.EV, back uint8, self uint16) (out, ret []uint16, err error) {
	ps, err := t.Compile(peer)
	if err != nil {
		return nil, nil, err
	}
	if int(ev.Plane()) >= t.Planes {
		return nil, nil, fmt.Errorf("oam: EV %v is on plane %d, the template has planes 0..%d", ev, ev.Plane(), t.Planes-1)
	}
	if int(back) >= t.T1Count {
		return nil, nil, fmt.Errorf("oam: return T1 index %d, the template has 0..%d", back, t.T1Count-1)
	}
	out = ps.USIDs(ev)
	// The return half is the path to the peer through T1 back, reversed:
	// without the peer's own uSID, then self.
	u := ps.USIDs(wire.MakeEV(ev.Plane(), back, 0))
	for i := len(u) - 2; i >= 0; i-- {
		ret = append(ret, u[i])
	}
	ret = append(ret, self)
	if n := t.Format().Slots(); len(out) > n || len(ret) > n {
		return nil, nil, fmt.Errorf("oam: the round trip needs %d and %d uSIDs, a container holds %d", len(out), len(ret), n)
	}
	return out, ret, nil
}

// InBlock reports whether container a lies in the uSID block (its first
// bits bits equal block's): a reflecting NIC sends a probe only to
// containers of its own fabric.
func InBlock(a, block wire.Addr128, bits int) bool {
	var x, y [16]byte
	a.Put(x[:])
	block.Put(y[:])
	for i := 0; i < bits; i++ {
		if (x[i/8]>>(7-i%8))&1 != (y[i/8]>>(7-i%8))&1 {
			return false
		}
	}
	return bits > 0 && bits <= 128
}
