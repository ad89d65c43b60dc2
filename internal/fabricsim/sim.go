// Package fabricsim is a packet-level discrete-event simulator of a
// multi-plane two-tier Clos fabric (P planes; T0 and T1 switches per plane;
// hosts with one NIC port per plane) that carries real softmrc frames between
// real transport engines plugged in as hosts.
//
// Time is an int64 count of nanoseconds. Everything happens in one event
// heap ordered by (time, sequence number), and the only randomness is a PCG
// source seeded from Config.Seed, so a run is a pure function of its
// configuration, hosts and seed: TraceHash is the same bit for bit.
//
// Links have a rate and a propagation delay; each end has an egress virtual
// queue (two classes, serialization at line rate) whose admission — ECN
// marking, trimming, drop — and the switches' forwarding are the reference
// model in switch.go. Faults: link down (visible to a NIC as carrier loss),
// blackhole, random loss, flap schedules, switch data-plane hang. See
// docs/fabricsim.md.
package fabricsim

import (
	"fmt"
	"hash/crc32"
	"math"
	"math/rand/v2"

	"github.com/softmrc/softmrc/internal/pathtmpl"
	"github.com/softmrc/softmrc/internal/wire"
)

// Host is a NIC with one port per plane, driven by the simulator. It is
// what the MRC engine satisfies (through a thin adapter if need be).
//
// frame passed to HandlePacket is only valid during the call. emit copies.
// NextDeadline returns the next time the host wants Poll to run even if
// nothing arrives, or a negative value / math.MaxInt64 for none.
type Host interface {
	HandlePacket(now int64, port wire.Plane, frame []byte)
	Poll(now int64, emit func(port wire.Plane, frame []byte))
	NextDeadline() int64
	// PortDown and PortUp report carrier changes of the host's own port p.
	PortDown(now int64, p wire.Plane)
	PortUp(now int64, p wire.Plane)
}

// NodeKind tells hosts and the two switch tiers apart.
type NodeKind uint8

// Node kinds.
const (
	KindHost NodeKind = iota
	KindT0
	KindT1
)

// Counters is one port's counters, indexed by Reason.
type Counters [NumReasons]uint64

type packet struct {
	buf []byte
	n   int
}

// Port is one end of a link: the egress queue toward the peer.
type Port struct {
	Name  string
	node  *node
	Index int // port index on its node (for a host: the plane)
	peer  *Port
	link  *Link
	cfg   LinkConfig // thresholds of this end's egress queue
	// hostFacing: a switch port leading to a NIC.
	hostFacing bool
	nic        bool // a NIC port (egress of a host)

	hi, lo  fifo
	backlog int
	busy    bool
	onWire  *packet
	Ctr     Counters
	// MaxBacklog is the largest backlog seen (bytes).
	MaxBacklog int
	// With LinkConfig.XDP: the virtual queue (bytes) at vqAt.
	vq   float64
	vqAt int64
	// lastArrive keeps frames in order under LinkConfig.Jitter.
	lastArrive int64
}

// xdp reports whether the port decides from a virtual queue (a switch port
// of an XDP link); serialisation is at the wire rate on both ends.
func (p *Port) xdp() bool { return p.cfg.XDP && !p.nic }

// drainVQ drains the virtual queue to now at the port's capacity.
func (p *Port) drainVQ(now int64) {
	p.vq = max(0, p.vq-float64(now-p.vqAt)*p.cfg.RateBps/8e9)
	p.vqAt = now
}

// Backlog is the number of bytes waiting in the port's queue.
func (p *Port) Backlog() int { return p.backlog }

// Link is a full-duplex link between two ports. Faults apply to both
// directions.
type Link struct {
	Name      string
	A, B      *Port
	down      bool
	blackhole bool
	loss      float64
	sim       *Sim
}

type node struct {
	kind  NodeKind
	name  string
	plane wire.Plane
	index int
	ports []*Port
	sw    *SwitchModel
	hung  bool
	ctr   Counters // node-level drops (parse, route, hop limit, hung)

	// hosts
	host    Host
	wakeAt  int64
	wakeGen uint64
	// txBacklog is the bytes waiting in the host's NIC queues; txBlocked
	// says Poll was held back because they exceeded Config.NICTxRingBytes.
	txBacklog int
	txBlocked bool
}

// Switch is a handle on one switch for faults and counters.
type Switch struct {
	n *node
}

// Name is e.g. "p1.t0.0".
func (s Switch) Name() string { return s.n.name }

// Model is the switch's forwarding state.
func (s Switch) Model() *SwitchModel { return s.n.sw }

// Ports are the switch's ports in index order.
func (s Switch) Ports() []*Port { return s.n.ports }

// Counters are the switch's node-level counters (forwarding drops).
func (s Switch) Counters() Counters { return s.n.ctr }

// SetHung hangs (or un-hangs) the switch's data plane: every frame arriving
// is dropped while its links stay up.
func (s Switch) SetHung(h bool) { s.n.hung = h }

// Sim is one simulation.
type Sim struct {
	cfg   Config
	now   int64
	seq   uint64
	evs   evHeap
	rng   *rand.Rand
	hosts []*node
	t0    [][]*node // [plane][k]
	t1    [][]*node // [plane][j]
	links []*Link
	hostL [][]*Link // [host][plane]
	fabL  [][][]*Link
	free  []*packet

	trace   uint64
	nEvents uint64
	// Trace, when set, sees every event (for debugging).
	Trace func(t int64, what string, port *Port, frame []byte)
}

// New builds the fabric of cfg. Attach hosts with SetHost, then run it with
// RunUntil or RunWhile.
func New(cfg Config) (*Sim, error) {
	if err := cfg.fill(); err != nil {
		return nil, err
	}
	s := &Sim{cfg: cfg, rng: rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x9e3779b97f4a7c15)), trace: 14695981039346656037}
	P, H := cfg.Planes, cfg.Hosts()
	for h := 0; h < H; h++ {
		s.hosts = append(s.hosts, &node{kind: KindHost, name: fmt.Sprintf("h%d", h), index: h, wakeAt: -1})
	}
	s.hostL = make([][]*Link, H)
	s.t0 = make([][]*node, P)
	s.t1 = make([][]*node, P)
	s.fabL = make([][][]*Link, P)
	for pi := 0; pi < P; pi++ {
		p := wire.Plane(pi)
		for k := 0; k < cfg.T0s; k++ {
			m := &SwitchModel{Mode: cfg.Mode, Block: cfg.Block, USIDs: []wire.USID{pathtmpl.T0USID(k, p)}}
			s.t0[pi] = append(s.t0[pi], &node{kind: KindT0, name: fmt.Sprintf("p%d.t0.%d", pi, k), plane: p, index: k, sw: m})
		}
		for j := 0; j < cfg.T1s; j++ {
			m := &SwitchModel{Mode: cfg.Mode, Block: cfg.Block, USIDs: []wire.USID{pathtmpl.T1USID(j, p)}}
			s.t1[pi] = append(s.t1[pi], &node{kind: KindT1, name: fmt.Sprintf("p%d.t1.%d", pi, j), plane: p, index: j, sw: m})
		}
		// T0 ports: 0..HostsPerT0-1 downlinks, then one uplink per T1.
		for k, t0 := range s.t0[pi] {
			for d := 0; d < cfg.HostsPerT0; d++ {
				h := s.hosts[k*cfg.HostsPerT0+d]
				for len(h.ports) <= pi {
					h.ports = append(h.ports, nil)
				}
				l := s.connect(h, pi, t0, d, cfg.Host)
				s.hostL[h.index] = append(s.hostL[h.index], l)
			}
		}
		s.fabL[pi] = make([][]*Link, cfg.T0s)
		for k, t0 := range s.t0[pi] {
			for j, t1 := range s.t1[pi] {
				l := s.connect(t0, cfg.HostsPerT0+j, t1, k, cfg.Fabric)
				s.fabL[pi][k] = append(s.fabL[pi][k], l)
			}
		}
		s.installFIB(p)
	}
	return s, nil
}

// connect links port ai of a to port bi of b.
func (s *Sim) connect(a *node, ai int, b *node, bi int, lc LinkConfig) *Link {
	pa := &Port{node: a, Index: ai, cfg: lc, Name: fmt.Sprintf("%s/%d", a.name, ai)}
	pb := &Port{node: b, Index: bi, cfg: lc, Name: fmt.Sprintf("%s/%d", b.name, bi)}
	if a.kind == KindHost {
		pa.nic = true
		pa.cfg.ECNBytes, pa.cfg.TrimBytes, pa.cfg.BufferBytes = 0, 0, s.cfg.NICBufferBytes
		pb.hostFacing = true
	}
	pa.peer, pb.peer = pb, pa
	l := &Link{Name: pa.Name + "<->" + pb.Name, A: pa, B: pb, sim: s}
	pa.link, pb.link = l, l
	for len(a.ports) <= ai {
		a.ports = append(a.ports, nil)
	}
	for len(b.ports) <= bi {
		b.ports = append(b.ports, nil)
	}
	a.ports[ai], b.ports[bi] = pa, pb
	s.links = append(s.links, l)
	return l
}

// installFIB programs the static FIBs of plane p (docs/conventions.md).
func (s *Sim) installFIB(p wire.Plane) {
	c := &s.cfg
	pi := int(p)
	for k, t0 := range s.t0[pi] {
		m := t0.sw
		for d := 0; d < c.HostsPerT0; d++ {
			h := k*c.HostsPerT0 + d
			if c.Mode == ModeSRv6 {
				m.AddRoute(Route{Prefix: c.prefix48(pathtmpl.DownlinkUSID(d, p)), Port: d, Group: -1})
			} else {
				m.AddRoute(Route{Prefix: c.hostPrefix(h, p), Port: d, Group: -1})
			}
		}
		var uplinks []int
		for j := 0; j < c.T1s; j++ {
			uplinks = append(uplinks, c.HostsPerT0+j)
		}
		if len(uplinks) > 0 {
			m.Groups = append(m.Groups, uplinks)
		}
		if c.Mode == ModeSRv6 {
			for j := 0; j < c.T1s; j++ {
				m.AddRoute(Route{Prefix: c.prefix48(pathtmpl.T1USID(j, p)), Port: c.HostsPerT0 + j, Group: -1})
			}
			// Another T0's uN without a T1 in front of it: any T1 (as
			// the testbed plans it); the EV-named paths never need it.
			for k2 := 0; k2 < c.T0s && len(uplinks) > 0; k2++ {
				if k2 != k {
					m.AddRoute(Route{Prefix: c.prefix48(pathtmpl.T0USID(k2, p)), Port: -1, Group: 0})
				}
			}
		} else if len(uplinks) > 0 {
			for h := 0; h < c.Hosts(); h++ {
				if h/c.HostsPerT0 != k {
					m.AddRoute(Route{Prefix: c.hostPrefix(h, p), Port: -1, Group: 0})
				}
			}
		}
	}
	for _, t1 := range s.t1[pi] {
		m := t1.sw
		for k := 0; k < c.T0s; k++ {
			if c.Mode == ModeSRv6 {
				m.AddRoute(Route{Prefix: c.prefix48(pathtmpl.T0USID(k, p)), Port: k, Group: -1})
			} else {
				for d := 0; d < c.HostsPerT0; d++ {
					m.AddRoute(Route{Prefix: c.hostPrefix(k*c.HostsPerT0+d, p), Port: k, Group: -1})
				}
			}
		}
	}
}

// Config is the filled-in configuration.
func (s *Sim) Config() *Config { return &s.cfg }

// Now is the current simulated time (ns).
func (s *Sim) Now() int64 { return s.now }

// SetHost plugs h in as host number i and schedules its first Poll now.
func (s *Sim) SetHost(i int, h Host) {
	n := s.hosts[i]
	n.host = h
	s.wake(n, s.now)
}

// Wake schedules host i's Poll now: call it after giving the host work from
// outside the simulator (posting a request in an At callback).
func (s *Sim) Wake(i int) { s.wake(s.hosts[i], s.now) }

// T0 returns T0 number k of plane p.
func (s *Sim) T0(p wire.Plane, k int) Switch { return Switch{s.t0[p][k]} }

// T1 returns T1 number j of plane p.
func (s *Sim) T1(p wire.Plane, j int) Switch { return Switch{s.t1[p][j]} }

// HostLink is the link between host h's NIC port in plane p and its T0.
// Link.A is the NIC port.
func (s *Sim) HostLink(h int, p wire.Plane) *Link { return s.hostL[h][p] }

// FabricLink is the link between T0 k and T1 j of plane p (A is the T0 end).
func (s *Sim) FabricLink(p wire.Plane, k, j int) *Link { return s.fabL[p][k][j] }

// Links lists every link.
func (s *Sim) Links() []*Link { return s.links }

// HostPort is host h's NIC port in plane p.
func (s *Sim) HostPort(h int, p wire.Plane) *Port { return s.hosts[h].ports[p] }

// Ports lists every port (both ends of every link, in link order).
func (s *Sim) Ports() []*Port {
	ps := make([]*Port, 0, 2*len(s.links))
	for _, l := range s.links {
		ps = append(ps, l.A, l.B)
	}
	return ps
}

// String lists the non-zero counters, e.g. "rx=10 tx=10 drop_loss=1".
func (c Counters) String() string {
	var b []byte
	for r := Reason(0); r < NumReasons; r++ {
		if c[r] != 0 {
			if len(b) > 0 {
				b = append(b, ' ')
			}
			b = fmt.Appendf(b, "%s=%d", r, c[r])
		}
	}
	return string(b)
}

// Events is the number of events processed so far.
func (s *Sim) Events() uint64 { return s.nEvents }

// TraceHash is a hash of every event so far (time, kind, port, frame CRC).
// Two runs with the same configuration, hosts and seed give the same value.
func (s *Sim) TraceHash() uint64 { return s.trace }

// Totals sums the counters of every port and switch.
func (s *Sim) Totals() Counters {
	var t Counters
	add := func(c *Counters) {
		for i, v := range c {
			t[i] += v
		}
	}
	for _, l := range s.links {
		add(&l.A.Ctr)
		add(&l.B.Ctr)
	}
	for _, ns := range [][][]*node{s.t0, s.t1} {
		for _, pl := range ns {
			for _, n := range pl {
				add(&n.ctr)
			}
		}
	}
	return t
}

// --- faults -----------------------------------------------------------------

// SetDown takes the link down (true) or up. Queued frames at both ends are
// dropped. A NIC at either end sees carrier loss: its host gets PortDown
// (PortUp when the link returns).
func (l *Link) SetDown(down bool) {
	if l.down == down {
		return
	}
	l.down = down
	s := l.sim
	for _, p := range []*Port{l.A, l.B} {
		if down {
			p.flush(DropLinkDown, s)
		}
		if p.nic && p.node.host != nil {
			if down {
				p.node.host.PortDown(s.now, wire.Plane(p.Index))
			} else {
				p.node.host.PortUp(s.now, wire.Plane(p.Index))
			}
			s.mix(s.now, 'c', p, nil)
			s.poll(p.node)
		}
	}
}

// Down reports whether the link is down.
func (l *Link) Down() bool { return l.down }

// SetBlackhole makes the link silently drop every frame (carrier stays up).
func (l *Link) SetBlackhole(b bool) { l.blackhole = b }

// SetLoss drops each frame with probability p (each direction).
func (l *Link) SetLoss(p float64) { l.loss = p }

// Flap schedules count down/up cycles starting at start: down for downFor ns,
// then up for upFor ns.
func (l *Link) Flap(start, downFor, upFor int64, count int) {
	t := start
	for i := 0; i < count; i++ {
		l.sim.At(t, func() { l.SetDown(true) })
		l.sim.At(t+downFor, func() { l.SetDown(false) })
		t += downFor + upFor
	}
}

// SetLossAll sets the random loss probability of every link.
func (s *Sim) SetLossAll(p float64) {
	for _, l := range s.links {
		l.loss = p
	}
}

func (p *Port) flush(r Reason, s *Sim) {
	for _, q := range []*fifo{&p.hi, &p.lo} {
		for q.len() > 0 {
			pk := q.pop()
			p.Ctr[r]++
			if p.nic {
				p.node.txBacklog -= pk.n
			}
			s.release(pk)
		}
	}
	p.backlog = 0
	if n := p.node; p.nic && n.txBlocked && n.txBacklog < s.cfg.NICTxRingBytes {
		n.txBlocked = false
		s.wake(n, s.now)
	}
}

// --- events -----------------------------------------------------------------

type evKind uint8

const (
	evTxDone evKind = iota // port finished serializing its frame
	evArrive               // frame reaches port (the receiving end)
	evWake                 // host deadline
	evFunc                 // scheduled action
)

type event struct {
	t    int64
	seq  uint64
	kind evKind
	port *Port
	node *node
	pkt  *packet
	gen  uint64
	fn   func()
}

type evHeap []event

func (h evHeap) less(i, j int) bool {
	if h[i].t != h[j].t {
		return h[i].t < h[j].t
	}
	return h[i].seq < h[j].seq
}

func (h *evHeap) push(e event) {
	*h = append(*h, e)
	a := *h
	i := len(a) - 1
	for i > 0 {
		p := (i - 1) / 2
		if !a.less(i, p) {
			break
		}
		a[i], a[p] = a[p], a[i]
		i = p
	}
}

func (h *evHeap) pop() event {
	a := *h
	e := a[0]
	n := len(a) - 1
	a[0] = a[n]
	a[n] = event{}
	a = a[:n]
	i := 0
	for {
		l := 2*i + 1
		if l >= n {
			break
		}
		m := l
		if r := l + 1; r < n && a.less(r, l) {
			m = r
		}
		if !a.less(m, i) {
			break
		}
		a[i], a[m] = a[m], a[i]
		i = m
	}
	*h = a
	return e
}

func (s *Sim) push(e event) {
	if e.t < s.now {
		e.t = s.now
	}
	s.seq++
	e.seq = s.seq
	s.evs.push(e)
}

// At runs fn at time t (now if t is in the past), in event order.
func (s *Sim) At(t int64, fn func()) { s.push(event{t: t, kind: evFunc, fn: fn}) }

// RunUntil processes every event up to and including time t, then sets the
// clock to t.
func (s *Sim) RunUntil(t int64) {
	for len(s.evs) > 0 && s.evs[0].t <= t {
		s.step()
	}
	if t > s.now {
		s.now = t
	}
}

// RunWhile processes events while cond() holds and the clock stays at or
// before limit. It reports whether cond became false.
func (s *Sim) RunWhile(cond func() bool, limit int64) bool {
	for cond() {
		if len(s.evs) == 0 || s.evs[0].t > limit {
			return false
		}
		s.step()
	}
	return true
}

func (s *Sim) step() {
	e := s.evs.pop()
	s.now = e.t
	s.nEvents++
	switch e.kind {
	case evTxDone:
		s.txDone(e.port)
	case evArrive:
		s.arrive(e.port, e.pkt)
	case evWake:
		n := e.node
		if e.gen != n.wakeGen {
			return
		}
		n.wakeAt = -1
		s.mix(s.now, 'w', n.ports[0], nil)
		s.poll(n)
	case evFunc:
		s.mix(s.now, 'f', nil, nil)
		e.fn()
	}
}

// mix folds one event into the trace hash.
func (s *Sim) mix(t int64, what byte, p *Port, frame []byte) {
	var b [24]byte
	putU64(b[0:], uint64(t))
	b[8] = what
	if p != nil {
		putU64(b[9:], uint64(p.node.index)<<32|uint64(p.node.kind)<<24|uint64(p.node.plane)<<16|uint64(p.Index))
	}
	if frame != nil {
		// The headers (through RETH) name the packet; the simulator never
		// changes a payload, so hashing them is enough and cheaper.
		c := crc32.Checksum(frame[:min(len(frame), 128)], castagnoli)
		b[17], b[18], b[19], b[20] = byte(c>>24), byte(c>>16), byte(c>>8), byte(c)
		b[21], b[22] = byte(len(frame)>>8), byte(len(frame))
	}
	h := s.trace
	for _, c := range b {
		h ^= uint64(c)
		h *= 1099511628211
	}
	s.trace = h
	if s.Trace != nil {
		s.Trace(t, string(what), p, frame)
	}
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func putU64(b []byte, v uint64) {
	for i := 0; i < 8; i++ {
		b[i] = byte(v >> (56 - 8*i))
	}
}

// --- packets and queues -----------------------------------------------------

func (s *Sim) alloc(n int) *packet {
	if k := len(s.free); k > 0 {
		pk := s.free[k-1]
		s.free = s.free[:k-1]
		if cap(pk.buf) >= n {
			pk.buf = pk.buf[:n]
			pk.n = n
			return pk
		}
	}
	c := 4096
	if n > c {
		c = n
	}
	return &packet{buf: make([]byte, n, c), n: n}
}

func (s *Sim) release(pk *packet) { s.free = append(s.free, pk) }

type fifo struct {
	a    []*packet
	head int
}

func (f *fifo) len() int { return len(f.a) - f.head }
func (f *fifo) push(p *packet) {
	if f.head > 0 && f.head == len(f.a) {
		f.a, f.head = f.a[:0], 0
	}
	f.a = append(f.a, p)
}
func (f *fifo) pop() *packet {
	p := f.a[f.head]
	f.a[f.head] = nil
	f.head++
	if f.head > 1024 && f.head*2 > len(f.a) {
		n := copy(f.a, f.a[f.head:])
		f.a, f.head = f.a[:n], 0
	}
	return p
}

// enqueue offers pk to port p's egress queue.
func (s *Sim) enqueue(p *Port, pk *packet) {
	if p.link.down {
		p.Ctr[DropLinkDown]++
		s.mix(s.now, 'd', p, pk.buf[:pk.n])
		s.release(pk)
		return
	}
	backlog := p.backlog
	if p.xdp() {
		p.drainVQ(s.now)
		backlog = int(p.vq)
	}
	v := Admit(QueueState{Backlog: backlog, HostFacing: p.hostFacing, HostECN: p.cfg.HostECN, ECNBytes: p.cfg.ECNBytes,
		TrimBytes: p.cfg.TrimBytes, BufferBytes: p.cfg.BufferBytes}, pk.buf[:pk.n])
	if v.Drop != 0 {
		p.Ctr[v.Drop]++
		s.mix(s.now, 'd', p, pk.buf[:pk.n])
		s.release(pk)
		return
	}
	pk.n = v.Len
	pk.buf = pk.buf[:v.Len]
	if v.Marked {
		p.Ctr[CtrECNMarked]++
	}
	if v.Trimmed {
		p.Ctr[CtrTrimmed]++
	}
	s.mix(s.now, 'q', p, pk.buf)
	if v.Priority {
		p.hi.push(pk)
	} else {
		p.lo.push(pk)
	}
	p.backlog += pk.n
	if p.nic {
		p.node.txBacklog += pk.n
	}
	if p.xdp() {
		p.vq += float64(pk.n + s.cfg.WireOverhead)
		p.MaxBacklog = max(p.MaxBacklog, int(p.vq))
	} else if p.backlog > p.MaxBacklog {
		p.MaxBacklog = p.backlog
	}
	if !p.busy {
		s.startTx(p)
	}
}

// startTx puts the next frame (high priority first) on the wire.
func (s *Sim) startTx(p *Port) {
	var pk *packet
	switch {
	case p.hi.len() > 0:
		pk = p.hi.pop()
	case p.lo.len() > 0:
		pk = p.lo.pop()
	default:
		p.busy = false
		return
	}
	p.backlog -= pk.n
	if p.nic {
		n := p.node
		n.txBacklog -= pk.n
		if n.txBlocked && n.txBacklog < s.cfg.NICTxRingBytes {
			n.txBlocked = false
			s.wake(n, s.now)
		}
	}
	p.busy = true
	p.onWire = pk
	bits := float64(pk.n+s.cfg.WireOverhead) * 8
	rate := p.cfg.RateBps
	if p.cfg.XDP {
		rate = p.cfg.WireRateBps
	}
	d := int64(math.Ceil(bits * 1e9 / rate))
	s.push(event{t: s.now + d, kind: evTxDone, port: p})
}

func (s *Sim) txDone(p *Port) {
	pk := p.onWire
	p.onWire = nil
	l := p.link
	frame := pk.buf[:pk.n]
	switch {
	case l.down:
		p.Ctr[DropLinkDown]++
	case l.blackhole:
		p.Ctr[DropBlackhole]++
	case l.loss > 0 && s.rng.Float64() < l.loss:
		p.Ctr[DropLoss]++
	default:
		p.Ctr[CtrTx]++
		s.mix(s.now, 't', p, frame)
		t := s.now + p.cfg.Delay
		if p.cfg.Jitter > 0 {
			t = max(t+s.rng.Int64N(p.cfg.Jitter), p.lastArrive)
			p.lastArrive = t
		}
		s.push(event{t: t, kind: evArrive, port: p.peer, pkt: pk})
		s.startTx(p)
		return
	}
	s.mix(s.now, 'l', p, frame)
	s.release(pk)
	s.startTx(p)
}

// arrive hands a frame that reached port p to its node.
func (s *Sim) arrive(p *Port, pk *packet) {
	n := p.node
	frame := pk.buf[:pk.n]
	if p.link.down { // the link went down while the frame was in flight
		p.Ctr[DropLinkDown]++
		s.release(pk)
		return
	}
	p.Ctr[CtrRx]++
	s.mix(s.now, 'r', p, frame)
	if n.kind == KindHost {
		p.Ctr[CtrDelivered]++
		if n.host != nil {
			n.host.HandlePacket(s.now, wire.Plane(p.Index), frame)
			s.release(pk)
			s.poll(n)
			return
		}
		s.release(pk)
		return
	}
	if n.hung {
		n.ctr[DropHung]++
		s.release(pk)
		return
	}
	out, drop := n.sw.Forward(frame)
	if drop != 0 {
		n.ctr[drop]++
		s.release(pk)
		return
	}
	s.enqueue(n.ports[out], pk)
}

// poll runs the host's Poll now and schedules its next deadline. While the
// host's NIC queues hold more than NICTxRingBytes, Poll waits (the TX ring is
// full) and runs again as soon as they drain below it.
func (s *Sim) poll(n *node) {
	if n.host == nil {
		return
	}
	if n.txBacklog >= s.cfg.NICTxRingBytes {
		n.txBlocked = true
		return
	}
	n.host.Poll(s.now, func(pl wire.Plane, frame []byte) { s.emit(n, pl, frame) })
	d := n.host.NextDeadline()
	if d < 0 || d == math.MaxInt64 {
		return
	}
	if d <= s.now {
		d = s.now + 1 // never spin at one instant
	}
	s.wake(n, d)
}

func (s *Sim) wake(n *node, t int64) {
	if n.wakeAt >= 0 && n.wakeAt <= t {
		return
	}
	n.wakeAt = t
	n.wakeGen++
	s.push(event{t: t, kind: evWake, node: n, gen: n.wakeGen})
}

func (s *Sim) emit(n *node, pl wire.Plane, frame []byte) {
	if int(pl) >= len(n.ports) {
		n.ctr[DropNoRoute]++
		return
	}
	p := n.ports[pl]
	pk := s.alloc(len(frame))
	copy(pk.buf, frame)
	s.enqueue(p, pk)
}
