package mrc

import (
	"encoding/binary"
	"testing"

	"github.com/softmrc/softmrc/internal/wire"
)

// guarded registers a region in the middle of a larger buffer whose edges
// are canaries: a write outside the region shows up there.
type guarded struct {
	all    []byte
	region []byte
}

const guardLen = 4096

func newGuarded(h *harness, side int, key uint32, base uint64, n int) *guarded {
	g := &guarded{all: make([]byte, n+2*guardLen)}
	for i := range g.all {
		g.all[i] = 0xAA
	}
	g.region = g.all[guardLen : guardLen+n : guardLen+n]
	h.mem[side].Register(key, base, g.region, AccessRemoteWrite)
	return g
}

func (g *guarded) intact(t *testing.T) {
	t.Helper()
	for i := 0; i < guardLen; i++ {
		if g.all[i] != 0xAA || g.all[len(g.all)-1-i] != 0xAA {
			t.Fatalf("write outside the registered region (guard byte %d)", i)
		}
	}
}

// craft builds a data frame from side 0's QP to side 1's.
func (h *harness) craft(mut func(p *wire.Packet)) []byte {
	ia, _ := h.eng[0].Info(h.qp[0])
	p := wire.Packet{Src: hostAddrs(0)[0], Dst: hostAddrs(1)[0], DSCP: wire.DSCPTrimmable, ECN: wire.ECNECT0,
		EV: wire.MakeEV(0, 1, 5), Opcode: wire.OpWriteOnly, DestQP: h.qp[1], PSN: ia.StartPSN,
		HasTS: true, VA: 0x5000, RKey: 0x77, DMALen: 100, Payload: make([]byte, 100)}
	if mut != nil {
		mut(&p)
	}
	b := make([]byte, maxFrame+8192)
	n, err := p.Encode(b)
	if err != nil {
		h.t.Fatal(err)
	}
	return b[:n]
}

func (h *harness) collect(side int) []wire.Packet {
	var out []wire.Packet
	h.eng[side].Poll(h.now, func(_ wire.Plane, f []byte) {
		var p wire.Packet
		if (wire.Decoder{}).Decode(append([]byte(nil), f...), &p) == nil {
			out = append(out, p)
		}
	})
	return out
}

func TestBadInput(t *testing.T) {
	h := newHarness(t, hopts{seed: 11})
	g := newGuarded(h, 1, 0x77, 0x5000, 1000)
	ia, _ := h.eng[0].Info(h.qp[0])
	cases := []struct {
		name   string
		mut    func(p *wire.Packet)
		nack   wire.NackReason
		engCtr func(EngineCounters) uint64
		qpCtr  func(QPCounters) uint64
	}{
		{"invalid rkey", func(p *wire.Packet) { p.RKey = 0x78 }, wire.NackUnexpEvent, nil, func(c QPCounters) uint64 { return c.BadRKey }},
		{"VA below region", func(p *wire.Packet) { p.VA = 0x4fff }, wire.NackUnexpEvent, nil, func(c QPCounters) uint64 { return c.BadVA }},
		{"VA past end", func(p *wire.Packet) { p.VA = 0x5000 + 950 }, wire.NackUnexpEvent, nil, func(c QPCounters) uint64 { return c.BadVA }},
		{"VA+len overflows 64 bits", func(p *wire.Packet) { p.VA = ^uint64(0) - 10 }, wire.NackUnexpEvent, nil, func(c QPCounters) uint64 { return c.BadVA }},
		{"payload over MTU", func(p *wire.Packet) { p.Payload = make([]byte, 2049); p.DMALen = 4096 }, wire.NackUnexpEvent, nil, func(c QPCounters) uint64 { return c.BadLen }},
		{"payload over DMA length", func(p *wire.Packet) { p.DMALen = 99 }, wire.NackUnexpEvent, nil, func(c QPCounters) uint64 { return c.BadLen }},
		{"PSN beyond window", func(p *wire.Packet) { p.PSN = ia.StartPSN.Add(5000) }, wire.NackPSNOutOfWindow, nil, func(c QPCounters) uint64 { return c.PSNOutOfWindow }},
		{"unknown QPN", func(p *wire.Packet) { p.DestQP = 0x4242 }, 0, func(c EngineCounters) uint64 { return c.RxUnknownQP }, nil},
		{"endpoint QP with data", func(p *wire.Packet) { p.DestQP = wire.QPEndpoint }, 0, func(c EngineCounters) uint64 { return c.RxUnknownQP }, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var s0 QPSnapshot
			h.eng[1].Snapshot(h.qp[1], &s0)
			e0 := h.eng[1].Counters()
			h.eng[1].HandlePacket(h.now, 0, h.craft(tc.mut))
			out := h.collect(1)
			var s1 QPSnapshot
			h.eng[1].Snapshot(h.qp[1], &s1)
			e1 := h.eng[1].Counters()
			if tc.qpCtr != nil && tc.qpCtr(s1.Counters) != tc.qpCtr(s0.Counters)+1 {
				t.Errorf("QP counter not incremented")
			}
			if tc.engCtr != nil && tc.engCtr(e1) != tc.engCtr(e0)+1 {
				t.Errorf("engine counter not incremented")
			}
			if tc.nack != 0 {
				if len(out) != 1 || out[0].Opcode != wire.OpNACK || out[0].NACK.Reason != tc.nack {
					t.Fatalf("want one NACK %v, got %+v", tc.nack, out)
				}
			} else if len(out) != 0 {
				t.Fatalf("want a silent drop, got %d frames", len(out))
			}
			if s1.RcvCack != s0.RcvCack {
				t.Error("a rejected packet advanced the cumulative ack")
			}
			g.intact(t)
		})
	}
	t.Run("truncated and corrupted", func(t *testing.T) {
		good := h.craft(func(p *wire.Packet) { p.PSN = ia.StartPSN.Add(3) })
		e0 := h.eng[1].Counters()
		for n := 0; n < len(good); n++ {
			h.eng[1].HandlePacket(h.now, 0, good[:n])
		}
		bad := append([]byte(nil), good...)
		bad[len(bad)-10] ^= 1
		h.eng[1].HandlePacket(h.now, 0, bad)
		e1 := h.eng[1].Counters()
		if got := (e1.RxDecodeErr + e1.RxBadICRC) - (e0.RxDecodeErr + e0.RxBadICRC); got != uint64(len(good))+1 {
			t.Errorf("%d malformed frames counted, want %d", got, len(good)+1)
		}
		if out := h.collect(1); len(out) != 0 {
			t.Errorf("malformed frames were answered: %d", len(out))
		}
		g.intact(t)
	})
	t.Run("valid packet lands", func(t *testing.T) {
		h.eng[1].HandlePacket(h.now, 0, h.craft(func(p *wire.Packet) {
			p.VA = 0x5000 + 900
			for i := range p.Payload {
				p.Payload[i] = 0x5A
			}
		}))
		g.intact(t)
		for i := 900; i < 1000; i++ {
			if g.region[i] != 0x5A {
				t.Fatalf("byte %d not written", i)
			}
		}
	})
}

func TestUnsupportedOps(t *testing.T) {
	h := newHarness(t, hopts{seed: 1})
	for _, op := range []Op{OpSend, OpSendImm, OpRead, OpAtomicCAS, OpAtomicFAA} {
		err := h.eng[0].PostWrite(h.qp[0], WR{Op: op, Local: []byte{1}})
		if err == nil || !isErr(err, ErrUnsupportedOp) {
			t.Errorf("%v: err = %v, want ErrUnsupportedOp", op, err)
		}
	}
	if err := h.eng[0].PostWrite(0x999, WR{Local: []byte{1}}); !isErr(err, ErrUnknownQP) {
		t.Errorf("unknown QP: %v", err)
	}
	if err := h.eng[0].PostWrite(h.qp[0], WR{LKey: 0x404, Addr: 0, Len: 10}); !isErr(err, ErrLocalAccess) {
		t.Errorf("bad lkey: %v", err)
	}
}

// fixICRC recomputes the ICRC of a (mutated) frame so that the fuzzer's
// inputs get past the integrity check into the QP logic.
func fixICRC(b []byte) {
	var p wire.Packet
	if (wire.Decoder{}).Decode(b, &p) != nil || p.Trimmed {
		return
	}
	end := len(b) - wire.ICRCLen
	binary.LittleEndian.PutUint32(b[end:], wire.ICRC(b[p.InnerOff:end]))
}

// FuzzHandlePacket hands one frame to each side of a fresh connected pair.
// The pair comes from the stateful fuzzer's harness (fuzz_test.go), built
// once per worker: a fresh harness per input ran at about 19 inputs/s.
func FuzzHandlePacket(f *testing.F) {
	seedH := newHarness(f, hopts{seed: 5})
	seedH.transferSeeds(f)
	f.Fuzz(func(t *testing.T, fix bool, frame []byte) {
		if fzPair == nil {
			fzPair = newFuzzPair()
		}
		fp := fzPair
		fp.reset(t, 5)
		b := append([]byte(nil), frame...)
		if fix {
			fixICRC(b)
		}
		for side := 0; side < 2; side++ {
			fp.eng[side].HandlePacket(fp.now, wire.Plane(len(b)%testPlanes), b)
			fp.now += Microsecond
			fp.poll()
		}
		if err := fp.guards(); err != nil {
			t.Fatal(err)
		}
	})
}

// transferSeeds records every frame of a short transfer (with trims and
// losses, so NACKs and probes appear) as fuzz seeds.
func (h *harness) transferSeeds(f *testing.F) {
	h.Trim, h.Loss = 0.05, 0.05
	n := 0
	h.Filter = func(from int, port wire.Plane, frame []byte) bool {
		if n < 200 {
			f.Add(n%2 == 0, append([]byte(nil), frame...))
			n++
		}
		return false
	}
	h.mem[1].Register(0x77, 0x5000, make([]byte, 64<<10), AccessRemoteWrite)
	_ = h.eng[0].PostWrite(h.qp[0], WR{Op: OpWriteImm, Local: make([]byte, 64<<10), RemoteVA: 0x5000, RKey: 0x77, Imm: 9})
	h.run(10*Millisecond, nil)
	h.eng[0].SetPortState(h.now, 1, false)
	h.run(h.now+Millisecond, nil)
}
