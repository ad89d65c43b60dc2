package mrc

import (
	"testing"

	"github.com/softmrc/softmrc/internal/wire"
)

// ctrlCount counts, per side, the frames an engine emitted by kind.
type ctrlCount struct {
	data, sack, probeAns, nack, probe, ack, other [2]int
}

func (c *ctrlCount) filter(from int, f []byte) {
	var p wire.Packet
	if (wire.Decoder{}).Decode(f, &p) != nil {
		c.other[from]++
		return
	}
	switch op := p.Opcode; {
	case op.IsData():
		c.data[from]++
	case op == wire.OpSACK && p.SACK.Probe:
		c.probeAns[from]++
	case op == wire.OpSACK:
		c.sack[from]++
	case op == wire.OpNACK:
		c.nack[from]++
	case op == wire.OpProbe:
		c.probe[from]++
	case op == wire.OpAck:
		c.ack[from]++
	default:
		c.other[from]++
	}
}

// control is every non-data frame side i emitted.
func (c *ctrlCount) control(i int) int {
	return c.sack[i] + c.probeAns[i] + c.nack[i] + c.probe[i] + c.ack[i] + c.other[i]
}

// pingPong runs n 2-byte WriteImm round trips (mrc-write-lat's pattern):
// each side answers an immediate after think time, so both QPs are idle
// between messages. It returns the frame counts.
func pingPong(t *testing.T, h *harness, n int, think Time) *ctrlCount {
	t.Helper()
	var cnt ctrlCount
	h.Filter = func(from int, _ wire.Plane, f []byte) bool { cnt.filter(from, f); return false }
	for i := 0; i < 2; i++ {
		h.mem[i].Register(0x22, 0, make([]byte, 64), AccessRemoteWrite)
	}
	post := func(side int, k int) {
		if err := h.eng[side].PostWrite(h.qp[side], WR{ID: uint64(k), Op: OpWriteImm, Local: []byte{byte(k), byte(k >> 8)}, RKey: 0x22, Imm: uint32(k)}); err != nil {
			t.Fatal(err)
		}
	}
	post(0, 0)
	got := 0
	ok := h.run(Second, func() bool {
		for side := 0; side < 2; side++ {
			for _, c := range h.drainCQ(side) {
				switch {
				case c.Kind == CompRecvImm:
					got++
					if got < 2*n {
						k, s := got, side
						h.at(h.now+think, func() { post(s, k) })
					}
				case c.Status != StatusOK:
					t.Fatalf("side %d completion %+v", side, c)
				}
			}
		}
		return got == 2*n
	})
	if !ok {
		t.Fatalf("ping-pong stopped after %d of %d messages", got, 2*n)
	}
	return &cnt
}

// TestPingPongControlVolume bounds the control packets per data packet of a
// lightly loaded QP pair: 2-byte ping-pongs with think time between them
// (each QP idle most of the time). Both QPs exchange data, so each learns
// its reverse path from the SACKs of its own data: no reverse probes after
// the first exchange, one SACK per data packet (every message is a single
// AckReq packet).
func TestPingPongControlVolume(t *testing.T) {
	for _, think := range []Time{0, 30 * Microsecond, 300 * Microsecond} {
		h := newHarness(t, hopts{seed: 7})
		const n = 300
		c := pingPong(t, h, n, think)
		for side := 0; side < 2; side++ {
			data := c.data[side]
			t.Logf("think %v µs, side %d: data %d, SACK %d, probe answers %d, probes %d, NACK %d, ACK %d",
				think/Microsecond, side, data, c.sack[side], c.probeAns[side], c.probe[side], c.nack[side], c.ack[side])
			if data != n {
				t.Errorf("side %d sent %d data packets for %d messages (spurious retransmissions)", side, data, n)
			}
			if c.sack[side] > c.data[1-side] {
				t.Errorf("side %d sent %d SACKs for %d data packets received: more than one each", side, c.sack[side], c.data[1-side])
			}
			// At most a couple of probes while the first exchange
			// validates the reverse paths; none in steady state.
			if c.probe[side] > 2 {
				t.Errorf("side %d sent %d probes in a ping-pong: reverse paths are known from data SACKs", side, c.probe[side])
			}
			if ratio := float64(c.control(side)) / float64(data); ratio > 1.05 {
				t.Errorf("side %d: %.2f control packets per data packet, want ≤ 1.05", side, ratio)
			}
		}
	}
}

// TestIdleKeepAlive: a completely idle QP sends one reverse probe per
// KeepAlive period and nothing else; with KeepAlive < 0 nothing at all.
func TestIdleKeepAlive(t *testing.T) {
	for _, ka := range []Time{10 * Millisecond, -1} {
		h := newHarness(t, hopts{seed: 8, qc: QPConfig{KeepAlive: ka}})
		pingPong(t, h, 3, 0) // some history, then silence
		var cnt ctrlCount
		h.Filter = func(from int, _ wire.Plane, f []byte) bool { cnt.filter(from, f); return false }
		start := h.now
		h.run(start+100*Millisecond, nil)
		for side := 0; side < 2; side++ {
			want := 0
			if ka > 0 {
				want = int(100 * Millisecond / ka)
			}
			if got := cnt.probe[side]; got < want-1 || got > want+1 {
				t.Errorf("keepalive %v: side %d sent %d probes in 100 ms idle, want %d±1", ka, side, got, want)
			}
			if got := cnt.data[side] + cnt.sack[side] + cnt.nack[side]; got != 0 {
				t.Errorf("idle side %d sent %d data/SACK/NACK frames", side, got)
			}
		}
	}
}

// TestPerPortRate: with a pacing rate per plane, each port carries data in
// proportion to its rate (the spec's "EV whose plane's port has TX room"),
// and PortRate still applies to planes left at zero.
func TestPerPortRate(t *testing.T) {
	rates := [testPlanes]float64{40, 0, 20, 10} // plane 1 takes PortRate
	h := newHarness(t, hopts{seed: 12, cfg: func(c *Config) {
		c.PortRate = 40
		copy(c.PortRates[:], rates[:])
	}})
	if got := h.eng[0].Config().PortRates[1]; got != 40 {
		t.Fatalf("plane 1 rate %v, want PortRate 40", got)
	}
	var perPlane [testPlanes]int
	h.Filter = func(from int, port wire.Plane, f []byte) bool {
		var p wire.Packet
		if from == 0 && (wire.Decoder{}).Decode(f, &p) == nil && p.Opcode.IsData() {
			perPlane[port]++
		}
		return false
	}
	h.transfer(8<<20, 256<<10, Second)
	total := 0
	for _, n := range perPlane {
		total += n
	}
	want := [testPlanes]float64{40, 40, 20, 10}
	var sum float64
	for _, r := range want {
		sum += r
	}
	for p, n := range perPlane {
		share, exp := float64(n)/float64(total), want[p]/sum
		t.Logf("plane %d: %d packets, share %.3f, rate share %.3f", p, n, share, exp)
		if share < exp*0.85 || share > exp*1.15 {
			t.Errorf("plane %d carried %.3f of the packets, want %.3f ± 15%%", p, share, exp)
		}
	}
}
