package mrc

import (
	"fmt"
	"testing"

	"github.com/softmrc/softmrc/internal/wire"
)

// startTransfer posts size bytes from side 0 to side 1 without waiting.
func (h *harness) startTransfer(size, chunk int) (src, dst []byte) {
	src = h.region(0, 0x11, 0, size, AccessLocalRead)
	dst = make([]byte, size)
	h.mem[1].Register(0x22, 0, dst, AccessRemoteWrite)
	for off := 0; off < size; off += chunk {
		if err := h.eng[0].PostWrite(h.qp[0], WR{ID: uint64(off), LKey: 0x11, Addr: uint64(off), Len: uint32(chunk), RemoteVA: uint64(off), RKey: 0x22}); err != nil {
			h.t.Fatal(err)
		}
	}
	return
}

func (h *harness) rxBytes() uint64 { return h.snap(1).Counters.RxBytes }

func TestBlackholedPath(t *testing.T) {
	h := newHarness(t, hopts{seed: 51})
	const size, chunk = 48 << 20, 1 << 20
	h.startTransfer(size, chunk)
	h.run(200*Microsecond, nil)
	srtt := h.snap(0).SRTT
	var atFault QPSnapshot
	h.eng[0].Snapshot(h.qp[0], &atFault)

	// T0(plane 0)–T1 #1 dies in both directions: every path through it.
	// Detection latency per EV: from the first packet it carries into the
	// dead link to its ASSUMED_BAD, sampled every 500 ns.
	dead := func(ev wire.EV) bool { return ev.Plane() == 0 && ev.T1()%4 == 1 }
	firstSent := map[wire.EV]Time{}
	h.Filter = func(from int, _ wire.Plane, f []byte) bool {
		var p wire.Packet
		if (wire.Decoder{}).Decode(f, &p) != nil || !dead(p.EV) {
			return false
		}
		if _, ok := firstSent[p.EV]; !ok && from == 0 && p.Opcode.IsData() {
			firstSent[p.EV] = h.now
		}
		return true
	}
	t0 := h.now
	badAt := map[wire.EV]Time{}
	var s QPSnapshot
	for h.now < t0+12*srtt {
		h.run(h.now+500, nil)
		h.eng[0].Snapshot(h.qp[0], &s)
		for _, e := range s.EVs {
			if _, seen := badAt[e.EV]; !seen && e.State == EVAssumedBad {
				badAt[e.EV] = h.now
			}
		}
	}
	if len(firstSent) == 0 {
		t.Fatal("no packet entered the dead link")
	}
	var worst Time
	for ev, ts := range firstSent {
		b, ok := badAt[ev]
		if !ok {
			t.Errorf("EV %v carried packets into the dead link and never went ASSUMED_BAD", ev)
			continue
		}
		worst = max(worst, b-ts)
		if b-ts > 3*srtt {
			t.Errorf("EV %v went ASSUMED_BAD %d ns after its first packet into the dead link: more than 3 RTTs (%d ns)", ev, b-ts, 3*srtt)
		}
	}
	// The group (plane 0, T1 1) is condemned as a whole: every EV of it,
	// reserve EVs too, goes ASSUMED_BAD, and no reserve EV through the dead
	// link is swapped in and used.
	for _, e := range atFault.EVs {
		if !dead(e.EV) {
			continue
		}
		if _, ok := badAt[e.EV]; !ok {
			t.Errorf("EV %v (active %v) of the dead group never went ASSUMED_BAD", e.EV, e.Active)
		}
		if _, used := firstSent[e.EV]; used && !e.Active && e.State == EVGood {
			t.Errorf("reserve EV %v through the dead link was swapped in and used", e.EV)
		}
	}
	var lost, inflight uint64
	for _, e := range s.EVs {
		if dead(e.EV) {
			lost += e.Losses + e.Timeouts
		}
	}
	for _, e := range atFault.EVs {
		if dead(e.EV) {
			inflight += e.Sent - e.Acked
			lost -= e.Losses + e.Timeouts
		}
	}
	t.Logf("%d EVs hit the dead link; worst detection %d ns (srtt %d); %d packets lost, %d were in flight on them at the fault",
		len(firstSent), worst, srtt, lost, inflight)
	// S9's bound: what the QP lost on the dead paths is no more than what
	// was unacknowledged on them when they turned ASSUMED_BAD.
	atBad := s.Counters.InFlightAtBad - atFault.Counters.InFlightAtBad
	t.Logf("%d packets unacknowledged on the dead EVs when they turned ASSUMED_BAD", atBad)
	if atBad == 0 || lost > atBad {
		t.Errorf("InFlightAtBad grew by %d during the fault, %d packets lost on the dead EVs: want lost <= InFlightAtBad, and > 0", atBad, lost)
	}

	// Goodput while the link stays dead.
	b0, tA := h.rxBytes(), h.now
	h.run(h.now+300*Microsecond, nil)
	rate := float64(h.rxBytes()-b0) * 8 / float64(h.now-tA) // Gb/s
	t.Logf("goodput with the dead link %.1f Gb/s of 400", rate)
	if rate < 0.95*400*2048/2150 {
		t.Errorf("goodput %.1f Gb/s, want >= 95%% of the 4 x 100G links' payload rate", rate)
	}

	// Restore: probes bring the EVs back.
	h.Filter = nil
	h.run(h.now+500*Microsecond, nil)
	s = h.snap(0)
	checkTransitions(t, s)
	for _, e := range s.EVs {
		if _, hit := firstSent[e.EV]; hit && (e.State != EVGood || e.Transitions[EVAssumedBad][EVGood] == 0) {
			t.Errorf("EV %v is %v after the link came back (probes ok %d)", e.EV, e.State, e.ProbesOK)
		}
	}
	if s.State != QPReady {
		t.Fatalf("QP %v", s.State)
	}
}

func TestReceiverPortDown(t *testing.T) {
	h := newHarness(t, hopts{seed: 61})
	const size, chunk = 48 << 20, 1 << 20
	src, dst := h.startTransfer(size, chunk)
	h.run(150*Microsecond, nil)
	b0, tA := h.rxBytes(), h.now
	h.run(h.now+100*Microsecond, nil)
	full := float64(h.rxBytes()-b0) / float64(h.now-tA)

	h.eng[1].SetPortState(h.now, 3, false)
	h.run(h.now+50*Microsecond, nil)
	if m := h.snap(0).RemoteUp; m != 0b0111 {
		t.Fatalf("sender's view of the peer's ports %04b, want 0111", m)
	}
	b0, tA = h.rxBytes(), h.now
	h.run(h.now+200*Microsecond, nil)
	down := float64(h.rxBytes()-b0) / float64(h.now-tA)
	t.Logf("rate with a port down: %.2f of full", down/full)
	if r := down / full; r < 0.70 || r > 0.80 {
		t.Errorf("rate with 1 of 4 ports down is %.2f of full, want 0.75 ± 0.05", r)
	}
	h.eng[1].SetPortState(h.now, 3, true)
	h.run(h.now+50*Microsecond, nil)
	if m := h.snap(0).RemoteUp; m != 0b1111 {
		t.Fatalf("after port up the sender sees %04b", m)
	}
	b0, tA = h.rxBytes(), h.now
	h.run(h.now+100*Microsecond, nil)
	up := float64(h.rxBytes()-b0) / float64(h.now-tA)
	if up/full < 0.9 {
		t.Errorf("rate after port up %.2f of full", up/full)
	}
	done := 0
	h.run(h.now+100*Millisecond, func() bool {
		done += len(h.drainCQ(0))
		return done == size/chunk
	})
	s := h.snap(0)
	if s.State != QPReady || done != size/chunk || string(src) != string(dst) {
		t.Fatalf("state %v, %d/%d WRs, data equal %v", s.State, done, size/chunk, string(src) == string(dst))
	}
}

func TestLocalPortDown(t *testing.T) {
	h := newHarness(t, hopts{seed: 62})
	h.startTransfer(8<<20, 1<<20)
	h.run(50*Microsecond, nil)
	h.eng[0].SetPortState(h.now, 1, false)
	sentOn1 := 0
	h.Filter = func(from int, port wire.Plane, f []byte) bool {
		if from == 0 && port == 1 {
			sentOn1++
		}
		return false
	}
	done := 0
	h.run(h.now+100*Millisecond, func() bool { done += len(h.drainCQ(0)); return done == 8 })
	if sentOn1 != 0 || done != 8 {
		t.Fatalf("%d frames on the down port, %d/8 done", sentOn1, done)
	}
	if h.snap(1).RemoteUp != 0b1101 {
		t.Fatalf("peer sees %04b", h.snap(1).RemoteUp)
	}
}

func TestReverseProbes(t *testing.T) {
	h := newHarness(t, hopts{seed: 71})
	h.transfer(8<<20, 1<<20, Second)
	r := h.snap(1)
	if r.Counters.ReverseProbes == 0 || r.Counters.RevProbOK == 0 {
		t.Fatalf("receive-only QP sent %d reverse probes, %d answered", r.Counters.ReverseProbes, r.Counters.RevProbOK)
	}
	if len(r.ReverseEVs) < testPlanes {
		t.Errorf("reverse set %v smaller than one per plane", r.ReverseEVs)
	}
	// About one per RTT, not a flood.
	if per := float64(h.now) / float64(r.Counters.ReverseProbes); per < float64(r.SRTT)/2 {
		t.Errorf("a reverse probe every %.0f ns with srtt %d", per, r.SRTT)
	}
}

// TestReverseProbesPerPacket: where the RTT is not many packets long (the
// testbed: the sender's NIC paces at an emulated 50 Mbit/s, 0.34 ms per
// 2 KiB packet, while host latency makes the RTT ~0.1 ms), "once per RTT"
// must not mean a reverse probe every packet or two: at most one per
// revProbePkts received (mrc-lab S8: 119,270 probes for 65,473 data
// packets, whose answers took ~9 % of the victim's link). And where
// revProbePkts packets take longer than revFresh, a receiving QP still
// probes once per revFresh: with the bare packet cap a QP whose SACKs were
// lost slowed its sender, and so its own reverse probing, until it failed
// (mrc-lab S9, 2026-12-05 06:48: RETRY_EXCEEDED with links broken at start).
func TestReverseProbesPerPacket(t *testing.T) {
	for _, c := range []struct {
		name     string
		rate     float64 // the sender's port rate, bits per ns
		min, max func(data uint64) uint64
	}{
		// 5 Gb/s per port: 8 packets in ~7 µs, against an RTT of ~8 µs and
		// a revFresh of 100 µs: the packet cap binds (~170 probes for 512
		// packets without it).
		{"dense", 5, func(uint64) uint64 { return 1 }, func(d uint64) uint64 { return d/revProbePkts + 2 }},
		// 200 Mbit/s per port: a packet on each of the 4 ports every
		// 86 µs, 8 packets longer than revFresh: revFresh binds, about one
		// probe per 4.7 packets (one per 8 with the bare packet cap).
		{"sparse", 0.2, func(d uint64) uint64 { return d / 6 }, func(d uint64) uint64 { return d / 3 }},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t, hopts{seed: 73, cfg: func(cfg *Config) { cfg.PortRate = c.rate }})
			h.transfer(1<<20, 16<<10, 5*Second)
			r := h.snap(1)
			data, probes := r.Counters.RxData, r.Counters.ReverseProbes
			if r.Counters.RevProbOK == 0 {
				t.Fatalf("receive-only QP sent %d reverse probes, %d answered", probes, r.Counters.RevProbOK)
			}
			if lo, hi := c.min(data), c.max(data); probes < lo || probes > hi {
				t.Errorf("%d reverse probes for %d data packets: want %d..%d", probes, data, lo, hi)
			}
		})
	}
}

// TestBlackholedGroupProbeBudget: once a dead T0–T1 link has condemned its
// group, the sender stops putting data into it, and its probes into the dead
// link stay within one per probe interval for the whole group, not one per
// ASSUMED_BAD EV. (On the testbed, probing each of the group's 36 EVs once
// per srtt was ~7,000 fault drops per second per direction for the whole
// fault: every drop after detection was a probe.) The link then comes back
// and every EV of the group is GOOD again within a few probe intervals.
func TestBlackholedGroupProbeBudget(t *testing.T) {
	h := newHarness(t, hopts{seed: 52})
	h.startTransfer(48<<20, 1<<20)
	h.run(200*Microsecond, nil)

	dead := func(ev wire.EV) bool { return ev.Plane() == 0 && ev.T1()%4 == 1 }
	type count struct{ data, probes int }
	var c count
	h.Filter = func(from int, _ wire.Plane, f []byte) bool {
		var p wire.Packet
		if (wire.Decoder{}).Decode(f, &p) != nil || !dead(p.EV) {
			return false
		}
		if from == 0 {
			switch {
			case p.Opcode.IsData():
				c.data++
			case p.Opcode == wire.OpProbe:
				c.probes++
			}
		}
		return true
	}
	// Detection: every EV of the group ASSUMED_BAD (TestBlackholedPath
	// bounds how fast); then a settling interval for what was in flight.
	groupBad := func() bool {
		n := 0
		for _, e := range h.snap(0).EVs {
			if dead(e.EV) {
				if e.State != EVAssumedBad {
					return false
				}
				n++
			}
		}
		return n > 0
	}
	t0 := h.now
	for h.now < t0+5*Millisecond && !groupBad() {
		h.run(h.now+Microsecond, nil)
	}
	if !groupBad() {
		t.Fatalf("the dead group was not condemned within %d ns", h.now-t0)
	}
	s := h.snap(0)
	nBad := 0
	for _, e := range s.EVs {
		if dead(e.EV) {
			nBad++
		}
	}
	h.run(h.now+4*s.SRTT, nil)

	c = count{}
	tA := h.now
	h.run(h.now+2*Millisecond, nil)
	s = h.snap(0)
	iv := max(s.SRTT, minProbeInterval)
	// One probe per maxGroupProbeGap intervals for the one dead group, and
	// the first ones of its backoff (1, 2, 4 intervals apart) if the window
	// caught them.
	budget := int((h.now-tA)/(maxGroupProbeGap*iv)) + 4
	t.Logf("after detection, over %d ns (srtt %d, %d EVs in the dead group): %d data packets and %d probes into the dead link; budget %d probes",
		h.now-tA, s.SRTT, nBad, c.data, c.probes, budget)
	if c.data != 0 {
		t.Errorf("%d data packets went into the dead link after its group was condemned", c.data)
	}
	if c.probes == 0 {
		t.Errorf("no probe went into the dead link: the group would never come back")
	}
	if c.probes > budget {
		t.Errorf("%d probes into the dead link in %d probe intervals, want at most %d: more than one per %d intervals for the group (%d EVs of it ASSUMED_BAD)",
			c.probes, (h.now-tA)/iv, budget, maxGroupProbeGap, nBad)
	}

	// The link comes back: one answered probe clears the group and the
	// rest of it is probed back at once.
	h.Filter = nil
	tB := h.now
	allGood := func() bool {
		for _, e := range h.snap(0).EVs {
			if dead(e.EV) && e.State != EVGood {
				return false
			}
		}
		return true
	}
	for h.now < tB+20*iv && !allGood() {
		h.run(h.now+iv/10, nil)
	}
	if !allGood() {
		t.Errorf("EVs of the group still not GOOD %d ns (%d probe intervals) after the link came back", h.now-tB, (h.now-tB)/iv)
	}
	t.Logf("whole group GOOD %d ns after the link came back (probe interval %d)", h.now-tB, iv)
}

// TestLateAckKeepsGroupCondemned: the acknowledgement of a packet sent
// through a group before the group was condemned (it crossed the link just
// before the link died and its SACK came back late, over another path)
// proves nothing about the path now. It resets the group's failure count,
// but the group stays probed as one path: one probe for the whole group, not
// one per ASSUMED_BAD EV. (On the clos-2p testbed such a late SACK turned
// the dead link's group back to per-EV probing for the rest of the fault,
// ~5,000 probes/s into the dead link, in about half the runs.)
func TestLateAckKeepsGroupCondemned(t *testing.T) {
	h := newHarness(t, hopts{seed: 52})
	h.startTransfer(48<<20, 1<<20)
	h.run(200*Microsecond, nil)
	q := h.eng[0].qps[h.qp[0]]

	// An unacknowledged packet in flight, and its EV's group.
	var psn wire.PSN
	found := false
	for p := q.sndUna; p.Before(q.sndNxt); p = p.Add(1) {
		if pk := q.slot(p); pk.flags&pktSent != 0 && pk.flags&pktAcked == 0 && pk.ev >= 0 {
			psn, found = p, true
			break
		}
	}
	if !found {
		t.Fatal("no unacknowledged packet in flight")
	}
	gi := q.evs[q.slot(psn).ev].grp
	var members []int32
	for i := range q.evs {
		if q.evs[i].grp == gi {
			members = append(members, int32(i))
		}
	}
	if len(members) < groupFails+1 {
		t.Fatalf("group %d has %d EVs, want more than %d", gi, len(members), groupFails)
	}

	// The group is condemned now (losses on packets sent after everything
	// it has had acknowledged) ...
	now := h.now
	q.e.now = now
	for _, idx := range members[:groupFails] {
		q.pathFailedAt(idx, now)
	}
	g := &q.grps[gi]
	if !g.dead {
		t.Fatalf("group not condemned after %d failures", groupFails)
	}
	// ... then the late SACK of the earlier packet arrives.
	var rack Time
	if q.ackPkt(psn, &rack) == 0 {
		t.Fatal("the in-flight packet was not newly acknowledged")
	}

	probes := 0
	emit := func(_ wire.Plane, f []byte) {
		var p wire.Packet
		if (wire.Decoder{}).Decode(f, &p) != nil || p.Opcode != wire.OpProbe {
			return
		}
		if i := q.evFromWire(p.EV); i >= 0 && q.evs[i].grp == gi {
			probes++
		}
	}
	at := now + 2*q.probeInterval()
	q.e.now = at
	q.probeBad(at, emit)
	t.Logf("group %d (%d EVs, all ASSUMED_BAD): %d probes into it after a late acknowledgement", gi, len(members), probes)
	if probes != 1 {
		t.Errorf("%d probes into the condemned group after a late acknowledgement of a packet sent before it was condemned, want 1 (the group probed as one path)", probes)
	}
}

// TestProbesBeforeRTTSample: a QP whose first packets time out before any
// RTT sample (its peer not listening yet, or a path slower than expected)
// probes its ASSUMED_BAD EVs with the timeout its data had, not the 50 µs
// floor of 3·srtt. Before, every probe of a 10 ms RTT path "failed" after
// 50 µs and the EV was probed again at once: mrc-lab S7's all-to-all sent
// 11 557 probes in 100 ms from one QP (srtt still 0), which filled the
// 40 Mbit/s links, raised the RTT to 97 ms and cost the run 70 % of its
// busbw (18 Mbit/s against 63).
func TestProbesBeforeRTTSample(t *testing.T) {
	const ackTimeout = 20 * Millisecond
	h := newHarness(t, hopts{seed: 57, qc: QPConfig{AckTimeout: ackTimeout}})
	h.Delay = 5 * Millisecond // RTT about 10 ms, as S7's delay lines
	deaf := 25 * Millisecond  // the peer drops everything until then
	probes := 0
	h.Filter = func(from int, _ wire.Plane, f []byte) bool {
		var p wire.Packet
		if from != 0 || (wire.Decoder{}).Decode(f, &p) != nil {
			return false
		}
		if p.Opcode == wire.OpProbe {
			probes++
		}
		return h.now < deaf
	}
	h.startTransfer(1<<20, 64<<10)
	h.run(deaf+ackTimeout/2, nil)
	s := h.snap(0)
	bad := 0
	for _, e := range s.EVs {
		if e.State == EVAssumedBad {
			bad++
		}
	}
	t.Logf("by %d ms: %d timeouts, %d EVs ASSUMED_BAD of %d, srtt %d ns, %d probes", h.now/Millisecond, s.Counters.Timeouts, bad, len(s.EVs), s.SRTT, probes)
	if s.Counters.Timeouts == 0 || s.SRTT != 0 {
		t.Fatalf("the setup failed: %d timeouts, srtt %d ns (want timeouts before any RTT sample)", s.Counters.Timeouts, s.SRTT)
	}
	// At most one probe per EV per data timeout since the first timeout.
	if budget := len(s.EVs) * int((h.now-ackTimeout)/ackTimeout+1); probes > budget {
		t.Fatalf("%d probes in the %d ms after the first timeout with no RTT sample yet, want at most %d (one per EV per %d ms)",
			probes, (h.now-ackTimeout)/Millisecond, budget, ackTimeout/Millisecond)
	}
	h.Filter = nil
	done := 0
	if !h.run(2*Second, func() bool {
		for _, c := range h.drainCQ(0) {
			if c.Status != StatusOK {
				t.Fatalf("completion %+v", c)
			}
			done++
		}
		return done == 16
	}) {
		t.Fatalf("%d of 16 writes done 2 s after the peer began to listen", done)
	}
}

// TestInitialRTOBacksOff: a path whose RTT is above AckTimeout and a peer
// that answers nothing for its first 270 ms (mrc-lab S8 with 2.5 ms host
// links: 16 daemons starting on 2 vCPUs). Before the initial timeout
// backed off, every packet and every probe timed out before its answer
// came, every EV went ASSUMED_BAD, no RTT sample was ever taken and all 64
// writes failed RETRY_EXCEEDED on a path that lost nothing. The control
// row (RTT below AckTimeout) passed before too.
func TestInitialRTOBacksOff(t *testing.T) {
	const ackTimeout, deaf = 20 * Millisecond, 270 * Millisecond
	for _, delay := range []Time{5 * Millisecond, 15 * Millisecond, 40 * Millisecond} {
		t.Run(fmt.Sprintf("rtt%dms", 2*delay/Millisecond), func(t *testing.T) {
			h := newHarness(t, hopts{seed: 57, qc: QPConfig{AckTimeout: ackTimeout, MinRTO: 200 * Microsecond, NoEVTimeout: 2 * Second}})
			h.Delay = delay
			h.Rate = 0.05 // 50 Mbit/s, as S8's host links
			h.Filter = func(int, wire.Plane, []byte) bool { return h.now < deaf }
			const n = 64
			h.startTransfer(n*16<<10, 16<<10)
			done := 0
			ok := h.run(5*Second, func() bool {
				for _, c := range h.drainCQ(0) {
					if c.Status != StatusOK {
						t.Fatalf("write %d: %v after %d ms", c.WRID, c.Status, h.now/Millisecond)
					}
					done++
				}
				return done == n
			})
			s := h.snap(0)
			t.Logf("%d of %d writes by %d ms: %d timeouts, %d probes, srtt %d µs", done, n, h.now/Millisecond, s.Counters.Timeouts, s.Counters.TxProbe, s.SRTT/Microsecond)
			if !ok || s.SRTT == 0 {
				t.Fatalf("%d of %d writes done in 5 s, srtt %d", done, n, s.SRTT)
			}
		})
	}
}

// TestFailCause: a peer that answers nothing ends the QP by whichever rule
// is configured to fire first, and the snapshot names that rule.
func TestFailCause(t *testing.T) {
	for _, c := range []struct {
		name string
		qc   QPConfig
		want FailCause
	}{
		{"retry limit", QPConfig{NumEVs: 8, RetryLimit: 2, NoEVTimeout: 100 * Second, RetryTimeout: 100 * Second}, FailRetryLimit},
		{"no usable EV", QPConfig{RetryLimit: 32, NoEVTimeout: 50 * Millisecond, RetryTimeout: 100 * Second}, FailNoEV},
		{"retry timeout", QPConfig{RetryLimit: 32, NoEVTimeout: 100 * Second, RetryTimeout: 200 * Millisecond}, FailRetryTimeout},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t, hopts{seed: 61, qc: c.qc})
			h.Filter = func(from int, _ wire.Plane, _ []byte) bool { return from == 0 }
			h.startTransfer(1<<20, 64<<10)
			var st Status
			if !h.run(10*Second, func() bool {
				for _, x := range h.drainCQ(0) {
					if x.Status != StatusOK && st == StatusOK {
						st = x.Status
					}
				}
				return st != StatusOK
			}) {
				t.Fatalf("no error in 10 s")
			}
			s := h.snap(0)
			t.Logf("%v after %d ms: %v (%v)", st, h.now/Millisecond, s.FailCause, s.Status)
			if s.State != QPError || s.FailCause != c.want {
				t.Fatalf("state %v, cause %q, want %q", s.State, s.FailCause, c.want)
			}
		})
	}
}

// TestCondemnedGroupProbesFollowData: where the link's rate, not the RTT,
// spaces the data (200 Mbit/s ports against an RTT of microseconds, as on
// the testbed's emulated 10 Mbit/s links), a condemned group's probes take
// at most about one packet in condemnedProbeData of what the QP sends on
// the group's plane. Before (groupProbeGap alone, in probe intervals), the
// group was probed every 8 intervals whatever the data: on the testbed a
// fifth of a plane's uplink (docs/engine.md).
func TestCondemnedGroupProbesFollowData(t *testing.T) {
	h := newHarness(t, hopts{seed: 53, cfg: func(cfg *Config) { cfg.PortRate = 0.2 }})
	h.startTransfer(64<<20, 1<<20)
	h.run(2*Millisecond, nil)

	dead := func(ev wire.EV) bool { return ev.Plane() == 0 && ev.T1()%4 == 1 }
	var probes, data0 int
	h.Filter = func(from int, _ wire.Plane, f []byte) bool {
		var p wire.Packet
		if from != 0 || (wire.Decoder{}).Decode(f, &p) != nil {
			return false
		}
		if p.EV.Plane() == 0 && p.Opcode.IsData() && !dead(p.EV) {
			data0++
		}
		if !dead(p.EV) {
			return false
		}
		if p.Opcode == wire.OpProbe {
			probes++
		}
		return true
	}
	// Detection, then a settling time for what was in flight.
	h.run(h.now+20*Millisecond, nil)
	probes, data0 = 0, 0
	tA := h.now
	h.run(h.now+50*Millisecond, nil)
	s := h.snap(0)
	iv := max(s.SRTT, minProbeInterval)
	t.Logf("over %d ns (srtt %d): %d data packets on plane 0, %d probes into its dead group (%d probe intervals)",
		h.now-tA, s.SRTT, data0, probes, (h.now-tA)/iv)
	if data0 < 100 {
		t.Fatalf("only %d data packets on plane 0: the transfer did not run through the fault", data0)
	}
	if probes == 0 {
		t.Errorf("no probe into the dead group: it would never come back")
	}
	if budget := data0/condemnedProbeData + 2; probes > budget {
		t.Errorf("%d probes into the dead group against %d data packets on its plane: want at most %d (one per %d)",
			probes, data0, budget, condemnedProbeData)
	}
	// The link comes back: the group is probed back within the data's pace.
	h.Filter = nil
	tB := h.now
	back := h.run(h.now+20*Millisecond, func() bool {
		for _, e := range h.snap(0).EVs {
			if dead(e.EV) && e.State != EVGood {
				return false
			}
		}
		return true
	})
	if !back {
		t.Errorf("the group's EVs not GOOD 20 ms after the link came back")
	}
	t.Logf("group GOOD %d ns after the link came back", h.now-tB)
}
