package mrc

import (
	"runtime"
	"testing"

	"github.com/softmrc/softmrc/internal/wire"
)

// BenchmarkSendReceive measures the steady-state cost of one data packet
// through both engines (sender builds and encodes it, receiver decodes,
// checks the ICRC, places the payload and coalesces SACKs; the sender then
// processes the SACKs). Frames go straight from one engine to the other:
// copied out of Poll's buffer ("poll"), or encoded by PollInto straight
// into the queue ("into"). The "nicd" variants run the engine with
// mrc-nicd's SACK coalescing (one SACK per 16 data packets or 20 µs, holes
// coalesced: nic/daemon's AckEvery and AckDelay) instead of the engine's
// defaults (4 packets, 2 µs), which are a hardware NIC's.
func BenchmarkSendReceive(b *testing.B) {
	for _, mtu := range []int{2048, 4096} {
		for _, into := range []bool{false, true} {
			b.Run(map[int]string{2048: "mtu2048", 4096: "mtu4096"}[mtu]+map[bool]string{false: "/poll", true: "/into"}[into], func(b *testing.B) {
				benchSendReceive(b, mtu, into, nil)
			})
		}
		b.Run(map[int]string{2048: "mtu2048", 4096: "mtu4096"}[mtu]+"/into/nicd", func(b *testing.B) {
			benchSendReceive(b, mtu, true, func(c *Config) {
				c.AckEvery, c.AckDelay, c.CoalesceHoles = nicdAckEvery, nicdAckDelay, true
			})
		})
	}
}

// nicdAckEvery and nicdAckDelay are nic/daemon's AckEvery and AckDelay
// (that package imports this one, so they are repeated here).
const (
	nicdAckEvery = 16
	nicdAckDelay = 20 * Microsecond
)

func benchSendReceive(b *testing.B, mtu int, into bool, cfg func(*Config)) {
	h := newHarness(b, hopts{seed: 1, cfg: func(c *Config) {
		c.MTU = mtu
		c.PortRate = 0
		if cfg != nil {
			cfg(c)
		}
	}})
	const region = 64 << 20
	src := make([]byte, region)
	h.mem[0].Register(1, 0, src, AccessLocalRead)
	h.mem[1].Register(2, 0, make([]byte, region), AccessRemoteWrite)
	var q [2][][]byte
	for i := range q {
		for k := 0; k < 4096; k++ {
			q[i] = append(q[i], make([]byte, 0, maxFrame))
		}
	}
	var n [2]int
	emit := func(to int) func(wire.Plane, []byte) {
		return func(_ wire.Plane, f []byte) {
			q[to][n[to]] = append(q[to][n[to]][:0], f...)
			n[to]++
		}
	}
	em := [2]func(wire.Plane, []byte){emit(1), emit(0)}
	dst := func(to int) func(wire.Plane) []byte {
		return func(wire.Plane) []byte { return q[to][n[to]][:maxFrame] }
	}
	commit := func(to int) func(wire.Plane, int) {
		return func(_ wire.Plane, k int) {
			q[to][n[to]] = q[to][n[to]][:k]
			n[to]++
		}
	}
	ds := [2]func(wire.Plane) []byte{dst(1), dst(0)}
	cs := [2]func(wire.Plane, int){commit(1), commit(0)}
	poll := func(now Time, side int) {
		if into {
			h.eng[side].PollInto(now, ds[side], cs[side])
		} else {
			h.eng[side].Poll(now, em[side])
		}
	}
	cq := make([]Completion, 256)
	var now Time
	post := func() {
		for {
			err := h.eng[0].PostWrite(h.qp[0], WR{LKey: 1, Addr: 0, Len: 1 << 20, RemoteVA: 0, RKey: 2})
			if err != nil {
				return
			}
		}
	}
	post()
	pkts := 0
	step := func() {
		now += 200
		for side := 0; side < 2; side++ {
			m := n[side]
			n[side] = 0
			for i := 0; i < m; i++ {
				h.eng[side].HandlePacket(now, 0, q[side][i])
			}
		}
		before := h.eng[0].stats.TxFrames
		poll(now, 0)
		poll(now, 1)
		pkts += int(h.eng[0].stats.TxFrames - before)
		for h.eng[0].PollCQ(cq) > 0 {
		}
		if h.eng[0].qps[h.qp[0]].msgTail-h.eng[0].qps[h.qp[0]].msgHead < 16 {
			post()
		}
	}
	for i := 0; i < 2000; i++ { // warm up: windows open, queues sized
		step()
	}
	b.ReportAllocs()
	b.SetBytes(int64(mtu))
	b.ResetTimer()
	pkts = 0
	steps := 0
	for pkts < b.N {
		step()
		steps++
	}
	// The floor's "burst" variant processes frames in bursts of this size.
	b.ReportMetric(float64(pkts)/float64(steps), "pkts/step")
}

// BenchmarkQPMemory reports the heap bytes one connected QP with 256 EVs
// (and the default 1024-packet window) costs: everything allocated while
// connecting both ends, halved (all of it stays live with the QP).
func BenchmarkQPMemory(b *testing.B) {
	h := newHarness(b, hopts{seed: 1, noQPs: true})
	var m0, m1 runtime.MemStats
	const n = 64
	runtime.GC()
	runtime.ReadMemStats(&m0)
	for i := 0; i < n; i++ {
		h.connect(QPConfig{NumEVs: 256}, QPConfig{NumEVs: 256})
	}
	runtime.GC()
	runtime.ReadMemStats(&m1)
	b.ReportMetric(float64(m1.TotalAlloc-m0.TotalAlloc)/(2*n), "bytes/QP")
	for i := 0; i < b.N; i++ {
	}
}

// BenchmarkWireFloor is the baseline for BenchmarkSendReceive: the work any
// RoCE-style NIC does per packet whatever its transport (encode a data frame
// with its ICRC, decode it, check the ICRC, copy the payload into memory),
// with the wire package's functions the engine uses for each.
// The engine's overhead is the ratio of the two in the same run.
//
// "hot" runs it one frame at a time through one buffer and one payload,
// so every frame is in the L1 cache when it is decoded. "burst" does the
// same work the way the engine benchmark (and a NIC's run loop) meets it:
// a burst of floorBurst frames encoded into floorBurst buffers, then all
// decoded, checked and placed, so a frame has left the L1 cache (64 frames
// of 4 KiB slots are 272 KiB) before the receiver reads it; and its
// memory is the engine benchmark's: each frame's payload is read from the
// next offset of a floorMsg source region and placed at the same offset of
// a floorMsg destination region (BenchmarkSendReceive posts floorMsg
// writes from offset 0 to offset 0, over and over). BenchmarkSendReceive
// reports its own burst as pkts/step.
func BenchmarkWireFloor(b *testing.B) {
	for _, mtu := range []int{2048, 4096} {
		for _, burst := range []int{1, floorBurst} {
			b.Run(map[int]string{2048: "mtu2048", 4096: "mtu4096"}[mtu]+map[int]string{1: "/hot", floorBurst: "/burst"}[burst], func(b *testing.B) {
				benchWireFloor(b, mtu, burst)
			})
		}
	}
}

// floorBurst is the engine's transmit burst per poll in BenchmarkSendReceive,
// floorMsg the length of each write it posts.
const (
	floorBurst = 64
	floorMsg   = 1 << 20
)

func benchWireFloor(b *testing.B, mtu, burst int) {
	// Until 2026-12-05 16:00 the burst floor, like the hot one, encoded one
	// mtu-byte payload for every frame and placed it into a 64 MiB region:
	// a hot source and a cold destination, where the engine reads a 1 MiB
	// source and writes a 1 MiB destination (docs/performance.md).
	src := make([]byte, floorMsg)
	dst := make([]byte, floorMsg)
	if burst == 1 {
		src, dst = make([]byte, mtu), make([]byte, 64<<20)
	}
	payload := src[:mtu]
	p := wire.Packet{Encap: true, Opcode: wire.OpWriteMiddle, DestQP: 0x123, HasTS: true, RKey: 1, DMALen: 1 << 20, Payload: payload,
		DSCP: wire.DSCPTrimmable, ECN: wire.ECNECT0, EV: wire.MakeEV(1, 2, 3)}
	bufs := make([][]byte, burst)
	lens := make([]int, burst)
	for i := range bufs {
		bufs[i] = make([]byte, maxFrame)
	}
	var q wire.Packet
	b.ReportAllocs()
	b.SetBytes(int64(mtu))
	b.ResetTimer()
	for i := 0; i < b.N; i += burst {
		for k := range bufs {
			p.PSN = wire.PSN(i+k) & wire.PSNMask
			p.VA = uint64((i+k)*mtu) % uint64(len(dst)-mtu)
			if burst > 1 {
				p.VA = uint64((i+k)*mtu) % uint64(len(dst)) // as the engine's writes: 1 MiB is a multiple of the MTU
				payload = src[p.VA : p.VA+uint64(mtu)]
			}
			p.Payload = payload
			lens[k], _ = p.Encode(bufs[k])
		}
		for k, buf := range bufs {
			f := buf[:lens[k]]
			if (wire.Decoder{}).Decode(f, &q) != nil || !wire.CheckICRCInPlace(f, &q) {
				b.Fatal("decode")
			}
			copy(dst[q.VA:], q.Payload)
		}
	}
}

// BenchmarkNextDeadlineProbeOut is NextDeadline of an engine with one QP
// and one probe out, as a receiver has its reverse probe out most of the
// time; mrc-nicd asks it every turn of its loop. The probe records in use
// lie below probeHi (allocProbe), so this reads one record, not 64.
func BenchmarkNextDeadlineProbeOut(b *testing.B) {
	h := newHarness(b, hopts{seed: 1})
	e := h.eng[1]
	q := e.qps[h.qp[1]]
	pr := q.allocProbe()
	pr.used, pr.ev, pr.deadline = true, -1, e.now+Second
	b.ResetTimer()
	var d Time
	for range b.N {
		d = min(d, e.NextDeadline())
	}
	if d < 0 {
		b.Fatal(d)
	}
}
