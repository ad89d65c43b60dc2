package mrcsim

import (
	"fmt"
	"testing"

	"github.com/softmrc/softmrc/internal/fabricsim"
	"github.com/softmrc/softmrc/internal/mrc"
	"github.com/softmrc/softmrc/internal/wire"
)

const (
	us = int64(1000)
	ms = 1000 * us
)

// crossT1 is the scenario fabric: 4 planes × 2 T0 × 4 T1, one host per T0
// (h0 sends, h1 receives), every link rate Gbit/s with 1 µs of delay.
func crossT1(rate float64) fabricsim.Config {
	c := fabricsim.DefaultConfig()
	c.Planes, c.T0s, c.T1s, c.HostsPerT0 = 4, 2, 4, 1
	c.Host.RateBps, c.Fabric.RateBps = rate*1e9, rate*1e9
	c.Seed = 1
	return c
}

func newFabric(t *testing.T, sc fabricsim.Config, seed uint64, tune func(int, *mrc.Config)) *Fabric {
	t.Helper()
	f, err := New(sc, mrc.Config{MTU: 2048}, seed, tune)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// connect opens a flow on f (Fabric.Connect's arguments); a refusal fails
// the test.
func connect(t *testing.T, f *Fabric, src, dst int, qc mrc.QPConfig, size, msgSize, depth int) *Flow {
	t.Helper()
	fl, err := f.Connect(src, dst, qc, size, msgSize, depth)
	if err != nil {
		t.Fatalf("connect h%d->h%d: %v", src, dst, err)
	}
	return fl
}

// incastSummary checks every flow of an incast run and its victim, and
// returns when the first incast flow ended, the incast flows' goodputs up to
// then (and their sum), and their trim NACKs and data packets sent.
func incastSummary(t *testing.T, in []*Flow, vi *Flow) (first int64, rates []float64, sum float64, trims, sent uint64) {
	t.Helper()
	first = int64(1 << 62)
	for _, fl := range in {
		checkFlow(t, fl)
		first = min(first, fl.End)
	}
	checkFlow(t, vi)
	for _, fl := range in {
		r := fl.GoodputIn(0, first)
		rates = append(rates, r)
		sum += r
		s := fl.Snapshot()
		trims += s.Counters.NACKsRcvd[wire.NackTrimmedLastHop] + s.Counters.NACKsRcvd[wire.NackTrimmed]
		sent += s.Counters.TxData + s.Counters.TxRtx
	}
	return first, rates, sum, trims, sent
}

func checkFlow(t *testing.T, fl *Flow) {
	t.Helper()
	if !fl.Done() {
		t.Fatalf("flow h%d->h%d: %d of %d bytes after %d ns; errors %v", fl.Src, fl.Dst, fl.Completed(), fl.Size, fl.f.Sim.Now(), fl.Errors)
	}
	if len(fl.Errors) != 0 {
		t.Errorf("flow h%d->h%d: errors %v", fl.Src, fl.Dst, fl.Errors)
	}
	if !fl.Exact() {
		t.Errorf("flow h%d->h%d: data differs from offset %d", fl.Src, fl.Dst, fl.FirstDiff())
	}
}

// capacity is the payload capacity of nPorts host links of sc.
func capacity(sc fabricsim.Config, nPorts int) float64 {
	return float64(nPorts) * sc.Host.RateBps * PayloadEfficiency(2048, sc.Mode, 24)
}

// 64 MiB cross-T1 over 4 planes × 4 T1, no faults: byte-exact, goodput ≥ 95%
// of the bottleneck (the sender's 4 NIC ports) × payload efficiency, on
// every seed.
func TestScenarioBandwidth(t *testing.T) {
	share := dist{name: "goodput / capacity"}
	sweep(t, func(t *testing.T, seed uint64) { share.add(seed, bandwidth(t, seed)) })
	share.eachAtLeast(t, 0.95)
}

func bandwidth(t *testing.T, seed uint64) float64 {
	sc := crossT1(100)
	sc.Seed = seed
	f := newFabric(t, sc, seed, nil)
	fl := connect(t, f, 0, 1, mrc.QPConfig{}, 64<<20, 256<<10, 16)
	fl.StartAt(0)
	f.RunUntilDone(1e9)
	checkFlow(t, fl)
	c := capacity(sc, 4)
	g := fl.Goodput()
	t.Logf("64 MiB in %.3f ms: goodput %.2f Gbit/s = %.1f%% of %.2f Gbit/s (4 ports × efficiency %.4f); %d events",
		float64(fl.End-fl.Start)/1e6, g/1e9, 100*g/c, c/1e9, PayloadEfficiency(2048, sc.Mode, 24), f.Sim.Events())
	s := fl.Snapshot()
	t.Logf("srtt %v cwnd %d; counters %+v", s.SRTT, s.Cwnd, s.Counters.TxRtx)
	return g / c
}

// runLoss transfers size bytes h0 -> h1 with random loss p on every link
// and returns the goodput (0 if it did not finish by limit).
func runLoss(t *testing.T, seed uint64, p float64, tr mrc.Transport, size int, limit int64) (float64, *Flow) {
	t.Helper()
	sc := crossT1(100)
	sc.Seed = seed
	f := newFabric(t, sc, seed, nil)
	f.Sim.SetLossAll(p)
	fl := connect(t, f, 0, 1, mrc.QPConfig{Transport: tr}, size, 256<<10, 16)
	fl.StartAt(0)
	f.RunUntilDone(limit)
	if !fl.Done() {
		t.Logf("%v at loss %.0f%%: %d of %d bytes by %.1f ms, errors %v", tr, 100*p, fl.Completed(), size, float64(limit)/1e6, fl.Errors)
		return float64(fl.Completed()) * 8 / (float64(f.Sim.Now()-fl.Start) / 1e9), fl
	}
	if !fl.Exact() || len(fl.Errors) != 0 {
		t.Errorf("%v at loss %.0f%%: exact %v, errors %v", tr, 100*p, fl.Exact(), fl.Errors)
	}
	return fl.Goodput(), fl
}

// 1% and 5% random loss on every link: data exact; MRC goodput ≥ 85% (1%)
// and ≥ 60% (5%) of the loss-free run; the go-back-N baseline within bands
// around the figures the README quotes (over the held-out seeds 101–110,
// 19–35% and 3.3–5.1% of its own loss-free goodput).
//
// Verdicts: 1% on every seed; 5% on the distribution: the median ≥ 60% and
// every seed ≥ 50%, since over the held-out seeds 101–110 it spans 58–63%
// with 3 of 10 below 60% (docs/engine.md "Scenarios over seeds").
func TestScenarioRandomLoss(t *testing.T) {
	losses := []struct {
		p        float64
		want     float64 // MRC, fraction of loss-free, at least
		gLo, gHi float64 // go-back-N, fraction of its loss-free, band
	}{
		{0.01, 0.85, 0.12, 0.50},
		{0.05, 0.60, 0.02, 0.08}, // median; floor 0.50 on each seed below
	}
	mrcD := make([]dist, len(losses))
	gbnD := make([]dist, len(losses))
	for i, tc := range losses {
		mrcD[i].name = fmt.Sprintf("MRC at %.0f%% loss / loss-free", 100*tc.p)
		gbnD[i].name = fmt.Sprintf("go-back-N at %.0f%% loss / loss-free", 100*tc.p)
	}
	sweep(t, func(t *testing.T, seed uint64) {
		const size = 64 << 20
		base, _ := runLoss(t, seed, 0, mrc.MRC, size, 1e9)
		// The go-back-N baseline moves 2 MiB (it is slow under loss), for at
		// most 20 ms of simulated time.
		const gbnSize, gbnLimit = 2 << 20, 20 * ms
		gbnBase, _ := runLoss(t, seed, 0, mrc.GoBackN, gbnSize, gbnLimit)
		t.Logf("loss-free: MRC %.1f Gbit/s, go-back-N %.1f Gbit/s", base/1e9, gbnBase/1e9)
		for i, tc := range losses {
			g, fl := runLoss(t, seed, tc.p, mrc.MRC, size, 1e9)
			gb, _ := runLoss(t, seed, tc.p, mrc.GoBackN, gbnSize, gbnLimit)
			s := fl.Snapshot()
			t.Logf("loss %.0f%%/link: MRC %.1f Gbit/s = %.1f%% of loss-free (retransmits %d, losses %d, timeouts %d); go-back-N %.2f Gbit/s = %.1f%% of its loss-free",
				100*tc.p, g/1e9, 100*g/base, s.Counters.TxRtx, s.Counters.Losses, s.Counters.Timeouts, gb/1e9, 100*gb/gbnBase)
			t.Logf("  MRC EV transitions [from][to] %v; no-EV stalls %d; srtt %d ns, cwnd %d B",
				s.Counters.EVTransitions, s.Counters.NoEVStalls, s.SRTT, s.Cwnd)
			mrcD[i].add(seed, g/base)
			gbnD[i].add(seed, gb/gbnBase)
		}
	})
	for i, tc := range losses {
		if tc.p < 0.05 {
			mrcD[i].eachAtLeast(t, tc.want)
		} else {
			mrcD[i].medianAtLeast(t, tc.want)
			mrcD[i].eachAtLeast(t, lossFloor5)
		}
		gbnD[i].eachWithin(t, tc.gLo, tc.gHi)
	}
}

// lossFloor5 is what every seed must keep at 5 % loss (MRC / loss-free)
// while the 60 % claim holds on the median: the lowest seed seen is 0.536
// (tuning seed 1), 0.584 on the held-out seeds.
const lossFloor5 = 0.50

// every calls fn at t0, t0+step, ... up to t1.
func every(s *fabricsim.Sim, t0, t1, step int64, fn func(now int64)) {
	for t := t0; t <= t1; t += step {
		s.At(t, func() { fn(s.Now()) })
	}
}

// A T0–T1 link blackholed mid-transfer: every EV through it is ASSUMED_BAD
// within 3 RTTs; packets lost ≤ packets in flight on those EVs; goodput back
// to ≥ 95% of the remaining capacity; link restored → probes return those EVs
// to GOOD. Every claim on every seed.
func TestScenarioBlackhole(t *testing.T) {
	detect := dist{name: "detection time / srtt"}
	share := dist{name: "goodput after detection / capacity"}
	sweepPair(t, &detect, &share, blackhole)
	detect.eachWithin(t, 0, 3)
	share.eachAtLeast(t, 0.95)
}

// blackhole runs the scenario on one seed and returns the detection time
// in RTTs and the goodput after detection as a fraction of the remaining
// capacity (ok false if the EVs were never all declared bad).
func blackhole(t *testing.T, seed uint64) (detectRTT, share float64, ok bool) {
	sc := crossT1(100)
	sc.Seed = seed
	f := newFabric(t, sc, seed, nil)
	fl := connect(t, f, 0, 1, mrc.QPConfig{}, 64<<20, 64<<10, 64)
	const plane, t1 = 0, 1
	link := f.Sim.FabricLink(plane, 0, t1)
	const fault, restore = 300 * us, 900 * us
	fl.StartAt(0)
	var (
		through  = map[uint32]bool{} // EVs through the link, active at the fault
		inFlight uint64
		srtt     int64
		allBadAt int64  = -1
		atDetect uint64 // in flight on those EVs when the last of them went ASSUMED_BAD
	)
	onPath := func(e mrc.EVSnapshot) bool { return e.Plane == plane && int(e.EV.T1())%sc.T1s == t1 }
	f.Sim.At(fault, func() {
		link.SetBlackhole(true)
		s := fl.Snapshot()
		srtt = int64(s.SRTT)
		for _, e := range s.EVs {
			if e.Active && onPath(e) && (e.State == mrc.EVGood || e.State == mrc.EVSkip) {
				through[uint32(e.EV)] = true
				inFlight += e.Sent - e.Acked
			}
		}
	})
	every(f.Sim, fault+us, restore, us, func(now int64) {
		if allBadAt >= 0 {
			return
		}
		s := fl.Snapshot()
		var n uint64
		for _, e := range s.EVs {
			if through[uint32(e.EV)] {
				if e.State != mrc.EVAssumedBad {
					return
				}
				n += e.Sent - e.Acked
			}
		}
		allBadAt, atDetect = now, n
	})
	f.Sim.At(restore, func() { link.SetBlackhole(false) })
	var lost, lostOther, probesLost uint64 // frames the link ate in the data direction (T0 -> T1)
	f.Sim.Trace = func(_ int64, what string, p *fabricsim.Port, frame []byte) {
		if what == "l" && p == link.A {
			switch op := wire.BTH(frame[wire.EthLen+2*wire.IPv6Len+wire.UDPLen:]).Opcode(); {
			case op.IsData():
				lost++
				if !through[uint32(wire.EVFromWire(wire.UDP(frame[wire.EthLen+2*wire.IPv6Len:]).SrcPort(), wire.IPv6(frame[wire.EthLen:]).FlowLabel()))] {
					lostOther++
				}
			case op == wire.OpProbe:
				probesLost++
			}
		}
	}
	f.RunUntilDone(1e9)
	checkFlow(t, fl)
	revLost := link.B.Ctr[fabricsim.DropBlackhole]
	end := fl.Snapshot()
	badOnPath := 0
	for _, e := range end.EVs {
		if onPath(e) && e.Transitions[mrc.EVGood][mrc.EVAssumedBad] > 0 {
			badOnPath++
		}
	}
	t.Logf("%d EVs through the link, srtt %d ns, in flight on them at the fault %d, at detection %d; all ASSUMED_BAD after %d ns (%.1f RTT); data lost %d (%d on EVs swapped in after the fault), probes lost %d, reverse lost %d; %d EVs on the path went ASSUMED_BAD in all",
		len(through), srtt, inFlight, atDetect, allBadAt-fault, float64(allBadAt-fault)/float64(srtt), lost, lostOther, probesLost, revLost, badOnPath)
	if len(through) == 0 {
		t.Fatal("no EV went through the blackholed link")
	}
	if allBadAt < 0 {
		t.Errorf("EVs through the link never all ASSUMED_BAD")
	}
	// In flight is counted when the EVs are declared bad: whatever the
	// sender put on them until it knew. More loss means it kept sending
	// into the dead link (on those EVs or on replacements through it).
	if lost > atDetect {
		t.Errorf("lost %d packets > %d in flight on those EVs when they were declared bad", lost, atDetect)
	}
	// Remaining capacity: the T0 keeps 3 of 4 uplinks of the host's rate in
	// plane 0, so the host links still bound it: 4 ports.
	c := capacity(sc, 4)
	from := allBadAt + 50*us
	if allBadAt < 0 {
		from = fault + 100*us
	}
	g := fl.GoodputIn(from, restore)
	t.Logf("goodput after detection %.1f Gbit/s = %.1f%% of remaining capacity %.1f", g/1e9, 100*g/c, c/1e9)
	s := fl.Snapshot()
	back := 0
	for _, e := range s.EVs {
		if through[uint32(e.EV)] {
			if e.Transitions[mrc.EVAssumedBad][mrc.EVGood] > 0 {
				back++
			}
		}
	}
	t.Logf("after restore: %d of %d EVs back to GOOD by probes; flow ended %.0f µs after restore", back, len(through), float64(fl.End-restore)/1e3)
	if back != len(through) {
		t.Errorf("%d of %d EVs returned to GOOD after the link was restored", back, len(through))
	}
	return float64(allBadAt-fault) / float64(srtt), g / c, allBadAt >= 0
}

// NIC port down at the receiver: the sender drops that plane after the
// port-status update; goodput (P−1)/P ± 5%; no QP error; port up → full rate
// again. Every claim on every seed.
func TestScenarioReceiverPortDown(t *testing.T) {
	down := dist{name: "goodput while down / ((P-1)/P capacity)"}
	up := dist{name: "goodput after up / capacity"}
	sweepPair(t, &down, &up, receiverPortDown)
	down.eachWithin(t, 0.95, 1.05)
	up.eachAtLeast(t, 0.95)
}

func receiverPortDown(t *testing.T, seed uint64) (downShare, upShare float64, ok bool) {
	sc := crossT1(100)
	sc.Seed = seed
	f := newFabric(t, sc, seed, nil)
	fl := connect(t, f, 0, 1, mrc.QPConfig{}, 96<<20, 64<<10, 64)
	const plane = 3
	const down, up = 300 * us, 1300 * us
	fl.StartAt(0)
	f.Sim.At(down, func() { f.Sim.HostLink(1, plane).SetDown(true) })
	f.Sim.At(up, func() { f.Sim.HostLink(1, plane).SetDown(false) })
	var maskAt int64 = -1
	var sentAtMask uint64
	planeSent := func() (n uint64) {
		for _, e := range fl.Snapshot().EVs {
			if e.Plane == plane {
				n += e.Sent
			}
		}
		return n
	}
	every(f.Sim, down, up, us, func(now int64) {
		if maskAt < 0 && fl.Snapshot().RemoteUp&(1<<plane) == 0 {
			maskAt, sentAtMask = now, planeSent()
		}
	})
	var sentAtUp uint64
	f.Sim.At(up-1, func() { sentAtUp = planeSent() })
	var upAgainAt int64 = -1
	every(f.Sim, up, up+500*us, us, func(now int64) {
		if upAgainAt < 0 && fl.Snapshot().RemoteUp&(1<<plane) != 0 {
			upAgainAt = now
		}
	})
	f.RunUntilDone(1e9)
	checkFlow(t, fl)
	c := capacity(sc, 4)
	want := c * float64(sc.Planes-1) / float64(sc.Planes)
	g := fl.GoodputIn(maskAt+50*us, up)
	gUp := fl.GoodputIn(up+100*us, fl.End)
	t.Logf("sender saw the port-status update %d ns after the port went down; plane %d data sent after it: %d; goodput while down %.1f Gbit/s = %.3f of (P-1)/P capacity %.1f; after up %.1f Gbit/s = %.1f%% of %.1f",
		maskAt-down, plane, sentAtUp-sentAtMask, g/1e9, g/want, want/1e9, gUp/1e9, 100*gUp/c, c/1e9)
	if maskAt < 0 {
		t.Errorf("the sender never cleared plane %d from the peer's port mask", plane)
		return 0, 0, false
	}
	if sentAtUp != sentAtMask {
		t.Errorf("%d data packets sent on plane %d after the port-status update", sentAtUp-sentAtMask, plane)
	}
	t.Logf("the sender restored plane %d %d ns after the port came up; plane %d data sent after up %d; cwnd %d",
		plane, upAgainAt-up, plane, planeSent()-sentAtUp, fl.Snapshot().Cwnd)
	if testing.Verbose() {
		for t0 := int64(0); t0 < fl.End; t0 += 100 * us {
			t.Logf("  [%4d µs] %.1f Gbit/s", t0/us, fl.GoodputIn(t0, t0+100*us)/1e9)
		}
		sn := fl.Snapshot()
		t.Logf("  rtx %d timeouts %d losses %d transitions %v; fabric %v; receiver %+v", sn.Counters.TxRtx, sn.Counters.Timeouts, sn.Counters.Losses, sn.Counters.EVTransitions, f.Sim.Totals(), f.Nodes[1].E.Counters())
	}
	for _, n := range f.Nodes {
		for _, cpl := range n.Completions {
			if cpl.Kind == mrc.CompQPError {
				t.Errorf("host %d: QP error %v", n.ID, cpl)
			}
		}
	}
	return g / want, gUp / c, true
}

// ECN: two flows pinned to one path while a second path is idle → SKIPs
// move load; each flow ≥ 45% of the capacity (7:1: in the median over the
// seeds, and ≥ 40% on each; 3:1: on every seed).
//
// One plane, 2 T0 × 2 T1, 2 hosts per T0; fabric links run at half the host
// rate, so the two T0 0 uplinks together are the bottleneck of the flows
// h0→h2 and h1→h3. The senders' templates name T1 0 for seven of the eight
// T1 slots (the EV's T1 field picks a slot), so seven of each QP's eight EVs
// take path A (T1 0) and one takes path B (T1 1): spraying alone would put
// 7/8 of both flows on A. Only ECN-driven SKIPs can move the load to B.
func TestScenarioECNBalance(t *testing.T) {
	sc := fabricsim.DefaultConfig()
	sc.Planes, sc.T0s, sc.T1s, sc.HostsPerT0 = 1, 2, 2, 2
	sc.Host.RateBps, sc.Fabric.RateBps = 100e9, 50e9
	for _, slots := range []int{8, 4} {
		t.Run(fmt.Sprintf("%d:1", slots-1), func(t *testing.T) {
			low := dist{name: "lower flow's goodput / capacity"}
			sweep(t, func(t *testing.T, seed uint64) {
				sc := sc
				sc.Seed = seed
				low.add(seed, ecnBalance(t, sc, seed, slots))
			})
			// 7:1 is a verdict on the distribution: over the held-out
			// seeds 101–110 the lower flow gets 43.2–47.3%, 3 of 10
			// below 45% (docs/engine.md), so the median ≥ 45% and each
			// seed ≥ 40%. 3:1 holds on every seed.
			if slots == 8 {
				low.medianAtLeast(t, 0.45)
				low.eachAtLeast(t, 0.40)
			} else {
				low.eachAtLeast(t, 0.45)
			}
		})
	}
}

// ecnBalance runs one seed and returns the lower of the two flows'
// goodputs as a fraction of the capacity.
func ecnBalance(t *testing.T, sc fabricsim.Config, seed uint64, slots int) float64 {
	skew := func(h int, c *mrc.Config) {
		if h > 1 {
			return
		}
		tm := c.Template
		lp := &tm.Local.Planes[0]
		a, b := lp.T1[0], lp.T1[1]
		tm.T1Count = slots
		lp.T1 = nil
		for k := 0; k < slots-1; k++ {
			lp.T1 = append(lp.T1, a)
		}
		lp.T1 = append(lp.T1, b)
		if err := tm.Validate(); err != nil {
			t.Fatal(err)
		}
	}
	run := func() (g [2]float64, onB [2]float64, snaps [2]mrc.QPSnapshot) {
		f := newFabric(t, sc, seed, skew)
		var fls [2]*Flow
		for i := range fls {
			fl := connect(t, f, i, i+2, mrc.QPConfig{NumEVs: slots}, 16<<20, 64<<10, 64)
			fl.StartAt(0)
			fls[i] = fl
		}
		f.RunUntilDone(1e9)
		end := min(fls[0].End, fls[1].End)
		for i, fl := range fls {
			checkFlow(t, fl)
			g[i] = fl.GoodputIn(fl.Start, end)
			snaps[i] = fl.Snapshot()
			var a, b uint64
			for _, e := range snaps[i].EVs {
				if int(e.EV.T1())%slots == slots-1 {
					b += e.Sent
				} else {
					a += e.Sent
				}
			}
			onB[i] = float64(b) / float64(a+b)
		}
		return
	}
	g, onB, snaps := run()
	c := 2 * sc.Fabric.RateBps * PayloadEfficiency(2048, sc.Mode, 24)
	for i := range g {
		var ecn, skips uint64
		for _, e := range snaps[i].EVs {
			ecn += e.ECN
			skips += e.Transitions[mrc.EVGood][mrc.EVSkip]
		}
		t.Logf("flow %d: %.1f Gbit/s = %.1f%% of capacity %.1f; share of packets on path B %.3f (1/%d without SKIPs); ECN echoes %d, GOOD→SKIP %d",
			i, g[i]/1e9, 100*g[i]/c, c/1e9, onB[i], slots, ecn, skips)
	}
	return min(g[0], g[1]) / c
}

// 7:1 incast with trimming: all data exact, no QP error, Jain fairness ≥
// 0.95 across the seven; a victim flow through the same T0 to another host
// keeps ≥ 95% of its rate.
//
// 2 planes × 5 T0 × 2 T1, 2 hosts per T0, every link 100 Gbit/s: h2..h8
// write to h0; the victim h9 writes to h1, which hangs off h0's T0. The
// T1→T0 links into that T0 carry exactly the two hosts' link capacity, so
// only the receiver's downlinks are oversubscribed (7:1) and trim.
func TestScenarioIncast(t *testing.T) {
	jain := dist{name: "Jain fairness of the seven"}
	victim := dist{name: "victim beside the incast / alone"}
	sweepPair(t, &jain, &victim, func(t *testing.T, seed uint64) (float64, float64, bool) {
		j, v := incast(t, seed)
		return j, v, true
	})
	jain.eachAtLeast(t, 0.95)
	victim.eachAtLeast(t, 0.95)
}

// incast runs one seed and returns the Jain fairness of the seven senders
// and the victim's rate beside the incast as a fraction of its rate alone.
func incast(t *testing.T, seed uint64) (jain, victim float64) {
	sc := fabricsim.DefaultConfig()
	sc.Planes, sc.T0s, sc.T1s, sc.HostsPerT0 = 2, 5, 2, 2
	sc.Host.RateBps, sc.Fabric.RateBps = 100e9, 100e9
	sc.Seed = seed
	const victimSize = 48 << 20

	// The victim alone.
	f := newFabric(t, sc, seed, nil)
	v := connect(t, f, 9, 1, mrc.QPConfig{}, victimSize, 64<<10, 64)
	v.StartAt(0)
	f.RunUntilDone(1e9)
	checkFlow(t, v)

	f = newFabric(t, sc, seed, nil)
	var in []*Flow
	for s := 2; s <= 8; s++ {
		fl := connect(t, f, s, 0, mrc.QPConfig{}, 4<<20, 64<<10, 64)
		fl.StartAt(0)
		in = append(in, fl)
	}
	vi := connect(t, f, 9, 1, mrc.QPConfig{}, victimSize, 64<<10, 64)
	vi.StartAt(0)
	f.RunUntilDone(1e9)
	first, rates, sum, trims, sent := incastSummary(t, in, vi)
	j := Jain(rates)
	alone := v.GoodputIn(0, first)
	with := vi.GoodputIn(0, first)
	c := capacity(sc, 2)
	t.Logf("incast: %d senders, sum %.1f Gbit/s = %.1f%% of the receiver's %.1f; Jain %.4f; rates %.1f Gbit/s; trim NACKs %d for %d data packets sent",
		len(in), sum/1e9, 100*sum/c, c/1e9, j, gbits(rates), trims, sent)
	t.Logf("victim: %.1f Gbit/s alone, %.1f Gbit/s beside the incast (%.1f%%)", alone/1e9, with/1e9, 100*with/alone)
	for p := 0; p < sc.Planes; p++ {
		for k := 0; k < sc.T1s; k++ {
			port := f.Sim.T1(wire.Plane(p), k).Ports()[0] // toward T0 0
			t.Logf("T1 %d.%d -> T0 0: tx %d, ECN marked %d, trimmed %d, max backlog %d B", p, k,
				port.Ctr[fabricsim.CtrTx], port.Ctr[fabricsim.CtrECNMarked], port.Ctr[fabricsim.CtrTrimmed], port.MaxBacklog)
		}
		for d := 0; d < 2; d++ {
			port := f.Sim.T0(wire.Plane(p), 0).Ports()[d]
			t.Logf("T0 %d.0 -> h%d: tx %d, trimmed %d, max backlog %d B", p, d,
				port.Ctr[fabricsim.CtrTx], port.Ctr[fabricsim.CtrTrimmed], port.MaxBacklog)
		}
	}
	vs := vi.Snapshot()
	var vecn uint64
	for _, e := range vs.EVs {
		vecn += e.ECN
	}
	t.Logf("victim: %d data packets, ECN echoes %d, trim NACKs %d, retransmissions %d", vs.Counters.TxData, vecn, vs.Counters.NACKsRcvd[wire.NackTrimmed], vs.Counters.TxRtx)
	if trims == 0 {
		t.Error("no trims: the scenario did not congest the last hop")
	}
	return j, with / alone
}

func gbits(xs []float64) []float64 {
	o := make([]float64, len(xs))
	for i, x := range xs {
		o[i] = float64(int(x/1e8)) / 10
	}
	return o
}

// DENIED EVs and planes are never used (checked on the wire, at the sender's
// NIC ports); every state transition is counted (each EV's transition
// counters add up to its current state).
func TestScenarioDenied(t *testing.T) {
	sc := crossT1(100)
	sc.Fabric.RateBps = 20e9 // 4 × 20 < 100: the uplinks mark ECN, so SKIPs happen too
	f := newFabric(t, sc, 17, nil)
	// A blackhole for a while, so ASSUMED_BAD and probing happen too.
	f.Sim.At(300*us, func() { f.Sim.FabricLink(0, 0, 3).SetBlackhole(true) })
	f.Sim.At(400*us, func() { f.Sim.FabricLink(0, 0, 3).SetBlackhole(false) })
	fl := connect(t, f, 0, 1, mrc.QPConfig{}, 32<<20, 64<<10, 64)
	fl.StartAt(0)
	const denyEVs, denyPlane, allowPlane = 100 * us, 200 * us, 600 * us
	const plane = 2
	e := f.Nodes[0].E
	denied := map[wire.EV]bool{}
	var planeDenied bool
	f.Sim.At(denyEVs, func() {
		n := 0
		for _, x := range fl.Snapshot().EVs {
			if x.Active && x.Plane != plane && n < 6 {
				if err := e.Deny(fl.SQ, x.EV); err != nil {
					t.Fatal(err)
				}
				denied[x.EV] = true
				n++
			}
		}
	})
	f.Sim.At(denyPlane, func() {
		if err := e.DenyPlane(fl.SQ, plane); err != nil {
			t.Fatal(err)
		}
		planeDenied = true
	})
	f.Sim.At(allowPlane, func() {
		if err := e.AllowPlane(fl.SQ, plane); err != nil {
			t.Fatal(err)
		}
		planeDenied = false
	})
	var onDenied, onDeniedPlane, planeAfterAllow int
	f.Sim.Trace = func(_ int64, what string, p *fabricsim.Port, frame []byte) {
		if what != "q" || p.Name[:3] != "h0/" {
			return
		}
		var pk wire.Packet
		if (wire.Decoder{}).Decode(frame, &pk) != nil || pk.DestQP == wire.QPEndpoint {
			return
		}
		if denied[pk.EV] {
			onDenied++
		}
		if pk.EV.Plane() == plane {
			if planeDenied {
				onDeniedPlane++
			} else if f.Sim.Now() > allowPlane {
				planeAfterAllow++
			}
		}
	}
	f.RunUntilDone(1e9)
	checkFlow(t, fl)
	s := fl.Snapshot()
	var tr [4][4]uint64
	for _, x := range s.EVs {
		// Every EV starts GOOD; ins - outs of each state must be 1 for the
		// state it is in now (and 0 for the others).
		for st := mrc.EVState(0); st < 4; st++ {
			var in, out int64
			for o := mrc.EVState(0); o < 4; o++ {
				in += int64(x.Transitions[o][st])
				out += int64(x.Transitions[st][o])
				tr[o][st] += x.Transitions[o][st]
			}
			if st == mrc.EVGood {
				in++
			}
			want := int64(0)
			if x.State == st {
				want = 1
			}
			if in-out != want {
				t.Errorf("EV %v in %v: %v entered %d times, left %d times", x.EV, x.State, st, in, out)
			}
		}
	}
	if tr != s.Counters.EVTransitions {
		t.Errorf("QP transition counters %v != sum over EVs %v", s.Counters.EVTransitions, tr)
	}
	t.Logf("denied %d EVs and plane %d: frames on denied EVs %d, on the denied plane %d, on the plane after allow %d; transitions [from][to] %v",
		len(denied), plane, onDenied, onDeniedPlane, planeAfterAllow, tr)
	if onDenied != 0 || onDeniedPlane != 0 {
		t.Errorf("%d frames on DENIED EVs, %d on the DENIED plane", onDenied, onDeniedPlane)
	}
	if planeAfterAllow == 0 {
		t.Error("the plane was not used again after AllowPlane")
	}
	if tr[mrc.EVGood][mrc.EVDenied] == 0 {
		t.Error("no GOOD→DENIED transition counted")
	}
}

// The same seed replays the same event trace bit for bit (engines and
// fabric); another fabric seed gives another trace.
func TestScenarioReplay(t *testing.T) {
	run := func(simSeed uint64) (uint64, uint64, int64) {
		sc := crossT1(100)
		sc.Seed = simSeed
		f := newFabric(t, sc, 21, nil)
		f.Sim.SetLossAll(0.01)
		fl := connect(t, f, 0, 1, mrc.QPConfig{}, 4<<20, 64<<10, 64)
		fl.StartAt(0)
		f.RunUntilDone(1e9)
		checkFlow(t, fl)
		return f.Sim.TraceHash(), f.Sim.Events(), fl.End
	}
	h1, e1, end1 := run(5)
	h2, e2, end2 := run(5)
	h3, _, _ := run(6)
	t.Logf("trace %016x, %d events, end %d ns", h1, e1, end1)
	if h1 != h2 || e1 != e2 || end1 != end2 {
		t.Errorf("same seed: traces %016x/%016x, events %d/%d, end %d/%d", h1, h2, e1, e2, end1, end2)
	}
	if h1 == h3 {
		t.Errorf("seeds 5 and 6 replayed the same trace")
	}
}

// ECMP mode end to end: plain IPv6, the T0s hash the EVs over their uplinks.
// Data exact and every T1 carries data. Hash collisions show as uneven T1
// loads: the busiest T1's data frames over the least busy's is at least 1.5
// times SRv6's (where the sender names each EV's T1; 2.4–6.5 times over
// seeds 1–10) on every seed. They cost
// no goodput here, since each plane's four T1s have four times the host
// link's rate: the goodput as a fraction of the mode's own capacity
// (ECMP's headers are shorter) is within ±2% of SRv6's on the same seed.
func TestScenarioECMPMode(t *testing.T) {
	ratio := dist{name: "ECMP / SRv6 share of own capacity"}
	spread := dist{name: "ECMP T1 spread / SRv6 T1 spread"}
	sweep(t, func(t *testing.T, seed uint64) {
		ecmp, esp := ecmpRun(t, seed, fabricsim.ModeECMP)
		srv6, ssp := ecmpRun(t, seed, fabricsim.ModeSRv6)
		t.Logf("share of capacity: ECMP %.1f%%, SRv6 %.1f%%; busiest / least busy T1: ECMP %.3f, SRv6 %.3f", 100*ecmp, 100*srv6, esp, ssp)
		ratio.add(seed, ecmp/srv6)
		spread.add(seed, esp/ssp)
	})
	ratio.eachWithin(t, 0.98, 1.02)
	spread.eachAtLeast(t, 1.5)
}

// ecmpRun moves 16 MiB h0 -> h1 in the given mode on one seed, checks that
// every T1 carried data and returns the goodput as a fraction of the
// mode's capacity, and the busiest T1's data frames over the least busy's.
func ecmpRun(t *testing.T, seed uint64, mode fabricsim.Mode) (share, spread float64) {
	sc := crossT1(100)
	sc.Mode = mode
	sc.Seed = seed
	f := newFabric(t, sc, seed, nil)
	fl := connect(t, f, 0, 1, mrc.QPConfig{}, 16<<20, 64<<10, 64)
	fl.StartAt(0)
	f.RunUntilDone(1e9)
	checkFlow(t, fl)
	used := 0
	lo, hi := uint64(1<<63), uint64(0)
	for p := 0; p < sc.Planes; p++ {
		for j := 0; j < sc.T1s; j++ {
			n := f.Sim.T1(wire.Plane(p), j).Ports()[1].Ctr[fabricsim.CtrTx] // toward T0 1
			if n > 0 {
				used++
			}
			lo, hi = min(lo, n), max(hi, n)
		}
	}
	if used != sc.Planes*sc.T1s {
		t.Errorf("%v: only %d of %d T1s carried data", mode, used, sc.Planes*sc.T1s)
		return fl.Goodput() / capacity(sc, 4), 0
	}
	return fl.Goodput() / capacity(sc, 4), float64(hi) / float64(lo)
}

// A T1 whose data plane hangs mid-transfer (links up, control plane
// "healthy"): no QP error, data exact, the job continues (article result
// 10); the EVs through it go ASSUMED_BAD and come back after the reboot.
// On every seed.
func TestScenarioT1Hang(t *testing.T) { sweep(t, t1Hang) }

func t1Hang(t *testing.T, seed uint64) {
	sc := crossT1(100)
	sc.Seed = seed
	f := newFabric(t, sc, seed, nil)
	fl := connect(t, f, 0, 1, mrc.QPConfig{}, 48<<20, 64<<10, 64)
	fl.StartAt(0)
	const hang, reboot = 200 * us, 700 * us
	sw := f.Sim.T1(1, 2)
	f.Sim.At(hang, func() { sw.SetHung(true) })
	f.Sim.At(reboot, func() { sw.SetHung(false) })
	f.RunUntilDone(1e9)
	checkFlow(t, fl)
	s := fl.Snapshot()
	c := capacity(sc, 4)
	t.Logf("T1 hang %d µs: frames dropped %d; goodput before %.1f, during %.1f, after %.1f Gbit/s (capacity %.1f); transitions %v",
		(reboot-hang)/us, sw.Counters()[fabricsim.DropHung], fl.GoodputIn(0, hang)/1e9, fl.GoodputIn(hang, reboot)/1e9,
		fl.GoodputIn(reboot, fl.End)/1e9, c/1e9, s.Counters.EVTransitions)
	if s.Counters.EVTransitions[mrc.EVGood][mrc.EVAssumedBad] == 0 || s.Counters.EVTransitions[mrc.EVAssumedBad][mrc.EVGood] == 0 {
		t.Errorf("no EV went ASSUMED_BAD and back: %v", s.Counters.EVTransitions)
	}
}
