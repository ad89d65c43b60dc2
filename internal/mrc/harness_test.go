package mrc

import (
	"container/heap"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"hash/fnv"
	"math/rand/v2"
	"net/netip"
	"testing"

	"github.com/softmrc/softmrc/internal/pathtmpl"
	"github.com/softmrc/softmrc/internal/wire"
)

// The test harness wires two engines back to back through a tiny link model:
// per direction and port a serialising wire (rate, delay, jitter for
// reordering), random loss, trimming and ECN marking, and an optional filter
// for targeted faults. It is deterministic from its seed.

const testPlanes = 4

func addr(s string) wire.Addr128 { return wire.Addr128FromNetip(netip.MustParseAddr(s)) }

func hostAddrs(h int) (a [wire.MaxPlanes]wire.Addr128) {
	for p := 0; p < testPlanes; p++ {
		a[p] = addr(fmt.Sprintf("fd00:1:%d::%d", p, h+1))
	}
	return
}

// testTemplate is host h's template: hosts 0 and 1 sit under T0 0 and T0 1
// of every plane (cross-T1) with 4 T1s per plane.
func testTemplate(h int) *pathtmpl.Template {
	t := &pathtmpl.Template{Block: "5f00:1::", Planes: testPlanes, T1Count: 4}
	me := hostAddrs(h)
	other := hostAddrs(1 - h)
	t.Local.Name = fmt.Sprintf("h%d", h)
	peer := pathtmpl.Peer{Name: fmt.Sprintf("h%d", 1-h)}
	for p := 0; p < testPlanes; p++ {
		pl := wire.Plane(p)
		lp := pathtmpl.LocalPlane{Plane: p, Addr: me[p].String(), T0: pathtmpl.T0USID(h, pl)}
		for j := 0; j < 4; j++ {
			lp.T1 = append(lp.T1, pathtmpl.T1USID(j, pl))
		}
		t.Local.Planes = append(t.Local.Planes, lp)
		peer.Planes = append(peer.Planes, pathtmpl.PeerPlane{Plane: p, Addr: other[p].String(),
			T0: pathtmpl.T0USID(1-h, pl), Downlink: pathtmpl.DownlinkUSID(0, pl)})
	}
	t.Peers = []pathtmpl.Peer{peer}
	if err := t.Validate(); err != nil {
		panic(err)
	}
	return t
}

type flight struct {
	at   Time
	seq  uint64
	to   int
	port wire.Plane
	b    []byte
}

type flights []flight

func (f flights) Len() int { return len(f) }
func (f flights) Less(i, j int) bool {
	if f[i].at != f[j].at {
		return f[i].at < f[j].at
	}
	return f[i].seq < f[j].seq
}
func (f flights) Swap(i, j int) { f[i], f[j] = f[j], f[i] }
func (f *flights) Push(x any)   { *f = append(*f, x.(flight)) }
func (f *flights) Pop() any {
	o := *f
	x := o[len(o)-1]
	*f = o[:len(o)-1]
	return x
}

type harness struct {
	t     testing.TB
	now   Time
	eng   [2]*Engine
	mem   [2]*MemTable
	qp    [2]wire.QPN
	link  *rand.Rand
	fl    flights
	seq   uint64
	busy  [2][wire.MaxPlanes]Time
	trace hash.Hash64
	steps int

	Rate              float64 // bits per ns (100 = 100 Gb/s)
	Delay, Jitter     Time
	Loss, Trim, ECN   float64
	Filter            func(from int, port wire.Plane, frame []byte) (drop bool)
	MarkCE            func(from int, p *wire.Packet) bool // CE-mark this data packet
	framesSent        [2]int
	dataSent, dropped int

	wakes []wake // callbacks at a time (an application's think time)
}

type wake struct {
	at Time
	fn func()
}

// at runs fn once the clock reaches t (before that step's deliveries).
func (h *harness) at(t Time, fn func()) { h.wakes = append(h.wakes, wake{t, fn}) }

type hopts struct {
	seed  uint64
	mode  RoutingMode
	qc    QPConfig
	cfg   func(c *Config)
	noQPs bool
}

func newHarness(t testing.TB, o hopts) *harness {
	h := &harness{t: t, link: rand.New(rand.NewPCG(o.seed, 99)), trace: fnv.New64a(),
		Rate: 100, Delay: 2 * Microsecond}
	portRate := 100.0
	for i := 0; i < 2; i++ {
		h.mem[i] = NewMemTable()
		cfg := Config{Planes: testPlanes, Mode: o.mode, Addrs: hostAddrs(i), Template: testTemplate(i), PortRate: portRate}
		if o.cfg != nil {
			o.cfg(&cfg)
		}
		e, err := New(cfg, h.mem[i], rand.New(rand.NewPCG(o.seed, uint64(i))))
		if err != nil {
			t.Fatal(err)
		}
		h.eng[i] = e
	}
	if !o.noQPs {
		h.qp[0], h.qp[1] = h.connect(o.qc, o.qc)
	}
	return h
}

func (h *harness) connect(qa, qb QPConfig) (wire.QPN, wire.QPN) {
	a, err := h.eng[0].CreateQP(qa)
	if err != nil {
		h.t.Fatal(err)
	}
	b, err := h.eng[1].CreateQP(qb)
	if err != nil {
		h.t.Fatal(err)
	}
	ia, _ := h.eng[0].Info(a)
	ib, _ := h.eng[1].Info(b)
	if err := h.eng[0].Connect(a, ib); err != nil {
		h.t.Fatal(err)
	}
	if err := h.eng[1].Connect(b, ia); err != nil {
		h.t.Fatal(err)
	}
	return a, b
}

func (h *harness) emitter(from int) func(wire.Plane, []byte) {
	return func(port wire.Plane, frame []byte) {
		h.framesSent[from]++
		var hb [8]byte
		binary.LittleEndian.PutUint64(hb[:], uint64(h.now))
		h.trace.Write(hb[:])
		h.trace.Write(frame)
		var p wire.Packet
		isData := (wire.Decoder{}).Decode(frame, &p) == nil && p.Opcode.IsData()
		if isData {
			h.dataSent++
		}
		if h.Filter != nil && h.Filter(from, port, frame) {
			h.dropped++
			return
		}
		b := append([]byte(nil), frame...)
		if isData && h.Loss > 0 && h.link.Float64() < h.Loss {
			h.dropped++
			return
		}
		if isData && h.Trim > 0 && h.link.Float64() < h.Trim {
			if n, ok := wire.Trim(b, false); ok {
				b = b[:n]
			}
		}
		if isData && h.MarkCE != nil && h.MarkCE(from, &p) {
			wire.IPv6(b[wire.EthLen:]).SetECN(wire.ECNCE)
		}
		if isData && h.ECN > 0 && h.link.Float64() < h.ECN {
			wire.IPv6(b[wire.EthLen:]).SetECN(wire.ECNCE)
		}
		start := max(h.now, h.busy[from][port])
		ser := Time(float64(len(b)*8) / h.Rate)
		h.busy[from][port] = start + ser
		at := start + ser + h.Delay
		if h.Jitter > 0 {
			at += Time(h.link.Int64N(int64(h.Jitter)))
		}
		h.seq++
		heap.Push(&h.fl, flight{at: at, seq: h.seq, to: 1 - from, port: port, b: b})
	}
}

// run advances time until cond holds or limit passes; it fails on a livelock.
func (h *harness) run(limit Time, cond func() bool) bool {
	em := [2]func(wire.Plane, []byte){h.emitter(0), h.emitter(1)}
	for {
		if cond != nil && cond() {
			return true
		}
		next := min(h.eng[0].NextDeadline(), h.eng[1].NextDeadline())
		if len(h.fl) > 0 && h.fl[0].at < next {
			next = h.fl[0].at
		}
		for _, w := range h.wakes {
			next = min(next, w.at)
		}
		if next == Never || next > limit {
			h.now = limit
			return cond != nil && cond()
		}
		if next > h.now {
			h.now = next
		}
		h.steps++
		if h.steps > 5_000_000 {
			h.t.Fatalf("harness: too many steps at t=%d (livelock?)", h.now)
		}
		for i := 0; i < len(h.wakes); i++ {
			if w := h.wakes[i]; w.at <= h.now {
				h.wakes = append(h.wakes[:i], h.wakes[i+1:]...)
				i--
				w.fn()
			}
		}
		for len(h.fl) > 0 && h.fl[0].at <= h.now {
			f := heap.Pop(&h.fl).(flight)
			h.eng[f.to].HandlePacket(h.now, f.port, f.b)
		}
		h.eng[0].Poll(h.now, em[0])
		h.eng[1].Poll(h.now, em[1])
	}
}

func (h *harness) snap(i int) QPSnapshot {
	var s QPSnapshot
	if err := h.eng[i].Snapshot(h.qp[i], &s); err != nil {
		h.t.Fatal(err)
	}
	return s
}

// region registers n random bytes at key on side i.
func (h *harness) region(i int, key uint32, base uint64, n int, acc Access) []byte {
	b := make([]byte, n)
	r := rand.New(rand.NewPCG(uint64(key), uint64(n)))
	for j := range b {
		b[j] = byte(r.Uint32())
	}
	h.mem[i].Register(key, base, b, acc)
	return b
}

func (h *harness) drainCQ(i int) []Completion {
	var out []Completion
	buf := make([]Completion, 64)
	for {
		n := h.eng[i].PollCQ(buf)
		if n == 0 {
			return out
		}
		out = append(out, buf[:n]...)
	}
}

func isErr(err, target error) bool { return errors.Is(err, target) }

// runWRs runs until side 0 has n successful send completions or a QP
// error, or limit passes; it returns the successes and the error (nil if
// none).
func (h *harness) runWRs(limit Time, n int) (done int, qpErr *Completion) {
	h.run(limit, func() bool {
		for _, c := range h.drainCQ(0) {
			switch {
			case c.Kind == CompQPError:
				qpErr = &c
			case c.Kind == CompSend && c.Status == StatusOK:
				done++
			}
		}
		return qpErr != nil || done == n
	})
	return done, qpErr
}
