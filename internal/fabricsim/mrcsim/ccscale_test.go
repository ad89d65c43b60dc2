package mrcsim

import (
	"testing"

	"github.com/softmrc/softmrc/internal/fabricsim"
	"github.com/softmrc/softmrc/internal/mrc"
	"github.com/softmrc/softmrc/internal/wire"
)

// TestScenarioCCScale is S7's MRC all-reduce ring at S7's rates and RTT
// (testbed/scenarios/s07-collectives.yaml, topologies/s07-mrc.yaml): two
// planes of 2 T0 × 2 T1, every link 40 Mbit/s, mrc-switchd's port model
// (ECN above 16 KiB, trims above 64 KiB, 128 KiB buffers, host_ecn), NIC
// ports paced at 40 Mbit/s, 2.5 ms of delay on every host link (mrc-nicd's
// delay line) and up to 0.5 ms of scheduling noise per hop: an RTT of about
// 12 ms, a bandwidth-delay product of ~55 packets per host. The ring h0 →
// h2 → h1 → h3 → h0 (every hop crosses the fabric), one QP per hop, 4 MiB
// each. The goodput counts from the first MiB on, as the tools' warm-up
// iteration leaves the timed ones a QP whose window has left its start.
//
// Unscaled, the target queueing delay (6 µs, made for 100 Gb/s) is below
// the noise of every RTT sample, so the window only ever grows by FairInc
// per RTT and halves on each mark: the ring's QPs keep 0.57-0.63 of their
// capacity on average over seeds 101-110 (issues 10, 11: S7's MRC
// all-reduce at 11-14 Mbit/s on the testbed). Scaled (mrc-nicd cc.scale) by
// 1250 (100 Gb/s ÷ 80 Mbit/s per host: a 7.5 ms target) or 2500 (÷ 40
// Mbit/s per plane link, S7's value: 15 ms) they keep 0.81-0.84, the worst
// QP 0.75-0.84: every fabric link of the ring is loaded to 100 %, and the
// queues that random spraying builds there trim ~2-5 % of the packets. The
// two give the same numbers because the port model adds no queueing delay:
// what matters is a target above the RTT noise (×100, 0.6 ms: 0.66; ×300,
// 1.8 ms: 0.82, seeds 101-105).
func TestScenarioCCScale(t *testing.T) {
	for _, tc := range []struct {
		name     string
		cc       mrc.CCConfig
		min, max float64 // bounds on the ring's mean QP goodput / capacity
	}{
		{"unscaled: 6 us target", mrc.CCConfig{}, 0, 0.8},
		{"cc.scale 1250: 7.5 ms target", mrc.CCConfig{}.Scaled(1250), 0.8, 1.01},
		{"cc.scale 2500: 15 ms target", mrc.CCConfig{}.Scaled(2500), 0.8, 1.01},
	} {
		t.Run(tc.name, func(t *testing.T) {
			share := dist{name: "mean ring QP goodput / capacity"}
			sweep(t, func(t *testing.T, seed uint64) { share.add(seed, ccScaleRing(t, seed, tc.cc)) })
			share.eachWithin(t, tc.min, tc.max)
		})
	}
}

// ccScaleRing runs the ring once and returns the mean goodput of its four
// QPs after their first MiB, as a share of one host's capacity (two ports).
func ccScaleRing(t *testing.T, seed uint64, cc mrc.CCConfig) float64 {
	const size, warm = 4 << 20, 1 << 20
	sc := fabricsim.DefaultConfig()
	sc.Mode = fabricsim.ModeECMP
	sc.Planes, sc.T0s, sc.T1s, sc.HostsPerT0 = 2, 2, 2, 2
	port := fabricsim.LinkConfig{XDP: true, RateBps: 40e6, Delay: 8_000, Jitter: 500_000,
		ECNBytes: 16 << 10, TrimBytes: 64 << 10, BufferBytes: 128 << 10, HostECN: true}
	sc.Host, sc.Fabric = port, port
	sc.Host.Delay = 2_500_000
	sc.Seed = seed
	f := newFabric(t, sc, seed, func(_ int, c *mrc.Config) { c.PortRate = 0.04; c.CC = cc })
	ring := []int{0, 2, 1, 3}
	var fls []*Flow
	for i, src := range ring {
		fl := connect(t, f, src, ring[(i+1)%len(ring)], mrc.QPConfig{}, size, 64<<10, 16)
		fl.StartAt(0)
		fls = append(fls, fl)
	}
	f.RunUntilDone(10e9) // 4 MiB at 80 Mbit/s take 0.42 s; checkFlow fails a flow not done by 10 s
	c := capacity(sc, 2)
	worst, mean := 2.0, 0.0
	for _, fl := range fls {
		checkFlow(t, fl)
		from := fl.End
		for _, p := range fl.Progress {
			if p.Bytes >= warm {
				from = p.T
				break
			}
		}
		g := fl.GoodputIn(from, fl.End+1)
		s := fl.Snapshot()
		t.Logf("seed %d h%d->h%d: %.1f Mbit/s after the first MiB (%.2f of capacity; whole transfer %.1f), cwnd %d B, srtt %v us, NACKs TRIMMED %d, TRIMMED_LASTHOP %d",
			seed, fl.Src, fl.Dst, g/1e6, g/c, fl.Goodput()/1e6, s.Cwnd, s.SRTT/mrc.Microsecond,
			s.Counters.NACKsRcvd[wire.NackTrimmed], s.Counters.NACKsRcvd[wire.NackTrimmedLastHop])
		worst = min(worst, g/c)
		mean += g / c / float64(len(fls))
	}
	t.Logf("seed %d: mean %.3f worst %.3f", seed, mean, worst)
	return mean
}
