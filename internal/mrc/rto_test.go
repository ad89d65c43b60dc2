package mrc

import (
	"testing"
)

// TestJitteryLinkAdaptiveRTO runs a transfer over a software-like path: a
// one-way delay of 25–500 µs drawn per packet (RTT 50 µs–1 ms, heavy
// reordering), as on the netns testbed. With the default (adaptive) ACK
// timeout the QP must neither fail nor time out more than a few packets:
// the timeout follows srtt + 4·rttvar instead of a fixed ceiling that a
// 500 µs RTT overruns.
func TestJitteryLinkAdaptiveRTO(t *testing.T) {
	h := newHarness(t, hopts{seed: 17})
	h.Delay, h.Jitter = 25*Microsecond, 475*Microsecond
	h.transfer(4<<20, 64<<10, Second)
	s := h.snap(0)
	t.Logf("srtt %d ns rttvar %d ns rto %d ns; data %d, rtx %d, timeouts %d, losses %d; EV transitions %v",
		s.SRTT, s.RTTVar, h.eng[0].qps[h.qp[0]].rto(0), s.Counters.TxData, s.Counters.TxRtx, s.Counters.Timeouts, s.Counters.Losses, s.Counters.EVTransitions)
	if s.State != QPReady {
		t.Fatalf("QP state %v (%v)", s.State, s.Status)
	}
	if s.Counters.Timeouts*100 > s.Counters.TxData {
		t.Errorf("%d ACK timeouts for %d data packets on a lossless jittery link (spurious)", s.Counters.Timeouts, s.Counters.TxData)
	}
}

// TestJitteryPingPong is mrc-write-lat's pattern on the same jittery path:
// single-packet messages, one in flight at a time, so each RTT sample moves
// the estimate a lot. No QP error, no spurious retransmissions beyond a few.
func TestJitteryPingPong(t *testing.T) {
	h := newHarness(t, hopts{seed: 18})
	h.Delay, h.Jitter = 25*Microsecond, 475*Microsecond
	const n = 200
	c := pingPong(t, h, n, 0)
	for side := 0; side < 2; side++ {
		s := h.snap(side)
		t.Logf("side %d: srtt %d ns rttvar %d ns; data %d, timeouts %d, probes %d, SACKs %d", side, s.SRTT, s.RTTVar, c.data[side], s.Counters.Timeouts, c.probe[side], c.sack[side])
		if s.State != QPReady {
			t.Fatalf("side %d: QP %v (%v)", side, s.State, s.Status)
		}
		if s.Counters.Timeouts > n/50 {
			t.Errorf("side %d: %d ACK timeouts in %d lossless round trips", side, s.Counters.Timeouts, n)
		}
	}
}
