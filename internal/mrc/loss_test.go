package mrc

import (
	"bytes"
	"testing"

	"github.com/softmrc/softmrc/internal/wire"
)

// transfer posts size bytes from side 0 to side 1 in chunk-sized writes and
// runs until all complete; it returns the finish time.
func (h *harness) transfer(size, chunk int, limit Time) Time {
	h.t.Helper()
	src := h.region(0, 0x11, 0x10000, size, AccessLocalRead)
	dst := make([]byte, size)
	h.mem[1].Register(0x22, 0x900000, dst, AccessRemoteWrite)
	start := h.now
	for off := 0; off < size; off += chunk {
		if err := h.eng[0].PostWrite(h.qp[0], WR{ID: uint64(off), LKey: 0x11, Addr: 0x10000 + uint64(off), Len: uint32(chunk), RemoteVA: 0x900000 + uint64(off), RKey: 0x22}); err != nil {
			h.t.Fatal(err)
		}
	}
	done := 0
	ok := h.run(start+limit, func() bool {
		for _, c := range h.drainCQ(0) {
			if c.Kind != CompSend || c.Status != StatusOK {
				h.t.Fatalf("completion %+v", c)
			}
			done++
		}
		return done == size/chunk
	})
	if !ok {
		s := h.snap(0)
		h.t.Fatalf("transfer not done by %d µs: %d/%d WRs; state %v; counters %+v", (h.now-start)/1000, done, size/chunk, s.State, s.Counters)
	}
	if !bytes.Equal(src, dst) {
		h.t.Fatal("received data differ from the source")
	}
	return h.now - start
}

// checkTransitions verifies that the transition counters explain every EV's
// current state: each EV starts GOOD, so per state in-out must equal
// [current == state] - [state == GOOD].
func checkTransitions(t *testing.T, s QPSnapshot) {
	t.Helper()
	var sum [numEVStates][numEVStates]uint64
	for _, ev := range s.EVs {
		var bal [numEVStates]int64
		bal[EVGood] = 1
		for f := 0; f < int(numEVStates); f++ {
			for to := 0; to < int(numEVStates); to++ {
				n := ev.Transitions[f][to]
				bal[f] -= int64(n)
				bal[to] += int64(n)
				sum[f][to] += n
				if f == to && n != 0 {
					t.Errorf("EV %v counts a self-transition %v", ev.EV, EVState(f))
				}
			}
		}
		for st := range bal {
			want := int64(0)
			if EVState(st) == ev.State {
				want = 1
			}
			if bal[st] != want {
				t.Errorf("EV %v in %v: transition counts give balance %d for %v", ev.EV, ev.State, bal[st], EVState(st))
			}
		}
	}
	if sum != s.Counters.EVTransitions {
		t.Errorf("per-QP transition counters %v differ from the sum over EVs %v", s.Counters.EVTransitions, sum)
	}
}

func TestRandomLoss(t *testing.T) {
	const size = 8 << 20
	base := newHarness(t, hopts{seed: 7})
	free := base.transfer(size, 1<<20, Second)
	for _, tc := range []struct {
		loss float64
		tr   Transport
	}{{0.01, MRC}, {0.05, MRC}, {0.01, GoBackN}, {0.05, GoBackN}} {
		t.Run(tc.tr.String(), func(t *testing.T) {
			h := newHarness(t, hopts{seed: 7, qc: QPConfig{Transport: tc.tr}})
			h.Loss = tc.loss
			d := h.transfer(size, 1<<20, 10*Second)
			s := h.snap(0)
			checkTransitions(t, s)
			if s.State != QPReady {
				t.Fatalf("QP state %v", s.State)
			}
			t.Logf("loss %.0f%% %v: goodput %.1f%% of loss-free; rtx %d, losses %d, timeouts %d, transitions %v",
				tc.loss*100, tc.tr, 100*float64(free)/float64(d), s.Counters.TxRtx, s.Counters.Losses, s.Counters.Timeouts, s.Counters.EVTransitions)
			// Done-when figures (issue 3): >= 85% (1%) and >= 60% (5%) of the
			// loss-free run; go-back-N is only reported beside them.
			want := map[float64]float64{0.01: 0.85, 0.05: 0.60}[tc.loss]
			if got := float64(free) / float64(d); tc.tr == MRC && got < want {
				t.Errorf("goodput %.1f%% of loss-free, want >= %.0f%%", 100*got, 100*want)
			}
			if tc.tr == MRC && s.Counters.EVTransitions[EVGood][EVAssumedBad] == 0 {
				t.Error("untrimmed loss never made an EV ASSUMED_BAD")
			}
		})
	}
}

func TestTrimNACKAndSkip(t *testing.T) {
	h := newHarness(t, hopts{seed: 3})
	h.Trim = 0.02
	var rtxDSCP, rtxSeen int
	var nackSeen int
	h.Filter = func(from int, port wire.Plane, frame []byte) bool {
		var p wire.Packet
		if (wire.Decoder{}).Decode(frame, &p) != nil {
			return false
		}
		if p.Opcode.IsData() && p.Rtx {
			rtxSeen++
			if p.DSCP == wire.DSCPTrimmableRetx {
				rtxDSCP++
			}
		}
		if p.Opcode == wire.OpNACK && p.NACK.Reason == wire.NackTrimmed {
			nackSeen++
		}
		return false
	}
	h.transfer(4<<20, 256<<10, Second)
	s := h.snap(0)
	checkTransitions(t, s)
	if nackSeen == 0 || s.Counters.NACKsRcvd[wire.NackTrimmed] == 0 {
		t.Fatalf("no TRIMMED NACKs (seen %d)", nackSeen)
	}
	if rtxSeen == 0 || rtxDSCP != rtxSeen {
		t.Errorf("retransmissions %d, with DSCP TRIMMABLE_RETX %d", rtxSeen, rtxDSCP)
	}
	if s.Counters.EVTransitions[EVGood][EVSkip] == 0 {
		t.Errorf("trims should SKIP EVs: %v", s.Counters.EVTransitions)
	}
	// Without trims the clean acknowledgements bring the SKIP EVs back.
	h.Trim = 0
	h.transfer(16<<20, 256<<10, Second)
	s = h.snap(0)
	checkTransitions(t, s)
	if s.Counters.EVTransitions[EVSkip][EVGood] == 0 {
		t.Errorf("SKIP EVs never returned to GOOD after the trims stopped: %v", s.Counters.EVTransitions)
	}
	if s.Counters.EVTransitions[EVGood][EVAssumedBad] != 0 {
		t.Errorf("trims are congestion, not failure: %v", s.Counters.EVTransitions)
	}
	var trims uint64
	for _, e := range s.EVs {
		trims += e.Trims
	}
	if trims != s.Counters.NACKsRcvd[wire.NackTrimmed] {
		t.Errorf("per-EV trims %d != NACKs %d", trims, s.Counters.NACKsRcvd[wire.NackTrimmed])
	}
}

func TestECNSkips(t *testing.T) {
	h := newHarness(t, hopts{seed: 4})
	h.ECN = 0.05
	h.transfer(2<<20, 256<<10, Second)
	s := h.snap(0)
	checkTransitions(t, s)
	var ecn uint64
	for _, e := range s.EVs {
		ecn += e.ECN
	}
	if ecn == 0 || s.Counters.EVTransitions[EVGood][EVSkip] == 0 {
		t.Fatalf("ECN marks did not SKIP EVs: ecn %d transitions %v", ecn, s.Counters.EVTransitions)
	}
}
