package mrcsim

import (
	"testing"

	"github.com/softmrc/softmrc/internal/fabricsim"
	"github.com/softmrc/softmrc/internal/mrc"
	"github.com/softmrc/softmrc/internal/wire"
)

// TestScenarioIncastXDP is testbed/scenarios/s8-incast.sh in the simulator,
// at its rates and with mrc-switchd's port model (fabricsim LinkConfig.XDP:
// virtual queues that mark and trim but add no delay): one plane, 2 T0 and
// 1 T1; h0..h6 under T0 0 write to h8 under T0 1 (7:1), the victim h7 (also
// under T0 0) writes to h9 (under T0 1). Host links 100 Mbit/s, the T0–T1
// links 400 Mbit/s, 128 KiB buffers, ECN above 16 KiB on every port
// (host_ecn), trims above 64 KiB; NIC ports paced at 100 Mbit/s. The
// victim must keep ≥ 95 % of its rate alone (issue 11, S8), and the seven
// must share the receiver fairly.
//
// At these rates a 2 KiB packet is 164 µs on a host link while the RTT is
// tens of µs: each incast sender's share of the receiver (14 Mbit/s) is a
// fraction of one packet per RTT.
func TestScenarioIncastXDP(t *testing.T) {
	jain := dist{name: "Jain fairness of the seven"}
	victim := dist{name: "victim beside the incast / alone"}
	sweep(t, func(t *testing.T, seed uint64) {
		j, v := incastXDP(t, seed)
		jain.add(seed, j)
		victim.add(seed, v)
	})
	jain.eachAtLeast(t, 0.9)
	victim.eachAtLeast(t, 0.95)
}

func incastXDP(t *testing.T, seed uint64) (jain, victim float64) {
	sc := fabricsim.DefaultConfig()
	sc.Mode = fabricsim.ModeECMP
	sc.Planes, sc.T0s, sc.T1s, sc.HostsPerT0 = 1, 2, 1, 8
	port := fabricsim.LinkConfig{XDP: true, Delay: 8_000, Jitter: 10_000, ECNBytes: 16 << 10, TrimBytes: 64 << 10, BufferBytes: 128 << 10, HostECN: true}
	sc.Host, sc.Fabric = port, port
	sc.Host.RateBps, sc.Fabric.RateBps = 100e6, 400e6
	sc.Seed = seed
	const (
		recv, vsrc, vdst = 8, 7, 9
		victimSize       = 8 << 20
		incastSize       = 2 << 20
	)
	pace := func(_ int, c *mrc.Config) { c.PortRate = 0.1 } // S8_NIC_BPS 100 Mbit/s

	f := newFabric(t, sc, seed, pace)
	v, err := f.Connect(vsrc, vdst, mrc.QPConfig{}, victimSize, 64<<10, 64)
	if err != nil {
		t.Fatal(err)
	}
	v.StartAt(0)
	f.RunUntilDone(60e9)
	checkFlow(t, v)

	f = newFabric(t, sc, seed, pace)
	var in []*Flow
	for s := 0; s < 7; s++ {
		fl, err := f.Connect(s, recv, mrc.QPConfig{}, incastSize, 64<<10, 64)
		if err != nil {
			t.Fatal(err)
		}
		fl.StartAt(0)
		in = append(in, fl)
	}
	vi, err := f.Connect(vsrc, vdst, mrc.QPConfig{}, victimSize, 64<<10, 64)
	if err != nil {
		t.Fatal(err)
	}
	vi.StartAt(0)
	f.RunUntilDone(60e9)
	first, rates, sum, trims, sent := incastSummary(t, in, vi)
	end := min(first, vi.End, v.End)
	j := Jain(rates)
	alone, with := v.GoodputIn(0, end), vi.GoodputIn(0, end)
	c := capacity(sc, 1)
	up := f.Sim.T0(0, 0).Ports()[sc.HostsPerT0] // T0 0 -> T1 0
	down := f.Sim.T0(0, 1).Ports()[0]           // T0 1 -> h8
	vs := vi.Snapshot()
	t.Logf("incast: sum %.1f Mbit/s = %.1f%% of the receiver's %.1f; Jain %.3f; rates %.1f Mbit/s; trim NACKs %d for %d data packets sent; cwnd of h0 %d",
		sum/1e6, 100*sum/c, c/1e6, j, mbits(rates), trims, sent, in[0].Snapshot().Cwnd)
	t.Logf("victim: %.1f Mbit/s alone, %.1f beside the incast (%.1f%%) over %d ms; cwnd %d, ECN echoes %d, trims %d, retransmissions %d",
		alone/1e6, with/1e6, 100*with/alone, end/1e6, vs.Cwnd, ecnEchoes(vs), vs.Counters.NACKsRcvd[wire.NackTrimmed], vs.Counters.TxRtx)
	t.Logf("T0 0 uplink: tx %d, marked %d, trimmed %d; receiver downlink: tx %d, marked %d, trimmed %d",
		up.Ctr[fabricsim.CtrTx], up.Ctr[fabricsim.CtrECNMarked], up.Ctr[fabricsim.CtrTrimmed],
		down.Ctr[fabricsim.CtrTx], down.Ctr[fabricsim.CtrECNMarked], down.Ctr[fabricsim.CtrTrimmed])
	return j, with / alone
}

func mbits(xs []float64) []float64 {
	o := make([]float64, len(xs))
	for i, x := range xs {
		o[i] = float64(int(x/1e5)) / 10
	}
	return o
}

func ecnEchoes(s mrc.QPSnapshot) uint64 {
	var n uint64
	for _, e := range s.EVs {
		n += e.ECN
	}
	return n
}
