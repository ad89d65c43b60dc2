package mrc

import (
	"container/heap"
	"testing"

	"github.com/softmrc/softmrc/internal/wire"
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

// TestRTOBacksOffPerTimeoutOnly: a packet whose earlier transmissions were
// lost and detected by SACKs (RACK) gets the plain RTO on its next
// transmission; only ACK timeouts double it. Before, every retransmission
// doubled it: a packet at the window's edge lost four times by RACK waited
// 16 RTOs (2.6 ms in the fabric simulator's 5 % loss scenario, with the
// window full and nothing else to send) for a timeout.
func TestRTOBacksOffPerTimeoutOnly(t *testing.T) {
	const start = wire.PSN(7000)
	h := newHarness(t, hopts{seed: 71, qc: QPConfig{StartPSN: start}})
	h.startTransfer(8<<20, 1<<20)
	target := start.Add(200)
	drops := 0
	h.Filter = func(from int, _ wire.Plane, f []byte) bool {
		var p wire.Packet
		if from != 0 || (wire.Decoder{}).Decode(f, &p) != nil || !p.Opcode.IsData() || p.PSN != target {
			return false
		}
		if drops < 3 {
			drops++
			return true
		}
		return false
	}
	q := h.eng[0].qps[h.qp[0]]
	var gap, rto0 Time
	h.run(5*Millisecond, func() bool {
		pk := q.slot(target)
		if drops < 3 || pk.tries < 3 || pk.flags&pktInFlight == 0 {
			return false
		}
		for ent := range q.timers.all() {
			if ent.psn == target && ent.seq == pk.seq {
				gap, rto0 = ent.at-pk.sentAt, q.rto(0)
				return true
			}
		}
		return false
	})
	if gap == 0 {
		t.Fatal("the fourth transmission of the target packet was never seen in flight")
	}
	if s := h.snap(0); s.Counters.Timeouts != 0 {
		t.Fatalf("%d timeouts: the losses were meant to be detected by SACKs", s.Counters.Timeouts)
	}
	if gap != rto0 {
		t.Fatalf("timer of the 4th transmission (3 losses detected by SACKs, no timeout) %v ns, want the plain RTO %v ns", gap, rto0)
	}
}

// TestHoldTimers: while HoldTimers holds them, no ACK timeout runs however
// late the ACKs are, and the ACKs read before the hold ends stop the
// timers (nothing was lost); a packet whose ACK never came times out at
// the first Poll after the hold. This is the daemon's stall: its peer's
// ACKs queued for several RTOs while its loop was off the CPU.
func TestHoldTimers(t *testing.T) {
	for _, tc := range []struct {
		name         string
		hold         bool
		deliver      bool // the queued ACKs reach side 0 before the hold ends
		wantTimeouts bool
	}{
		{"not held, ACKs late", false, true, true},
		{"held, ACKs read, then released", true, true, false},
		{"held, ACKs lost, then released", true, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, hopts{seed: 73})
			h.startTransfer(48<<20, 1<<20)
			h.run(200*Microsecond, nil)
			s := h.snap(0)
			if s.Counters.Timeouts != 0 || s.InFlight == 0 {
				t.Fatalf("before the stall: %d timeouts, %d bytes in flight", s.Counters.Timeouts, s.InFlight)
			}
			rto := h.eng[0].qps[h.qp[0]].rto(0)
			// Side 1's frames queue (side 0's receive ring) for 5 RTOs.
			var queued [][]byte
			var ports []wire.Plane
			h.Filter = func(from int, port wire.Plane, f []byte) bool {
				if from == 1 {
					queued = append(queued, append([]byte(nil), f...))
					ports = append(ports, port)
					return true
				}
				return false
			}
			h.eng[0].HoldTimers(tc.hold)
			h.run(h.now+5*rto, nil)
			h.Filter = nil
			held := h.snap(0).Counters.Timeouts
			if tc.hold && held != 0 {
				t.Fatalf("%d ACK timeouts while the timers were held", held)
			}
			if len(queued) == 0 {
				t.Fatal("side 1 sent nothing while side 0's frames queued")
			}
			if tc.deliver {
				for i, f := range queued {
					h.eng[0].HandlePacket(h.now, ports[i], f)
				}
			}
			h.eng[0].HoldTimers(false)
			h.eng[0].Poll(h.now, h.emitter(0))
			got := h.snap(0).Counters.Timeouts
			t.Logf("RTO %d ns; %d frames queued; %d timeouts while queued, %d after", rto, len(queued), held, got)
			if (got > 0) != tc.wantTimeouts {
				t.Fatalf("%d ACK timeouts after the queued frames (delivered %v, timers held %v), want any: %v", got, tc.deliver, tc.hold, tc.wantTimeouts)
			}
		})
	}
}

// TestRTTSampleOnlyFromItsTransmission: a SACK whose timestamp echo is
// that of an earlier transmission than the one recorded for its trigger
// PSN (the original of a retransmitted packet) gives an RTT sample from
// the echo only while the first transmission is less than one echo period
// old. The echo is 16 bits of 1.024 µs and wraps every 67 ms: the original
// of a retransmitted packet, held 67 ms in a queue (or a stalled daemon's
// ring), came back as an RTT of tens of µs, and the base RTT, a minimum,
// kept it. In mrc-lab S7 (RTT 11 ms) a base RTT of 0.85 ms made the
// last-hop cap (delivery rate × base RTT) cut windows from ~100 KB to
// ~500 B, held there for 1.4 s (docs/engine.md, "Last-hop cap"). Held 5 ms
// (a spurious retransmission), the original's RTT is real and is sampled,
// as RFC 7323 samples it: srtt grows.
func TestRTTSampleOnlyFromItsTransmission(t *testing.T) {
	const (
		start = wire.PSN(3000)
		delay = 250 * Microsecond
	)
	for _, tc := range []struct {
		name       string
		hold       Time // the first transmission reaches the peer this much later
		wantSample bool
	}{
		// Its SACK's echo then reads as a 30 µs RTT.
		{"held one echo period", echoPeriod - delay + 30*Microsecond, false},
		{"held 5 ms", 5 * Millisecond, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, hopts{seed: 77, qc: QPConfig{StartPSN: start}})
			h.Delay = delay
			target := start.Add(40)
			q := h.eng[0].qps[h.qp[0]]
			held := false
			var arrives, before Time
			h.Filter = func(from int, port wire.Plane, f []byte) bool {
				var p wire.Packet
				if held || from != 0 || (wire.Decoder{}).Decode(f, &p) != nil || !p.Opcode.IsData() || p.PSN != target {
					return false
				}
				held, arrives = true, h.now+tc.hold
				h.seq++
				heap.Push(&h.fl, flight{at: arrives, seq: h.seq, to: 1, port: port, b: append([]byte(nil), f...)})
				h.at(arrives-Microsecond, func() { before = q.srtt })
				return true
			}
			h.startTransfer(1<<20, 64<<10)
			h.run(tc.hold+20*Millisecond, nil)
			if !held || before == 0 {
				t.Fatalf("the target packet was never sent (held %v), or srtt was 0 before its original arrived", held)
			}
			s := h.snap(0)
			if s.Counters.TxRtx == 0 {
				t.Fatal("the held packet was not retransmitted")
			}
			if dup := h.snap(1).Counters.RxDup; dup == 0 {
				t.Fatal("the held original never reached the peer")
			}
			base := q.peer.cc.baseRTT
			t.Logf("base RTT %d ns; srtt %d ns before the original arrived, %d after; %d retransmissions", base, before, q.srtt, s.Counters.TxRtx)
			if base < 2*delay {
				t.Fatalf("base RTT %d ns, below the path's %d ns: a wrapped echo of another transmission was taken as an RTT sample", base, 2*delay)
			}
			if sampled := q.srtt > before+before/4; sampled != tc.wantSample {
				t.Fatalf("srtt %d ns → %d ns when the original's SACK came back: sampled %v, want %v", before, q.srtt, sampled, tc.wantSample)
			}
		})
	}
}
