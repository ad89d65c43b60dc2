package mrc

import (
	"fmt"
	"testing"

	"github.com/softmrc/softmrc/internal/wire"
)

// TestLateArrivalReported: while a hole holds the cumulative ACK, a packet
// arrives more than 64 PSNs behind the highest one received (spraying makes
// such reordering normal), followed by a few more at the top. Some SACK
// must report it; before, the coalesced SACK's bitmap ended at the top and
// the sender declared the packet lost and blamed its healthy EV.
func TestLateArrivalReported(t *testing.T) {
	for _, tc := range []struct {
		name  string
		late  int // offset of the late PSN from the first
		top   int // highest offset before it lands
		after int // packets at the top after it, before the SACK timer
	}{
		{"65 behind, 3 after", 10, 75, 3},
		{"100 behind, 1 after", 20, 120, 1},
		{"300 behind, 7 after", 5, 305, 7},
		{"64 behind (in the top bitmap)", 40, 104, 3},
	} {
		for _, coalesce := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s, CoalesceHoles %v", tc.name, coalesce), func(t *testing.T) {
				h := newHarness(t, hopts{seed: 31, cfg: func(c *Config) { c.CoalesceHoles = coalesce }})
				g := newGuarded(h, 1, 0x77, 0x5000, 1<<20)
				ia, _ := h.eng[0].Info(h.qp[0])
				start := ia.StartPSN
				deliver := func(i int) {
					b := h.craft(func(p *wire.Packet) {
						p.Opcode, p.PSN, p.EV = wire.OpWriteMiddle, start.Add(i), wire.MakeEV(wire.Plane(i%testPlanes), uint8(i%4), uint32(i))
						p.VA, p.DMALen, p.Payload = 0x5000+uint64(i)*100, 1<<20, make([]byte, 100)
					})
					h.eng[1].HandlePacket(h.now, wire.Plane(i%testPlanes), b)
				}
				reported := map[wire.PSN]bool{}
				poll := func() {
					for _, p := range h.collect(1) {
						if p.Opcode != wire.OpSACK {
							continue
						}
						base := p.SACK.CackPSN.Add(int(p.SACK.SackOffset))
						for k := 0; k < 64; k++ {
							if p.SACK.Bitmap&(1<<k) != 0 {
								reported[base.Add(k)] = true
							}
						}
					}
				}
				// Offset 0 is the hole; 1..top arrive in order except late.
				for i := 1; i <= tc.top; i++ {
					if i != tc.late {
						deliver(i)
					}
					h.now += 100
					poll()
				}
				deliver(tc.late)
				for i := 1; i <= tc.after; i++ {
					deliver(tc.top + i)
				}
				h.now += 10 * Microsecond // past AckDelay: the coalesced SACK goes out
				poll()
				g.intact(t)
				if !reported[start.Add(tc.late)] {
					t.Fatalf("PSN +%d (landed %d behind the highest while +0 was missing) was never reported in a SACK", tc.late, tc.top-tc.late)
				}
				if !reported[start.Add(tc.top+tc.after)] {
					t.Fatalf("the highest PSN +%d was never reported", tc.top+tc.after)
				}
			})
		}
	}
}
