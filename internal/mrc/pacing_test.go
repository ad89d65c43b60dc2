package mrc

import (
	"testing"

	"github.com/softmrc/softmrc/internal/wire"
)

// TestPacedPlaneRate: the engine is the NIC's one pacer. A plane paced at
// rate R carries R (bytes counted against the injected clock while the
// sender has data: within 3 %), never more than R plus the PortQueue burst
// over any span, and on a lossless, uncongested link pacing costs no
// retransmission: a packet the engine defers is not sent, so no ACK timer
// runs for it.
func TestPacedPlaneRate(t *testing.T) {
	for _, tc := range []struct {
		name  string
		rates [testPlanes]float64 // bits per ns
		queue Time                // Config.PortQueue (0: default)
	}{
		{"equal 10G", [testPlanes]float64{10, 10, 10, 10}, 0},
		{"mixed 40/20/10/5G", [testPlanes]float64{40, 20, 10, 5}, 0},
		{"slow 1G, 20us burst", [testPlanes]float64{1, 1, 1, 1}, 20 * Microsecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, hopts{seed: 3, cfg: func(c *Config) {
				c.PortRate, c.PortQueue = 0, tc.queue
				copy(c.PortRates[:], tc.rates[:])
				c.CC.MaxCwnd = 4 << 20 // the window must not be what binds
			}})
			queue := h.eng[0].Config().PortQueue
			frames := logSent(h, nil)
			const size = 8 << 20
			h.transfer(size, 256<<10, Second)
			s := h.snap(0)
			if s.Counters.TxRtx != 0 || s.Counters.Timeouts != 0 {
				t.Errorf("%d retransmissions, %d timeouts on a lossless link: pacing made the sender retransmit", s.Counters.TxRtx, s.Counters.Timeouts)
			}
			for p, fs := range frames {
				r := tc.rates[p]
				if len(fs) < 100 {
					t.Fatalf("plane %d carried %d frames", p, len(fs))
				}
				// Rate: the bytes of every frame but the last over the time
				// from the first to the last (each frame's line time is
				// taken before the next may go).
				got := sentRate(fs)
				t.Logf("plane %d: %d frames in %d µs: %.2f Gb/s paced at %.2f", p, len(fs), (fs[len(fs)-1].at-fs[0].at)/Microsecond, got, r)
				if got < r*0.97 || got > r*1.03 {
					t.Errorf("plane %d sent at %.2f Gb/s, paced at %.2f: want within 3 %%", p, got, r)
				}
				// Burst: from any frame on, the bytes sent before each later
				// frame fit the line time elapsed plus PortQueue of it and
				// one frame (the one that found the queue just under it).
				maxFrame := 0
				for _, f := range fs {
					maxFrame = max(maxFrame, f.n)
				}
				for i := 0; i < len(fs); i += 7 {
					sum := 0
					for j := i; j < len(fs); j++ {
						allow := r*float64(fs[j].at-fs[i].at+queue) + float64(2*maxFrame*8)
						if float64(sum*8) > allow {
							t.Fatalf("plane %d: %d bytes left in %d ns from frame %d: more than the rate and a PortQueue burst allow (%.0f bytes)", p, sum, fs[j].at-fs[i].at, i, allow/8)
						}
						sum += fs[j].n
					}
				}
			}
		})
	}
}

// sentFrame is one frame engine 0 of a harness sent: when, and its length.
type sentFrame struct {
	at Time
	n  int
}

// logSent records, per plane, the frames engine 0 of h sends from now on
// (h's Filter; it drops none), calling also, when set, for each.
func logSent(h *harness, also func(port wire.Plane, f []byte)) *[testPlanes][]sentFrame {
	var frames [testPlanes][]sentFrame
	h.Filter = func(from int, port wire.Plane, f []byte) bool {
		if from == 0 {
			frames[port] = append(frames[port], sentFrame{h.now, len(f)})
			if also != nil {
				also(port, f)
			}
		}
		return false
	}
	return &frames
}

// sentRate is the rate, in bits per ns, of a plane's frames: the bytes of
// every frame but the last over the time from the first to the last (each
// frame's line time is taken before the next may go).
func sentRate(fs []sentFrame) float64 {
	bytes := 0
	for _, f := range fs[:len(fs)-1] {
		bytes += f.n
	}
	return float64(bytes*8) / float64(fs[len(fs)-1].at-fs[0].at)
}
