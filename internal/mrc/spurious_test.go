package mrc

import "testing"

// stallResult is what one receiver stall (or outage) cost the sender.
type stallResult struct {
	timeouts, rtx, spurious, rxDup uint64
	acked                          uint64 // bytes
	wentBad                        uint64 // sender EV transitions to ASSUMED_BAD
	badAfter                       int    // sender EVs ASSUMED_BAD shortly after
	cwndBefore, cwndAfter          int
}

func badEVs(s QPSnapshot) int {
	n := 0
	for _, ev := range s.EVs {
		if ev.State == EVAssumedBad {
			n++
		}
	}
	return n
}

func toBad(s QPSnapshot) uint64 {
	n := uint64(0)
	for from := range s.Counters.EVTransitions {
		n += s.Counters.EVTransitions[from][EVAssumedBad]
	}
	return n
}

// measure runs fn, which advances the harness, and reports what it cost.
func (h *harness) measure(fn func()) stallResult {
	h.t.Helper()
	s0, r0 := h.snap(0), h.snap(1)
	fn()
	s1, r1 := h.snap(0), h.snap(1)
	return stallResult{
		timeouts:   s1.Counters.Timeouts - s0.Counters.Timeouts,
		rtx:        s1.Counters.TxRtx - s0.Counters.TxRtx,
		spurious:   s1.Counters.SpuriousTimeouts - s0.Counters.SpuriousTimeouts,
		rxDup:      r1.Counters.RxDup - r0.Counters.RxDup,
		acked:      s1.Counters.AckedBytes - s0.Counters.AckedBytes,
		wentBad:    toBad(s1) - toBad(s0),
		badAfter:   badEVs(s1),
		cwndBefore: s0.Cwnd,
		cwndAfter:  s1.Cwnd,
	}
}

// stallReceiver stops the receiver (side 1) for d, then lets it take
// everything that waited (nothing is lost) and runs settle more.
func (h *harness) stallReceiver(d, settle Time) stallResult {
	return h.measure(func() {
		h.stallUntil[1] = h.now + d
		h.run(h.now+d+settle, nil)
	})
}

// TestReceiverStallSpuriousTimeouts: a receiver that stops for 50 minimum
// RTOs (a CPU-starved host: docs/performance.md, 2 vCPUs at load 15–30)
// and then takes everything loses nothing, yet the sender's ACK timers
// fire on the packets in flight. Before spurious.go each of those timeouts
// condemned its EV (and, two EVs on, its path) for good until a probe: this
// test measured 184 timeouts, none found spurious, all 160 EVs ASSUMED_BAD
// after the stall and the QP stuck (nothing acknowledged in the next
// millisecond). Now the acknowledgements that prove the originals arrived
// count the timeouts as spurious (64 of 148) and put the EVs back (39 of
// 160 still bad), and the RTO learns from them: an equal second stall
// fires 24 timeouts (195 with QPConfig.NoSpuriousRTOFloor).
func TestReceiverStallSpuriousTimeouts(t *testing.T) {
	for _, tc := range []struct {
		name  string
		floor bool // the RTO floor (default): the second stall must fire at most half the timeouts
	}{
		{"default", true},
		{"no-rto-floor", false},
	} {
		t.Run(tc.name, func(t *testing.T) { receiverStall(t, tc.floor) })
	}
}

func receiverStall(t *testing.T, floor bool) {
	// Probes every 20 ms: EVs that come back within the test came back by
	// the spurious-timeout undo, not by a probe.
	h := newHarness(t, hopts{seed: 91, qc: QPConfig{ProbeInterval: 20 * Millisecond, NoSpuriousRTOFloor: !floor}})
	h.Rate = 10 // 10 Gb/s: the transfer outlasts both stalls
	h.startTransfer(32<<20, 1<<20)
	h.run(300*Microsecond, nil)
	const stall = Millisecond // 50 minimum RTOs
	settle := 5 * h.snap(0).SRTT
	first := h.stallReceiver(stall, settle)
	between := h.measure(func() { h.run(h.now+Millisecond, nil) })
	atSecond := h.snap(0)
	second := h.stallReceiver(stall, settle)
	s := h.snap(0)
	t.Logf("stall %d ns, settle %d ns, %d EVs; first %+v; between %+v; second %+v; rto now %d ns",
		stall, settle, len(s.EVs), first, between, second, h.eng[0].qps[h.qp[0]].rto(0))
	if s.State != QPReady {
		t.Fatalf("QP %v (%v)", s.State, s.Status)
	}
	if first.timeouts == 0 || first.wentBad == 0 {
		t.Fatalf("the first stall fired %d timeouts and condemned %d EVs: the scenario does not exercise the timeout path", first.timeouts, first.wentBad)
	}
	// Not all: a retransmission that left during the stall reaches the
	// receiver beside its original, and only the first duplicate of a
	// batch is reported at once (recv.go), so its acknowledgement proves
	// nothing about which copy arrived (72 of 128 found on 2026-12-03).
	if first.spurious*4 < first.timeouts {
		t.Errorf("first stall: %d of %d timeouts found spurious, want at least a quarter (nothing was lost)", first.spurious, first.timeouts)
	}
	if first.spurious > first.timeouts {
		t.Errorf("first stall: %d spurious timeouts counted for %d timeouts", first.spurious, first.timeouts)
	}
	if first.badAfter*2 > len(s.EVs) {
		t.Errorf("first stall: %d of %d EVs still ASSUMED_BAD %d ns after it (%d condemned during it): want at least half in service", first.badAfter, len(s.EVs), settle, first.wentBad)
	}
	if between.acked == 0 || atSecond.InFlight == 0 {
		t.Fatalf("the QP acknowledged %d bytes in the millisecond between the stalls and had %d bytes in flight at the second: it was stuck (no usable EV: %d EVs ASSUMED_BAD)", between.acked, atSecond.InFlight, badEVs(atSecond))
	}
	if floor && second.timeouts*2 > first.timeouts {
		t.Errorf("an equal second stall fired %d timeouts, the first %d: want at most half (the RTO learnt from the spurious ones)", second.timeouts, first.timeouts)
	}
}

// TestRealLossTimeoutsNotSpurious: the same pattern with the packets really
// lost (every data frame reaching the receiver dropped for a millisecond,
// those in flight included: a dead link) keeps the loss path as it was:
// timeouts condemn EVs, retransmissions repair the transfer, none is taken
// as spurious and the RTO floor does not rise.
func TestRealLossTimeoutsNotSpurious(t *testing.T) {
	h := newHarness(t, hopts{seed: 91})
	h.startTransfer(64<<20, 1<<20)
	h.run(300*Microsecond, nil)
	q := h.eng[0].qps[h.qp[0]]
	floor := q.spuriousFloor()
	r := h.measure(func() {
		h.lossUntil[1] = h.now + Millisecond
		h.run(h.lossUntil[1]+5*h.snap(0).SRTT, nil)
	})
	s := h.snap(0)
	t.Logf("outage: %+v; dropped %d; rto floor %d -> %d ns", r, h.dropped, floor, q.spuriousFloor())
	if s.State != QPReady {
		t.Fatalf("QP %v (%v)", s.State, s.Status)
	}
	if r.timeouts == 0 || r.wentBad == 0 || h.dropped == 0 {
		t.Fatalf("%d timeouts, %d EVs condemned, %d frames dropped: the outage did not exercise the timeout path", r.timeouts, r.wentBad, h.dropped)
	}
	if r.spurious != 0 {
		t.Errorf("%d timeouts of really lost packets taken as spurious", r.spurious)
	}
	if f := q.spuriousFloor(); f > floor {
		t.Errorf("the RTO floor rose from %d to %d ns on real losses", floor, f)
	}
	if r.rxDup*2 > r.rtx {
		t.Errorf("%d duplicates for %d retransmissions: the outage did not lose the packets", r.rxDup, r.rtx)
	}
}
