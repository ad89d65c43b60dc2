package fabricsim

import (
	"math"
	"testing"

	"github.com/softmrc/softmrc/internal/pathtmpl"
	"github.com/softmrc/softmrc/internal/wire"
)

// flowSpec says what packet i of a test sender looks like.
type flowSpec struct {
	dst   int
	plane wire.Plane
	t1    int
	dscp  uint8
}

// testHost is a minimal NIC: it sends n packets of a given size at a fixed
// interval (plan picks the path of each), and receives and checks whatever
// reaches it.
type testHost struct {
	t        *testing.T
	cfg      *Config
	id       int
	plan     func(i int) flowSpec
	n        int
	size     int
	interval int64
	start    int64
	sent     int
	buf      []byte

	// received
	got       int
	gotBytes  int
	trimmed   int
	trimLast  int
	ce        int
	byPlaneT1 map[[2]int]int
	hops      map[uint8]int
	lastRx    int64
	bad       int
	portEv    []string
	down      [wire.MaxPlanes]bool
	dropDown  int
}

func newTestHost(t *testing.T, cfg *Config, id int) *testHost {
	return &testHost{t: t, cfg: cfg, id: id, buf: make([]byte, 4096), byPlaneT1: map[[2]int]int{}, hops: map[uint8]int{}}
}

func (h *testHost) HandlePacket(now int64, port wire.Plane, frame []byte) {
	var p wire.Packet
	if err := (wire.Decoder{}).Decode(frame, &p); err != nil {
		h.t.Errorf("host %d: undecodable frame: %v", h.id, err)
		h.bad++
		return
	}
	if p.Dst != h.cfg.HostAddr(h.id, port) {
		h.t.Errorf("host %d port %d: inner dst %v is not mine", h.id, port, p.Dst)
		h.bad++
	}
	if p.Encap {
		_, dl := h.cfg.HostT0(h.id)
		if !wire.F3216.MatchesUN(p.OuterDst, h.cfg.Block, pathtmpl.DownlinkUSID(dl, port)) || !wire.F3216.ArgIsZero(p.OuterDst) {
			h.t.Errorf("host %d port %d: outer DA %v is not my downlink container", h.id, port, p.OuterDst)
			h.bad++
		}
	}
	if p.EV.Plane() != port {
		h.t.Errorf("host %d: EV %v of plane %d arrived on port %d", h.id, p.EV, p.EV.Plane(), port)
	}
	h.got++
	h.gotBytes += len(p.Payload)
	h.lastRx = now
	h.hops[p.HopLimit]++
	h.byPlaneT1[[2]int{int(p.EV.Plane()), int(p.EV.T1())}]++
	if p.ECN == wire.ECNCE {
		h.ce++
	}
	switch {
	case p.Trimmed && p.DSCP == wire.DSCPTrimmedLastHop:
		h.trimLast++
	case p.Trimmed:
		h.trimmed++
	case !wire.CheckICRC(frame, &p):
		h.t.Errorf("host %d: bad ICRC on an untrimmed frame", h.id)
	}
}

func (h *testHost) Poll(now int64, emit func(wire.Plane, []byte)) {
	for h.sent < h.n && h.start+int64(h.sent)*h.interval <= now {
		f := h.plan(h.sent)
		if h.down[f.plane] {
			h.dropDown++
			h.sent++
			continue
		}
		emit(f.plane, h.frame(h.sent, f))
		h.sent++
	}
}

func (h *testHost) frame(i int, f flowSpec) []byte {
	c := h.cfg
	p := wire.Packet{
		Src: c.HostAddr(h.id, f.plane), Dst: c.HostAddr(f.dst, f.plane),
		DSCP: f.dscp, ECN: wire.ECNECT0, HopLimit: 64,
		EV:     wire.MakeEV(f.plane, uint8(f.t1), uint32(i)),
		Opcode: wire.OpWriteOnly, DestQP: 0x10, PSN: wire.PSN(i & wire.PSNMask),
		VA: uint64(i) * uint64(h.size), RKey: 1, DMALen: uint32(h.size),
		Payload: make([]byte, h.size),
	}
	if c.Mode == ModeSRv6 {
		p.Encap = true
		p.OuterSrc = p.Src
		p.OuterDst = c.PathDA(f.plane, h.id, f.t1, f.dst)
	}
	n, err := p.Encode(h.buf)
	if err != nil {
		h.t.Fatalf("encode: %v", err)
	}
	return h.buf[:n]
}

func (h *testHost) NextDeadline() int64 {
	if h.sent >= h.n {
		return math.MaxInt64
	}
	return h.start + int64(h.sent)*h.interval
}

func (h *testHost) PortDown(_ int64, p wire.Plane) {
	h.down[p] = true
	h.portEv = append(h.portEv, "down"+string(rune('0'+p)))
}

func (h *testHost) PortUp(_ int64, p wire.Plane) {
	h.down[p] = false
	h.portEv = append(h.portEv, "up"+string(rune('0'+p)))
}
