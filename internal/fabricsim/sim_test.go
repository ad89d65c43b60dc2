package fabricsim

import (
	"math"
	"testing"

	"github.com/softmrc/softmrc/internal/pathtmpl"
	"github.com/softmrc/softmrc/internal/wire"
)

func mustSim(t *testing.T, c Config) *Sim {
	t.Helper()
	s, err := New(c)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// Every (plane, T1) path carries exactly the packets sent on it, with the
// right hop count, and T0-local packets touch no T1.
func TestPathsPerPlaneAndT1(t *testing.T) {
	for _, tc := range []struct {
		name     string
		dst      int
		wantHops uint8 // hop limit at the NIC
	}{
		{"cross-T1", 2, 61},
		{"T0-local", 1, 63},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := DefaultConfig()
			s := mustSim(t, c)
			cfg := s.Config()
			snd, rcv := newTestHost(t, cfg, 0), newTestHost(t, cfg, tc.dst)
			const perPath = 5
			P, T1 := cfg.Planes, cfg.T1s
			snd.n, snd.size, snd.interval = P*T1*perPath, 1024, 1000
			snd.plan = func(i int) flowSpec {
				return flowSpec{dst: tc.dst, plane: wire.Plane(i % P), t1: (i / P) % T1, dscp: wire.DSCPTrimmable}
			}
			s.SetHost(0, snd)
			s.SetHost(tc.dst, rcv)
			s.RunUntil(1e6)
			if rcv.got != snd.n || rcv.bad != 0 {
				t.Fatalf("received %d of %d (%d bad)", rcv.got, snd.n, rcv.bad)
			}
			if rcv.hops[tc.wantHops] != snd.n {
				t.Errorf("hop limits at the NIC %v, want all %d", rcv.hops, tc.wantHops)
			}
			for p := 0; p < P; p++ {
				for j := 0; j < T1; j++ {
					if got := rcv.byPlaneT1[[2]int{p, j}]; got != perPath {
						t.Errorf("plane %d T1 %d: received %d, want %d", p, j, got, perPath)
					}
					want := uint64(perPath)
					if tc.dst == 1 {
						want = 0
					}
					// The T1's port toward T0 1 transmitted exactly the packets of its path.
					var tx uint64
					for _, port := range s.T1(wire.Plane(p), j).Ports() {
						tx += port.Ctr[CtrTx]
					}
					if tx != want {
						t.Errorf("plane %d T1 %d: forwarded %d, want %d", p, j, tx, want)
					}
				}
			}
			if tot := s.Totals(); dropsOf(tot) != 0 {
				t.Errorf("drops: %v", fmtCounters(tot))
			}
		})
	}
}

func dropsOf(c Counters) uint64 {
	var n uint64
	for r := Reason(0); r < NumReasons; r++ {
		if r.IsDrop() {
			n += c[r]
		}
	}
	return n
}

func fmtCounters(c Counters) map[string]uint64 {
	m := map[string]uint64{}
	for r := Reason(0); r < NumReasons; r++ {
		if c[r] != 0 {
			m[r.String()] = c[r]
		}
	}
	return m
}

// ECMP mode: plain IPv6, the T0 hashes flows over its uplinks; one flow
// (one EV) always takes one T1, many flows use every T1.
func TestECMPMode(t *testing.T) {
	c := DefaultConfig()
	c.Mode = ModeECMP
	s := mustSim(t, c)
	cfg := s.Config()
	snd, rcv := newTestHost(t, cfg, 0), newTestHost(t, cfg, 3)
	snd.n, snd.size, snd.interval = 400, 512, 500
	snd.plan = func(i int) flowSpec { return flowSpec{dst: 3, plane: 1, t1: 0, dscp: wire.DSCPTrimmable} }
	s.SetHost(0, snd)
	s.SetHost(3, rcv)
	s.RunUntil(1e6)
	if rcv.got != snd.n {
		t.Fatalf("received %d of %d", rcv.got, snd.n)
	}
	used := 0
	for j := 0; j < cfg.T1s; j++ {
		var tx uint64
		for _, port := range s.T1(1, j).Ports() {
			tx += port.Ctr[CtrTx]
		}
		if tx > 0 {
			used++
		}
	}
	if used != cfg.T1s {
		t.Errorf("%d distinct EVs used %d of %d T1s", snd.n, used, cfg.T1s)
	}
	if rcv.hops[61] != snd.n {
		t.Errorf("hop limits %v, want all 61 (three IPv6 hops)", rcv.hops)
	}
	// The same frame hashes the same way every time.
	f := snd.frame(7, flowSpec{dst: 3, plane: 1})
	m := s.T0(1, 0).Model()
	a, _ := m.Forward(append([]byte(nil), f...))
	for i := 0; i < 10; i++ {
		if b, _ := m.Forward(append([]byte(nil), f...)); b != a {
			t.Fatalf("ECMP choice changed: %d then %d", a, b)
		}
	}
}

// Two senders under T0 0 pinned to one uplink at full rate: the uplink's
// queue marks ECN (fabric-facing) and trims (TRIMMED); the receiver's
// downlink carries the sum of two uplinks and trims with TRIMMED_LASTHOP
// when four senders converge.
func TestCongestionMarksAndTrims(t *testing.T) {
	c := DefaultConfig()
	c.T0s, c.HostsPerT0 = 3, 2
	s := mustSim(t, c)
	cfg := s.Config()
	const size = 2048
	interval := int64(math.Ceil(float64(size+200) * 8 / cfg.Host.RateBps * 1e9)) // ~line rate
	rcv := newTestHost(t, cfg, 2)
	s.SetHost(2, rcv)
	for _, src := range []int{0, 1} {
		h := newTestHost(t, cfg, src)
		h.n, h.size, h.interval = 300, size, interval
		h.plan = func(i int) flowSpec { return flowSpec{dst: 2, plane: 0, t1: 0, dscp: wire.DSCPTrimmable} }
		s.SetHost(src, h)
	}
	s.RunUntil(2e6)
	up := s.T0(0, 0).Ports()[cfg.HostsPerT0+0]
	if up.Ctr[CtrECNMarked] == 0 || up.Ctr[CtrTrimmed] == 0 {
		t.Errorf("uplink: %v, want ECN marks and trims", fmtCounters(up.Ctr))
	}
	if rcv.got != 600 || rcv.ce == 0 || rcv.trimmed == 0 || rcv.trimLast != 0 {
		t.Errorf("receiver: got %d ce %d trimmed %d lasthop %d", rcv.got, rcv.ce, rcv.trimmed, rcv.trimLast)
	}
	if uint64(rcv.trimmed) != up.Ctr[CtrTrimmed] {
		t.Errorf("%d trimmed arrived, uplink trimmed %d", rcv.trimmed, up.Ctr[CtrTrimmed])
	}
	if up.MaxBacklog > cfg.Fabric.TrimBytes+size {
		t.Errorf("uplink backlog reached %d > trim threshold %d", up.MaxBacklog, cfg.Fabric.TrimBytes)
	}

	// Last hop: four senders on four T1s into one host port.
	s = mustSim(t, c)
	rcv = newTestHost(t, cfg, 5)
	s.SetHost(5, rcv)
	for i, src := range []int{0, 1, 2, 3} {
		h := newTestHost(t, cfg, src)
		h.n, h.size, h.interval = 200, size, interval
		t1 := i
		h.plan = func(int) flowSpec { return flowSpec{dst: 5, plane: 2, t1: t1, dscp: wire.DSCPTrimmable} }
		s.SetHost(src, h)
	}
	s.RunUntil(2e6)
	down := s.T0(2, 2).Ports()[1]
	if rcv.got != 800 || rcv.trimLast == 0 || uint64(rcv.trimLast) != down.Ctr[CtrTrimmed] || down.Ctr[CtrECNMarked] != 0 {
		t.Errorf("receiver got %d lasthop trims %d; downlink %v", rcv.got, rcv.trimLast, fmtCounters(down.Ctr))
	}
}

// Faults: each one drops what it should, counts it under its reason, and a
// NIC sees carrier changes.
func TestFaults(t *testing.T) {
	type setup func(s *Sim)
	for _, tc := range []struct {
		name   string
		fault  setup
		reason Reason
		// want: fraction of 1000 packets lost (all on plane 0, T1 0)
		lo, hi float64
	}{
		{"link-down", func(s *Sim) { s.At(200e3, func() { s.FabricLink(0, 0, 0).SetDown(true) }) }, DropLinkDown, 0.7, 0.85},
		{"blackhole", func(s *Sim) { s.At(200e3, func() { s.FabricLink(0, 1, 0).SetBlackhole(true) }) }, DropBlackhole, 0.78, 0.81},
		{"loss-10pct", func(s *Sim) { s.FabricLink(0, 0, 0).SetLoss(0.1) }, DropLoss, 0.07, 0.13},
		{"T1-hang", func(s *Sim) {
			s.At(500e3, func() { s.T1(0, 0).SetHung(true) })
			s.At(700e3, func() { s.T1(0, 0).SetHung(false) })
		}, DropHung, 0.18, 0.22},
		{"flap", func(s *Sim) { s.FabricLink(0, 0, 0).Flap(100e3, 100e3, 100e3, 3) }, DropLinkDown, 0.28, 0.32},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := DefaultConfig()
			c.Seed = 3
			s := mustSim(t, c)
			cfg := s.Config()
			snd, rcv := newTestHost(t, cfg, 0), newTestHost(t, cfg, 2)
			snd.n, snd.size, snd.interval = 1000, 1000, 1000
			snd.plan = func(int) flowSpec { return flowSpec{dst: 2, plane: 0, t1: 0, dscp: wire.DSCPTrimmable} }
			s.SetHost(0, snd)
			s.SetHost(2, rcv)
			tc.fault(s)
			s.RunUntil(2e6)
			lost := 1 - float64(rcv.got)/float64(snd.n)
			tot := s.Totals()
			if lost < tc.lo || lost > tc.hi {
				t.Errorf("lost %.3f, want in [%.2f, %.2f]; counters %v", lost, tc.lo, tc.hi, fmtCounters(tot))
			}
			if tot[tc.reason] != uint64(snd.n-rcv.got) || dropsOf(tot) != tot[tc.reason] {
				t.Errorf("%s = %d, lost %d; all counters %v", tc.reason, tot[tc.reason], snd.n-rcv.got, fmtCounters(tot))
			}
		})
	}
}

// NIC port down is carrier loss: the host is told, frames it still emits on
// that port are dropped and counted, and it is told again when the port
// returns.
func TestNICPortDown(t *testing.T) {
	s := mustSim(t, DefaultConfig())
	cfg := s.Config()
	snd, rcv := newTestHost(t, cfg, 0), newTestHost(t, cfg, 2)
	snd.n, snd.size, snd.interval = 1000, 1000, 1000
	snd.plan = func(i int) flowSpec {
		return flowSpec{dst: 2, plane: wire.Plane(i % 4), t1: 1, dscp: wire.DSCPTrimmable}
	}
	s.SetHost(0, snd)
	s.SetHost(2, rcv)
	s.At(300e3, func() { s.HostLink(2, 3).SetDown(true) })
	s.At(600e3, func() { s.HostLink(2, 3).SetDown(false) })
	s.RunUntil(2e6)
	if len(rcv.portEv) != 2 || rcv.portEv[0] != "down3" || rcv.portEv[1] != "up3" {
		t.Errorf("receiver port events %v, want [down3 up3]", rcv.portEv)
	}
	if len(snd.portEv) != 0 {
		t.Errorf("sender saw port events %v", snd.portEv)
	}
	lost := snd.n - rcv.got
	if lost < 70 || lost > 80 { // 300 µs of plane 3 = 75 packets, ± in flight
		t.Errorf("lost %d, want ~75", lost)
	}
	// The sender's own port down: it is told and stops (the test host skips
	// down ports); frames emitted anyway would be counted at the NIC port.
	s2 := mustSim(t, DefaultConfig())
	h := newTestHost(t, s2.Config(), 1)
	s2.SetHost(1, h)
	s2.HostLink(1, 2).SetDown(true)
	s2.emit(s2.hosts[1], 2, make([]byte, 100))
	if got := s2.HostPort(1, 2).Ctr[DropLinkDown]; got != 1 || len(h.portEv) != 1 {
		t.Errorf("emit on a down port: drop counter %d, events %v", got, h.portEv)
	}
}

// The same seed replays the same event trace; another seed does not.
func TestDeterminism(t *testing.T) {
	run := func(seed uint64) (uint64, uint64, int) {
		c := DefaultConfig()
		c.Seed = seed
		s := mustSim(t, c)
		cfg := s.Config()
		rcv := newTestHost(t, cfg, 3)
		s.SetHost(3, rcv)
		for src := 0; src < 3; src++ {
			h := newTestHost(t, cfg, src)
			h.n, h.size, h.interval = 500, 2000, 100
			h.plan = func(i int) flowSpec {
				return flowSpec{dst: 3, plane: wire.Plane(i % 4), t1: i % 3, dscp: wire.DSCPTrimmable}
			}
			s.SetHost(src, h)
		}
		s.SetLossAll(0.02)
		s.RunUntil(3e6)
		return s.TraceHash(), s.Events(), rcv.got
	}
	h1, e1, g1 := run(42)
	h2, e2, g2 := run(42)
	h3, _, _ := run(43)
	if h1 != h2 || e1 != e2 || g1 != g2 {
		t.Errorf("same seed: hash %x/%x events %d/%d received %d/%d", h1, h2, e1, e2, g1, g2)
	}
	if h1 == h3 {
		t.Errorf("seeds 42 and 43 gave the same trace %x", h1)
	}
}

func TestConfigErrors(t *testing.T) {
	for _, c := range []Config{
		{Planes: 17},
		{T0s: 2, T1s: 0, Planes: 1},
		{HostsPerT0: 64},
		{T1s: 64},
	} {
		if _, err := New(c); err == nil {
			t.Errorf("config %+v accepted", c)
		}
	}
}

// The path template of a host names the same containers as PathDA, for
// every peer, plane and T1.
func TestTemplateMatchesPathDA(t *testing.T) {
	c := DefaultConfig()
	c.T0s = 3
	if err := c.fill(); err != nil {
		t.Fatal(err)
	}
	for h := 0; h < c.Hosts(); h++ {
		tm, err := c.Template(h)
		if err != nil {
			t.Fatal(err)
		}
		for o := 0; o < c.Hosts(); o++ {
			if o == h {
				continue
			}
			idx, ok := tm.PeerByAddr(c.HostAddr(o, 0))
			if !ok {
				t.Fatalf("host %d: peer %d missing", h, o)
			}
			ps, err := tm.Compile(idx)
			if err != nil {
				t.Fatal(err)
			}
			for p := 0; p < c.Planes; p++ {
				for j := 0; j < c.T1s; j++ {
					got, ok := ps.Dst(wire.MakeEV(wire.Plane(p), uint8(j), 77))
					if want := c.PathDA(wire.Plane(p), h, j, o); !ok || got != want {
						t.Errorf("h%d->h%d plane %d T1 %d: template %v, PathDA %v", h, o, p, j, got, want)
					}
				}
			}
		}
	}
}

// A container that names the destination T0 right after the source T0 (no
// T1) still arrives: the source T0 hashes it over its uplinks.
func TestT0ToT0ViaAnyT1(t *testing.T) {
	s := mustSim(t, DefaultConfig())
	cfg := s.Config()
	m := s.T0(2, 0).Model()
	used := map[int]bool{}
	for i := 0; i < 64; i++ {
		da, _ := wire.F3216.Build(cfg.Block, pathtmpl.T0USID(0, 2), pathtmpl.T0USID(1, 2), pathtmpl.DownlinkUSID(0, 2))
		f := frameTo(t, da, 64, wire.DSCPTrimmable, wire.ECNECT0, wire.OpWriteOnly, 8)
		u := wire.UDP(f[wire.EthLen+2*wire.IPv6Len:])
		u.SetSrcPort(uint16(i * 977))
		port, drop := m.Forward(f)
		if drop != None || port < cfg.HostsPerT0 {
			t.Fatalf("port %d drop %v", port, drop)
		}
		used[port] = true
		if next, drop := s.T1(2, port-cfg.HostsPerT0).Model().Forward(f); drop != None || next != 1 {
			t.Fatalf("T1: port %d drop %v", next, drop)
		}
	}
	if len(used) != cfg.T1s {
		t.Errorf("64 flows used %d of %d uplinks", len(used), cfg.T1s)
	}
}

// greedyHost emits burst frames per Poll for as long as it has frames and
// always wants to run again: only the NIC TX ring holds it back.
type greedyHost struct {
	*testHost
	burst int
}

func (g *greedyHost) Poll(now int64, emit func(wire.Plane, []byte)) {
	for i := 0; i < g.burst && g.sent < g.n; i++ {
		f := g.plan(g.sent)
		emit(f.plane, g.frame(g.sent, f))
		g.sent++
	}
}

func (g *greedyHost) NextDeadline() int64 {
	if g.sent >= g.n {
		return math.MaxInt64
	}
	return 0 // now: the simulator runs it 1 ns later unless the ring is full
}

// The NIC TX ring: a greedy host is held back while its NIC queue holds
// NICTxRingBytes, runs again as soon as it drains, and so sends at exactly
// line rate; taking the link down flushes the queue and frees the host.
func TestNICTxRing(t *testing.T) {
	c := DefaultConfig()
	c.Planes = 1
	s := mustSim(t, c)
	cfg := s.Config()
	g := &greedyHost{testHost: newTestHost(t, cfg, 0), burst: 3}
	rcv := newTestHost(t, cfg, 2)
	g.n, g.size = 2000, 2000
	g.plan = func(i int) flowSpec { return flowSpec{dst: 2, plane: 0, t1: i % 4, dscp: wire.DSCPTrimmable} }
	s.SetHost(0, g)
	s.SetHost(2, rcv)
	s.RunUntil(10e6)
	nic := s.HostPort(0, 0)
	frame := len(g.frame(0, g.plan(0)))
	if rcv.got != g.n {
		t.Fatalf("received %d of %d", rcv.got, g.n)
	}
	if nic.MaxBacklog > cfg.NICTxRingBytes+g.burst*frame {
		t.Errorf("NIC backlog reached %d, ring %d + one burst", nic.MaxBacklog, cfg.NICTxRingBytes)
	}
	perFrame := float64(frame+cfg.WireOverhead) * 8 / cfg.Host.RateBps * 1e9
	if want := int64(float64(g.n) * perFrame); rcv.lastRx > want+20e3 {
		t.Errorf("last frame at %d ns, line rate gives %d", rcv.lastRx, want)
	}
	if s.Events() > uint64(20*g.n) {
		t.Errorf("%d events for %d frames: the host was polled while the ring was full", s.Events(), g.n)
	}

	// Link down with a full ring: the queue is flushed and counted, the host
	// is told and polled again.
	s = mustSim(t, c)
	g = &greedyHost{testHost: newTestHost(t, cfg, 0), burst: 3}
	g.n, g.size = 2000, 2000
	g.plan = func(i int) flowSpec { return flowSpec{dst: 2, plane: 0, t1: 0, dscp: wire.DSCPTrimmable} }
	s.SetHost(0, g)
	s.At(50e3, func() { s.HostLink(0, 0).SetDown(true) })
	s.RunUntil(10e6)
	nic = s.HostPort(0, 0)
	if nic.Ctr[DropLinkDown] == 0 || g.sent != g.n || nic.Backlog() != 0 || len(g.portEv) != 1 {
		t.Errorf("after link down: dropped %d, sent %d of %d, backlog %d, events %v", nic.Ctr[DropLinkDown], g.sent, g.n, nic.Backlog(), g.portEv)
	}
	if !s.HostLink(0, 0).Down() {
		t.Error("link not down")
	}
}

// Conservation: under random faults and load, every frame a host emitted is
// either delivered to a host or counted under exactly one drop reason.
func TestConservation(t *testing.T) {
	for seed := uint64(1); seed <= 8; seed++ {
		c := DefaultConfig()
		c.Seed = seed
		c.T0s, c.HostsPerT0 = 3, 2
		if seed%2 == 0 {
			c.Mode = ModeECMP
		}
		s := mustSim(t, c)
		cfg := s.Config()
		var hosts []*testHost
		for h := 0; h < cfg.Hosts(); h++ {
			th := newTestHost(t, cfg, h)
			th.n, th.size, th.interval = 300, 400+int(seed)*150, int64(20+h*7+int(seed)*10)
			hh := h
			th.plan = func(i int) flowSpec {
				dst := (hh + 1 + i%(cfg.Hosts()-1)) % cfg.Hosts()
				if hh != 0 && i%2 == 0 {
					dst = 0 // half of everything converges on host 0
				}
				return flowSpec{dst: dst, plane: wire.Plane(i % cfg.Planes), t1: (i * 7 / 5) % cfg.T1s, dscp: []uint8{wire.DSCPTrimmable, wire.DSCPNoTrim, wire.DSCPTrimmableRetx}[i%3]}
			}
			s.SetHost(h, th)
			hosts = append(hosts, th)
		}
		s.SetLossAll(0.01)
		s.At(20e3, func() { s.FabricLink(1, 0, 2).SetBlackhole(true) })
		s.At(30e3, func() { s.T1(2, 1).SetHung(true) })
		s.At(40e3, func() { s.HostLink(3, 0).SetDown(true) })
		s.FabricLink(3, 2, 3).Flap(10e3, 5e3, 5e3, 4)
		s.RunUntil(50e6)
		var emitted, received int
		for _, h := range hosts {
			emitted += h.sent - h.dropDown
			received += h.got
		}
		tot := s.Totals()
		if uint64(received) != tot[CtrDelivered] {
			t.Errorf("seed %d: hosts received %d, delivered counter %d", seed, received, tot[CtrDelivered])
		}
		// Host-level emit drops (none expected) live on host nodes.
		if got := uint64(received) + dropsOf(tot); got != uint64(emitted) {
			t.Errorf("seed %d: emitted %d, delivered %d + dropped %d = %d; %v", seed, emitted, received, dropsOf(tot), got, fmtCounters(tot))
		}
		t.Logf("seed %d: %v", seed, fmtCounters(tot))
	}
}
