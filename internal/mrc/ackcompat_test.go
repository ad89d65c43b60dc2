package mrc

import (
	"testing"

	"github.com/softmrc/softmrc/internal/wire"
)

// TestAlwaysSkip: an EV whose every packet arrives CE-marked gets
// M=ALWAYS_SKIP from the responder after AlwaysSkipMarks marks in a row
// (over at least an RTT), and the sender takes it out of service
// (ASSUMED_BAD, probed back); EVs with clean packets are left alone. With
// the threshold disabled the same marks only SKIP the EV.
func TestAlwaysSkip(t *testing.T) {
	evs := make([]wire.EV, 8)
	for i := range evs {
		evs[i] = wire.MakeEV(wire.Plane(i%testPlanes), uint8(i/testPlanes), uint32(100+i))
	}
	hot := evs[3]
	for _, thr := range []int{32, -1} { // 32: below the default, so that an 8 MiB run reaches it
		h := newHarness(t, hopts{seed: 19, noQPs: true, cfg: func(c *Config) { c.AlwaysSkipMarks = thr }})
		h.qp[0], h.qp[1] = h.connect(QPConfig{EVs: evs}, QPConfig{})
		h.MarkCE = func(from int, p *wire.Packet) bool { return from == 0 && p.EV == hot }
		h.transfer(8<<20, 256<<10, Second)
		s, r := h.snap(0), h.snap(1)
		checkTransitions(t, s)
		var hotBad, otherBad uint64
		for _, e := range s.EVs {
			if e.EV == hot {
				hotBad = e.Transitions[EVGood][EVAssumedBad] + e.Transitions[EVSkip][EVAssumedBad]
			} else {
				otherBad += e.Transitions[EVGood][EVAssumedBad] + e.Transitions[EVSkip][EVAssumedBad]
			}
		}
		t.Logf("threshold %d: ALWAYS_SKIP sent %d; hot EV →ASSUMED_BAD %d, others %d", thr, r.Counters.AlwaysSkipSent, hotBad, otherBad)
		if thr >= 0 {
			if r.Counters.AlwaysSkipSent == 0 || hotBad == 0 {
				t.Errorf("persistently marked EV: %d ALWAYS_SKIP verdicts, %d times ASSUMED_BAD", r.Counters.AlwaysSkipSent, hotBad)
			}
		} else if r.Counters.AlwaysSkipSent != 0 || hotBad != 0 {
			t.Errorf("ALWAYS_SKIP disabled, yet %d verdicts, %d times ASSUMED_BAD", r.Counters.AlwaysSkipSent, hotBad)
		}
		if otherBad != 0 {
			t.Errorf("unmarked EVs went ASSUMED_BAD %d times", otherBad)
		}
	}
}

// TestTransportACK: with Config.TransportACK the responder answers every
// AckReq packet with a RoCEv2 ACK (0xD1, AETH syndrome 0x1F, PSN = cack,
// MSN = messages completed) besides the SACK, and the requester accepts it
// as a cumulative acknowledgement. Off by default.
func TestTransportACK(t *testing.T) {
	for _, on := range []bool{false, true} {
		h := newHarness(t, hopts{seed: 5, cfg: func(c *Config) { c.TransportACK = on }})
		var acks []wire.Packet
		var cnt ctrlCount
		h.Filter = func(from int, _ wire.Plane, f []byte) bool {
			cnt.filter(from, f)
			var p wire.Packet
			if (wire.Decoder{}).Decode(f, &p) == nil && p.Opcode == wire.OpAck {
				if !wire.CheckICRC(f, &p) {
					t.Errorf("ACK frame with a bad ICRC")
				}
				acks = append(acks, p)
			}
			return false
		}
		const n = 20
		h.transfer(n*3000, 3000, Second) // 2 packets per message, AckReq on the last
		s, r := h.snap(0), h.snap(1)
		if !on {
			if len(acks) != 0 {
				t.Fatalf("TransportACK off: %d ACKs sent", len(acks))
			}
			continue
		}
		if len(acks) != n || r.Counters.TxAck != n || s.Counters.RxAck != n {
			t.Fatalf("%d ACK frames (TxAck %d, RxAck %d) for %d AckReq packets", len(acks), r.Counters.TxAck, s.Counters.RxAck, n)
		}
		// Packets are sprayed and reordered, so an ACK carries the
		// cumulative ack at its sending: never backwards, MSN counting the
		// messages below it, and the last one covering everything.
		start := s.SndNxt.Add(-2 * n)
		prev := start.Add(-1)
		for i, p := range acks {
			if p.Syndrome != 0x1F || p.DestQP != h.qp[0] || p.PSN.Before(prev) || p.PSN.Diff(start) < -1 ||
				p.AckMSN != uint32(p.PSN.Diff(start)+1)/2 {
				t.Errorf("ACK %d: syndrome %#x PSN %v (previous %v) MSN %d QP %v", i, p.Syndrome, p.PSN, prev, p.AckMSN, p.DestQP)
			}
			prev = p.PSN
		}
		if last := acks[n-1]; last.PSN != s.SndNxt.Add(-1) || last.AckMSN != n {
			t.Errorf("last ACK PSN %v MSN %d, want %v %d", last.PSN, last.AckMSN, s.SndNxt.Add(-1), n)
		}
		if cnt.sack[1] == 0 {
			t.Error("SACKs stopped: the ACK is in addition, not instead")
		}
	}
}
