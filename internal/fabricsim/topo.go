package fabricsim

import (
	"fmt"
	"net/netip"

	"github.com/softmrc/softmrc/internal/pathtmpl"
	"github.com/softmrc/softmrc/internal/wire"
)

// Mode is the fabric forwarding mode.
type Mode uint8

// Forwarding modes (the same two as the testbed and the XDP switch).
const (
	// ModeSRv6 forwards by the uSID container in the outermost destination
	// (RFC 9800 NEXT-CSID uN, then a static /48 FIB).
	ModeSRv6 Mode = iota
	// ModeECMP forwards plain IPv6 by destination; a T0 hashes a packet for
	// another T0 over its uplinks.
	ModeECMP
)

func (m Mode) String() string {
	if m == ModeECMP {
		return "ecmp"
	}
	return "srv6"
}

// LinkConfig is the model of one class of links (both directions alike) and
// of the egress virtual queue at each end of it.
type LinkConfig struct {
	// RateBps is the line rate in bit/s.
	RateBps float64
	// Delay is the one-way propagation delay in ns.
	Delay int64
	// ECNBytes: CE is set on an ECT packet when the data backlog after it
	// was queued exceeds this (fabric-facing ports only). 0 = no marking.
	ECNBytes int
	// TrimBytes: a trimmable data packet that would make the backlog exceed
	// this is trimmed instead (wire.Trim). 0 = no trimming.
	TrimBytes int
	// BufferBytes: a packet that would make the backlog exceed this is
	// dropped. 0 = unlimited.
	BufferBytes int
	// XDP models mrc-switchd's egress port model instead of a real queue:
	// XDP cannot delay a frame, so admission, marks and trims are decided
	// from a virtual queue drained at RateBps (docs/switch.md) while every
	// frame goes on at once, serialised at WireRateBps (a veth). The NIC
	// end of a host link then has no rate of its own either: the engine's
	// port pacing (mrc.Config.PortRate) is the NIC's rate, as mrc-nicd's
	// is. The RTT then carries no queueing delay at all, as on the testbed.
	XDP bool
	// WireRateBps is the rate frames are serialised at with XDP (default
	// 10 Gbit/s).
	WireRateBps float64
	// Jitter adds a uniformly random delay in [0, Jitter) ns to every frame
	// (order kept per port): the scheduling noise of the testbed's
	// processes, which its RTT samples carry.
	Jitter int64
	// HostECN lets a host-facing port mark CE above ECNBytes, as
	// mrc-switchd's host_ecn option does (by default only fabric ports mark).
	HostECN bool
}

// Config describes a fabric. Zero fields take the defaults of DefaultConfig.
type Config struct {
	Mode       Mode
	Planes     int
	T0s        int // T0 switches per plane
	T1s        int // T1 switches per plane (every T0 links to every T1)
	HostsPerT0 int
	// Block is the uSID locator block (F3216: the top 32 bits are used).
	Block wire.Addr128
	// Run is the <run> field of the host addresses fd00:<run>:<plane>::<host>.
	Run uint16
	// Host applies to NIC-T0 links (and the NIC's own egress queue, where only
	// BufferBytes is used: a NIC neither marks nor trims). Fabric applies to
	// T0-T1 links.
	Host, Fabric LinkConfig
	// NICBufferBytes bounds the NIC egress queue of each host port
	// (frames emitted by the host wait there for the line). 0 = 16 MiB.
	NICBufferBytes int
	// NICTxRingBytes: while a host's NIC queues hold at least this many
	// bytes its Poll is held back, as a full TX ring holds back the daemon.
	// 0 = 8 KiB per plane. Keep it shallow: a frame's EV (and so its port)
	// is chosen when it is emitted, so deep per-port FIFOs reorder packets
	// across planes by their drain time, which a hardware NIC (building a
	// packet when the port can take it) does not do. See docs/fabricsim.md.
	NICTxRingBytes int
	// WireOverhead is added to every frame's length for serialization: the
	// Ethernet preamble, start delimiter, FCS and inter-frame gap the frames
	// in this simulator do not carry. Default 24.
	WireOverhead int
	// Seed drives every random choice of the simulator (random loss).
	Seed uint64
}

// DefaultConfig is a 4-plane, 2 T0 × 4 T1 fabric with 2 hosts per T0 and
// 100 Gbit/s links of 1 µs, thresholds sized for a ~10 µs base RTT.
func DefaultConfig() Config {
	return Config{
		Mode: ModeSRv6, Planes: 4, T0s: 2, T1s: 4, HostsPerT0: 2,
		Block:  DefaultBlock,
		Run:    1,
		Host:   LinkConfig{RateBps: 100e9, Delay: 1000, ECNBytes: 0, TrimBytes: 64 << 10, BufferBytes: 512 << 10},
		Fabric: LinkConfig{RateBps: 100e9, Delay: 1000, ECNBytes: 32 << 10, TrimBytes: 64 << 10, BufferBytes: 512 << 10},
	}
}

// DefaultBlock is 5f00:1::/32, the testbed's block (docs/conventions.md).
var DefaultBlock = wire.Addr128FromNetip(netip.MustParseAddr("5f00:1::"))

func (c *Config) fill() error {
	d := DefaultConfig()
	if c.Planes == 0 {
		c.Planes = d.Planes
	}
	if c.T0s == 0 {
		c.T0s = d.T0s
		if c.T1s == 0 {
			c.T1s = d.T1s
		}
	}
	if c.HostsPerT0 == 0 {
		c.HostsPerT0 = d.HostsPerT0
	}
	if c.Block.IsZero() {
		c.Block = d.Block
	}
	if c.Host.RateBps == 0 {
		c.Host = d.Host
	}
	if c.Fabric.RateBps == 0 {
		c.Fabric = d.Fabric
	}
	for _, l := range []*LinkConfig{&c.Host, &c.Fabric} {
		if l.XDP && l.WireRateBps == 0 {
			l.WireRateBps = 10e9
		}
	}
	if c.NICBufferBytes == 0 {
		c.NICBufferBytes = 16 << 20
	}
	if c.NICTxRingBytes == 0 {
		c.NICTxRingBytes = 8 << 10 * c.Planes
	}
	if c.WireOverhead == 0 {
		c.WireOverhead = 24
	}
	switch {
	case c.Planes < 1 || c.Planes > wire.MaxPlanes:
		return fmt.Errorf("fabricsim: %d planes: want 1..%d (the EV plane field is 4 bits)", c.Planes, wire.MaxPlanes)
	case c.T0s < 1 || c.T0s > pathtmpl.MaxT0s:
		return fmt.Errorf("fabricsim: %d T0s per plane: want 1..%d (the uSID allocation, docs/conventions.md)", c.T0s, pathtmpl.MaxT0s)
	case c.T1s < 0 || c.T1s > pathtmpl.MaxT1s:
		return fmt.Errorf("fabricsim: %d T1s per plane: want 0..%d (the uSID allocation, docs/conventions.md)", c.T1s, pathtmpl.MaxT1s)
	case c.T1s == 0 && c.T0s > 1:
		return fmt.Errorf("fabricsim: %d T0s need at least one T1 per plane", c.T0s)
	case c.HostsPerT0 < 1 || c.HostsPerT0 > pathtmpl.MaxDownlinks:
		return fmt.Errorf("fabricsim: %d hosts per T0: want 1..%d (the uSID allocation, docs/conventions.md)", c.HostsPerT0, pathtmpl.MaxDownlinks)
	case c.Host.RateBps < 0 || c.Fabric.RateBps < 0 || c.Host.Delay < 0 || c.Fabric.Delay < 0:
		return fmt.Errorf("fabricsim: negative link rate or delay")
	case c.Host.Jitter < 0 || c.Fabric.Jitter < 0 || c.Host.WireRateBps < 0 || c.Fabric.WireRateBps < 0:
		return fmt.Errorf("fabricsim: negative jitter or wire rate")
	}
	return nil
}

// Hosts is the number of hosts.
func (c *Config) Hosts() int { return c.T0s * c.HostsPerT0 }

// Addressing exactly as docs/conventions.md (and the testbed) derive it; the
// uSIDs come from pathtmpl (T1USID, T0USID, DownlinkUSID).

// HostAddr is the address of host h's NIC port in plane p, as the testbed
// plans it (testbed/plan.HostAddr): fd00:<run>:<plane>:<h+1>::1 in the /64
// fd00:<run>:<plane>:<h+1>::/64 (host numbers on the wire start at 1).
func (c *Config) HostAddr(h int, p wire.Plane) wire.Addr128 {
	var b [16]byte
	b[0], b[1] = 0xfd, 0x00
	b[2], b[3] = byte(c.Run>>8), byte(c.Run)
	b[5] = byte(p)
	b[6], b[7] = byte((h+1)>>8), byte(h+1)
	b[15] = 1
	return wire.Addr128From16(b)
}

// HostT0 is the T0 number host h hangs off (in every plane) and its downlink.
func (c *Config) HostT0(h int) (t0, downlink int) { return h / c.HostsPerT0, h % c.HostsPerT0 }

// PathDA is the SRv6 outer destination of a packet from host src to host dst
// in plane p through T1 number t1: [srcT0, T1, dstT0, downlink] across T1s,
// [T0, downlink] when both hosts hang off the same T0 (t1 is then unused).
func (c *Config) PathDA(p wire.Plane, src, t1, dst int) wire.Addr128 {
	s0, _ := c.HostT0(src)
	d0, dl := c.HostT0(dst)
	var a wire.Addr128
	if s0 == d0 {
		a, _ = wire.F3216.Build(c.Block, pathtmpl.T0USID(s0, p), pathtmpl.DownlinkUSID(dl, p))
	} else {
		a, _ = wire.F3216.Build(c.Block, pathtmpl.T0USID(s0, p), pathtmpl.T1USID(t1, p), pathtmpl.T0USID(d0, p), pathtmpl.DownlinkUSID(dl, p))
	}
	return a
}

// prefix48 is block:usid::/48.
func (c *Config) prefix48(usid wire.USID) netip.Prefix { return wire.F3216.Prefix(c.Block, usid) }

// hostPrefix is the /64 of host h in plane p (ECMP mode routes).
func (c *Config) hostPrefix(h int, p wire.Plane) netip.Prefix {
	pf, _ := c.HostAddr(h, p).Netip().Prefix(64)
	return pf
}
