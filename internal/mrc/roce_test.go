package mrc

import (
	"container/heap"
	"fmt"
	"testing"

	"github.com/softmrc/softmrc/internal/dcqcn"
	"github.com/softmrc/softmrc/internal/wire"
)

func TestRoCEFlowLabelAndPort(t *testing.T) {
	// Values of Linux's rdma_calc_flow_label / rdma_flow_label_to_udp_sport
	// worked by hand: 0x11·0x12 = 0x132 (no fold); 0xABCDE·0x12345 folds to
	// 0x582AF, whose high 6 bits 0x16 fold into the low 14: 0x2AF^0x16.
	for _, tc := range []struct {
		a, b wire.QPN
		fl   uint32
		port uint16
	}{
		{0x11, 0x12, 0x132, 0xC132},
		{0xABCDE, 0x12345, 0x582AF, 0xC2B9},
	} {
		fl := RoCEFlowLabel(tc.a, tc.b)
		if fl != tc.fl || RoCEFlowLabel(tc.b, tc.a) != fl {
			t.Errorf("flow label of %#x,%#x = %#x (reversed %#x), want %#x both ways", tc.a, tc.b, fl, RoCEFlowLabel(tc.b, tc.a), tc.fl)
		}
		if p := RoCESrcPort(fl); p != tc.port {
			t.Errorf("source port of flow label %#x = %#x, want %#x", fl, p, tc.port)
		}
		ev := RoCEEV(tc.a, tc.b, []wire.Plane{0, 1, 2, 3}, 4)
		if ev.SrcPort() != tc.port || int(ev.Plane()) != int(tc.fl)%4 || int(ev.T1()) != int(tc.fl>>4)%4 {
			t.Errorf("EV %v: port %#x plane %d T1 %d", ev, ev.SrcPort(), ev.Plane(), ev.T1())
		}
	}
}

// dataLog records every data packet's PSN, EV and retransmission bit per
// side, and the EVs of the control packets.
type dataLog struct {
	psns    [2][]wire.PSN
	rtx     [2][]bool
	evs     [2]map[wire.EV]int
	ctrlEVs [2]map[wire.EV]int
	cnps    [2]int
}

func (l *dataLog) filter(drop func(from int, port wire.Plane, f []byte, p *wire.Packet) bool) func(int, wire.Plane, []byte) bool {
	for i := range 2 {
		l.evs[i], l.ctrlEVs[i] = map[wire.EV]int{}, map[wire.EV]int{}
	}
	return func(from int, port wire.Plane, f []byte) bool {
		var p wire.Packet
		if (wire.Decoder{}).Decode(f, &p) != nil {
			return false
		}
		if !p.Opcode.IsData() {
			l.ctrlEVs[from][p.EV]++
			if p.Opcode == wire.OpCNP {
				l.cnps[from]++
			}
			return false
		}
		l.psns[from] = append(l.psns[from], p.PSN)
		l.rtx[from] = append(l.rtx[from], p.Rtx)
		l.evs[from][p.EV]++
		return drop != nil && drop(from, port, f, &p)
	}
}

// TestRoCEGoBackN: after a lost (or trimmed) data packet the sender resends
// that packet and every packet sent after it, in order, and the data
// arrive intact. The last packet of a transfer has no successor to reveal
// the gap: the retransmit timer recovers it.
func TestRoCEGoBackN(t *testing.T) {
	const size, chunk = 256 << 10, 64 << 10 // 128 packets of 2 KiB
	for _, tc := range []struct {
		name   string
		k      int  // drop the k-th first transmission (0-based)
		trim   bool // trim it instead of dropping
		wantTO bool // recovered by the retransmit timer
	}{
		{name: "first", k: 0},
		{name: "middle", k: 40},
		{name: "trimmed middle", k: 40, trim: true},
		{name: "last", k: 127, wantTO: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, hopts{seed: 5, qc: QPConfig{Transport: RoCE}})
			var log dataLog
			var lost wire.PSN
			n := 0
			h.Filter = log.filter(func(from int, port wire.Plane, f []byte, p *wire.Packet) bool {
				if from != 0 || p.Rtx {
					return false
				}
				n++
				if n-1 != tc.k {
					return false
				}
				lost = p.PSN
				if tc.trim {
					// A switch trims it: the header-only frame reaches
					// the responder in place of the whole one.
					b := append([]byte(nil), f...)
					m, ok := wire.Trim(b, false)
					if !ok {
						t.Fatal("wire.Trim refused a data frame")
					}
					h.seq++
					heap.Push(&h.fl, flight{at: h.now + h.Delay, seq: h.seq, to: 1, port: port, b: b[:m]})
				}
				return true
			})
			h.transfer(size, chunk, Second)
			psns, rtx := log.psns[0], log.rtx[0]
			first := -1
			for i := range psns {
				if rtx[i] {
					first = i
					break
				}
			}
			if first < 0 {
				t.Fatal("nothing was retransmitted")
			}
			if psns[first] != lost {
				t.Fatalf("first retransmission is PSN %v, want the lost %v", psns[first], lost)
			}
			// Everything sent after the loss and before the first
			// retransmission goes again, in order.
			var highest wire.PSN = lost
			for _, p := range psns[:first] {
				if p.After(highest) {
					highest = p
				}
			}
			want := int(highest.Diff(lost)) + 1
			for j := 0; j < want; j++ {
				i := first + j
				if i >= len(psns) || psns[i] != lost.Add(j) || !rtx[i] {
					t.Fatalf("retransmission %d is PSN %v (rtx %v), want %v: go-back-N resends %d packets from %v", j, psns[i], rtx[i], lost.Add(j), want, lost)
				}
			}
			s0, s1 := h.snap(0), h.snap(1)
			if int(s0.Counters.TxRtx) < want {
				t.Fatalf("%d retransmissions, want at least %d", s0.Counters.TxRtx, want)
			}
			if tc.wantTO != (s0.Counters.Timeouts > 0) {
				t.Fatalf("timeouts %d, want timer recovery %v", s0.Counters.Timeouts, tc.wantTO)
			}
			if !tc.wantTO && s0.Counters.RxNACK == 0 {
				t.Fatal("no NAK sequence error received: the gap must be reported")
			}
			if tc.trim && (s1.RoCE.TrimDropped != 1 || s1.Counters.NACKsSent[wire.NackTrimmed] != 0) {
				t.Fatalf("trimmed packet: dropped %d, TRIMMED NACKs %d; want a plain loss (1 dropped, no NACK)", s1.RoCE.TrimDropped, s1.Counters.NACKsSent[wire.NackTrimmed])
			}
			t.Logf("lost PSN %v: %d packets resent (%d in all), NAKs %d, timeouts %d", lost, want, s0.Counters.TxRtx, s0.Counters.RxNACK, s0.Counters.Timeouts)
		})
	}
}

// TestRoCEOnePath: every data packet of a RoCE QP, first transmissions and
// retransmissions, has one EV (one UDP source port and flow label), the
// one derived from the QPN pair; the responder's control packets ride its
// own QP's path, which is the same. Several QP pairs, both routing modes.
func TestRoCEOnePath(t *testing.T) {
	for _, mode := range []RoutingMode{SRv6, ECMP} {
		t.Run(mode.String(), func(t *testing.T) {
			h := newHarness(t, hopts{seed: 11, mode: mode, noQPs: true})
			h.Loss = 0.01
			ports := map[uint16]bool{}
			for pair := range 4 {
				var log dataLog
				h.Filter = log.filter(nil)
				h.qp[0], h.qp[1] = h.connect(QPConfig{Transport: RoCE}, QPConfig{Transport: RoCE})
				h.transfer(1<<20, 256<<10, 5*Second)
				if len(log.evs[0]) != 1 {
					t.Fatalf("pair %d: data on %d EVs %v, want exactly one", pair, len(log.evs[0]), log.evs[0])
				}
				nT1 := 4
				if mode == ECMP {
					nT1 = 256
				}
				want := RoCEEV(h.qp[0], h.qp[1], []wire.Plane{0, 1, 2, 3}, nT1)
				for ev := range log.evs[0] {
					if ev != want {
						t.Fatalf("pair %d: data EV %v, want %v (QPNs %#x, %#x)", pair, ev, want, h.qp[0], h.qp[1])
					}
					if ev.SrcPort() != RoCESrcPort(RoCEFlowLabel(h.qp[0], h.qp[1])) {
						t.Fatalf("pair %d: UDP source port %#x is not the QPN-pair hash", pair, ev.SrcPort())
					}
					ports[ev.SrcPort()] = true
				}
				if len(log.ctrlEVs[1]) != 1 || log.ctrlEVs[1][want] == 0 {
					t.Fatalf("pair %d: responder control packets on %v, want all on %v", pair, log.ctrlEVs[1], want)
				}
				if s := h.snap(0); s.Counters.TxRtx == 0 || s.RoCE == nil || s.RoCE.EV != want {
					t.Fatalf("pair %d: rtx %d, snapshot %+v: want retransmissions on the one EV", pair, s.Counters.TxRtx, s.RoCE)
				}
			}
			if len(ports) < 2 {
				t.Fatalf("4 QP pairs used source ports %v: the hash should spread them", ports)
			}
		})
	}
}

// TestRoCEDCQCN: CE marks make the responder send CNPs, at most one per
// 4 µs; the sender's DCQCN rate falls, its sending slows, and once the
// marks stop the rate climbs back to the line rate.
func TestRoCEDCQCN(t *testing.T) {
	h := newHarness(t, hopts{seed: 21, qc: QPConfig{Transport: RoCE}})
	var log dataLog
	h.Filter = log.filter(nil)
	marking := true
	h.MarkCE = func(from int, _ *wire.Packet) bool { return from == 0 && marking }
	const size = 4 << 20
	src := h.region(0, 0x11, 0x10000, size, AccessLocalRead)
	dst := make([]byte, size)
	h.mem[1].Register(0x22, 0x900000, dst, AccessRemoteWrite)
	if err := h.eng[0].PostWrite(h.qp[0], WR{ID: 1, LKey: 0x11, Addr: 0x10000, Len: size, RemoteVA: 0x900000, RKey: 0x22}); err != nil {
		t.Fatal(err)
	}
	line := h.snap(0).RoCE.Rate
	if line != 100e9 {
		t.Fatalf("start rate %v, want the port's 100 Gb/s", line)
	}
	const markFor = 200 * Microsecond
	h.run(markFor, nil)
	s0, s1 := h.snap(0), h.snap(1)
	sent := len(log.psns[0])
	cut := s0.RoCE.Rate
	t.Logf("after %d µs of marks: %d CNPs sent, %d received, rate %.2f Gb/s, α %.3f, %d packets sent",
		markFor/Microsecond, s1.RoCE.TxCNP, s0.RoCE.RxCNP, cut/1e9, s0.RoCE.Alpha, sent)
	if s1.RoCE.CEMarked == 0 || s1.RoCE.TxCNP == 0 || s0.RoCE.RxCNP != s1.RoCE.TxCNP || log.cnps[1] != int(s1.RoCE.TxCNP) {
		t.Fatalf("CE %d, CNPs sent %d (on the wire %d), received %d", s1.RoCE.CEMarked, s1.RoCE.TxCNP, log.cnps[1], s0.RoCE.RxCNP)
	}
	if e0, e1 := h.eng[0].Counters(), h.eng[1].Counters(); e0.RxCNP != s0.RoCE.RxCNP || e1.TxCNP != s1.RoCE.TxCNP {
		t.Fatalf("engine CNP counters rx %d tx %d, QP's %d %d", e0.RxCNP, e1.TxCNP, s0.RoCE.RxCNP, s1.RoCE.TxCNP)
	}
	if max := uint64(markFor/(4*Microsecond)) + 1; s1.RoCE.TxCNP > max {
		t.Fatalf("%d CNPs in %d µs: more than one per 4 µs (%d)", s1.RoCE.TxCNP, markFor/Microsecond, max)
	}
	if s1.RoCE.TxCNP >= s1.RoCE.CEMarked {
		t.Fatalf("%d CNPs for %d marked packets: the NP must merge marks", s1.RoCE.TxCNP, s1.RoCE.CEMarked)
	}
	if cut > 0.2*line {
		t.Fatalf("rate after %d µs of marks %.2f Gb/s, want below 20%% of the line rate", markFor/Microsecond, cut/1e9)
	}
	// Sending follows the rate: the bytes sent in the next 100 µs are
	// about what the DCQCN rate allows, far below the line rate.
	before := len(log.psns[0])
	h.run(markFor+100*Microsecond, nil)
	got := float64(len(log.psns[0])-before) * 2048 * 8 / 100e-6
	if got > 2*h.snap(0).RoCE.Target || got > 0.3*line {
		t.Fatalf("sent at %.2f Gb/s in 100 µs with DCQCN target %.2f Gb/s", got/1e9, h.snap(0).RoCE.Target/1e9)
	}
	marking = false
	done := false
	h.run(markFor+Second, func() bool {
		for _, c := range h.drainCQ(0) {
			if c.Status != StatusOK {
				t.Fatalf("completion %+v", c)
			}
			done = true
		}
		return done
	})
	if !done || string(src) != string(dst) {
		t.Fatalf("transfer done %v, data equal %v", done, string(src) == string(dst))
	}
	h.run(h.now+200*Millisecond, nil) // the timer alone restores the rate
	if r := h.snap(0).RoCE.Rate; r < 0.99*line {
		t.Fatalf("rate %.3f Gb/s 200 ms after the marks stopped, want the line rate back", r/1e9)
	}
}

// TestRoCERetryExceeded: a path that drops everything makes a RoCE QP fail
// after RetryLimit retransmissions of the oldest packet, as IBTA RC's
// retry_cnt does, although its one path still "looks" usable.
func TestRoCERetryExceeded(t *testing.T) {
	h := newHarness(t, hopts{seed: 31, qc: QPConfig{Transport: RoCE, RetryLimit: 3, AckTimeout: 100 * Microsecond, FixedRTO: true, TimeoutMode: TimeoutLinear}})
	h.Filter = func(from int, _ wire.Plane, f []byte) bool { return from == 0 }
	h.region(0, 0x11, 0x10000, 4096, AccessLocalRead)
	h.mem[1].Register(0x22, 0x900000, make([]byte, 4096), AccessRemoteWrite)
	if err := h.eng[0].PostWrite(h.qp[0], WR{ID: 7, LKey: 0x11, Addr: 0x10000, Len: 4096, RemoteVA: 0x900000, RKey: 0x22}); err != nil {
		t.Fatal(err)
	}
	var cs []Completion
	h.run(Second, func() bool { cs = append(cs, h.drainCQ(0)...); return len(cs) > 0 })
	s := h.snap(0)
	if s.State != QPError || s.Status != StatusRetryExceeded {
		t.Fatalf("QP %v/%v after %d µs, timeouts %d: want ERROR/RETRY_EXCEEDED", s.State, s.Status, h.now/Microsecond, s.Counters.Timeouts)
	}
	if s.Counters.Timeouts != 4 || h.now > 600*Microsecond {
		t.Fatalf("%d timeouts by %d µs: want the first try and 3 retries, 100 µs apart", s.Counters.Timeouts, h.now/Microsecond)
	}
}

// TestRoCERetryCountResetsOnProgress: the retry count is retries without
// progress (IBTA RC, rxe), not the retransmissions of one packet. Eight
// packets leave before any answer; the first is lost, so the NAK makes all
// eight go again; the last one's retransmission is lost too and only the
// timer can recover it. With RetryLimit 1 that is its second
// retransmission, but the first seven were acknowledged in between, so the
// QP must not fail.
func TestRoCERetryCountResetsOnProgress(t *testing.T) {
	h := newHarness(t, hopts{seed: 41, qc: QPConfig{Transport: RoCE, RetryLimit: 1}})
	var log dataLog
	first, last := wire.PSN(0), wire.PSN(0)
	seen := map[wire.PSN]int{}
	h.Filter = log.filter(func(from int, _ wire.Plane, _ []byte, p *wire.Packet) bool {
		if from != 0 {
			return false
		}
		if len(seen) == 0 {
			first, last = p.PSN, p.PSN.Add(7)
		}
		seen[p.PSN]++
		return (p.PSN == first && seen[p.PSN] == 1) || (p.PSN == last && seen[p.PSN] == 2)
	})
	h.transfer(8*2048, 8*2048, Second)
	s := h.snap(0)
	if s.State != QPReady || s.Counters.Timeouts != 1 || s.Counters.RxNACK != 1 || seen[last] != 3 {
		t.Fatalf("QP %v/%v, timeouts %d, NAKs %d, last packet sent %d times: want READY after 1 NAK, 1 timeout, 3 sends of the last",
			s.State, s.Status, s.Counters.Timeouts, s.Counters.RxNACK, seen[last])
	}
}

// TestRoCETransportTimer: the retransmit timer is IBTA RC's transport timer,
// one per QP, restarted whenever an acknowledgement makes progress (IBTA
// 9.7.6.1.1; rxe restarts its retrans_timer on every response), not one per
// packet. A burst queued behind a slow link is acknowledged steadily, but
// its last packets wait longer than the timeout after being sent: they must
// not time out (before the fix every one of them did, and each timeout sent
// the whole window again). When the acknowledgements stop, the timer still
// fires: one timeout after the last progress, then one per timeout.
func TestRoCETransportTimer(t *testing.T) {
	const timeout = 500 * Microsecond
	for _, tc := range []struct {
		name         string
		stopAcksAt   int // drop every ACK after this many data packets arrived (0: never)
		wantTimeouts bool
	}{
		{name: "queue longer than the timeout, acknowledged steadily"},
		{name: "acknowledgements stop", stopAcksAt: 64, wantTimeouts: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, hopts{seed: 3, qc: QPConfig{Transport: RoCE, RetryLimit: 7,
				AckTimeout: timeout, FixedRTO: true, TimeoutMode: TimeoutLinear}})
			// 1 Gb/s under a NIC paced at 100 Gb/s: a 2 KiB packet takes
			// 16 µs on the wire, so 128 of them queue for 2 ms (4 timeouts).
			h.Rate = 1
			arrived := 0
			var lastAck, firstTO Time
			h.Filter = func(from int, _ wire.Plane, f []byte) bool {
				var p wire.Packet
				if (wire.Decoder{}).Decode(f, &p) != nil {
					return false
				}
				if from == 0 && p.Opcode.IsData() {
					arrived++
					return false
				}
				if from == 1 && tc.stopAcksAt > 0 && arrived >= tc.stopAcksAt {
					return true
				}
				if from == 1 {
					lastAck = h.now
				}
				return false
			}
			h.region(0, 0x11, 0x10000, 256<<10, AccessLocalRead)
			h.mem[1].Register(0x22, 0x900000, make([]byte, 256<<10), AccessRemoteWrite)
			for off := 0; off < 256<<10; off += 64 << 10 {
				if err := h.eng[0].PostWrite(h.qp[0], WR{ID: uint64(off), LKey: 0x11, Addr: 0x10000 + uint64(off), Len: 64 << 10, RemoteVA: 0x900000 + uint64(off), RKey: 0x22}); err != nil {
					t.Fatal(err)
				}
			}
			done := 0
			h.run(Second, func() bool {
				if firstTO == 0 && h.snap(0).Counters.Timeouts > 0 {
					firstTO = h.now
				}
				for _, c := range h.drainCQ(0) {
					if c.Status != StatusOK {
						return true
					}
					done++
				}
				return done == 4
			})
			s := h.snap(0)
			if !tc.wantTimeouts {
				if done != 4 || s.Counters.Timeouts != 0 || s.Counters.TxRtx != 0 {
					t.Fatalf("%d of 4 writes done, %d timeouts, %d retransmissions: want all done with none (the ACKs never paused for %d µs)",
						done, s.Counters.Timeouts, s.Counters.TxRtx, timeout/Microsecond)
				}
				return
			}
			// The ACKs stopped: the QP fails after 1 + RetryLimit timeouts,
			// the first one timeout after the last ACK that arrived.
			if s.State != QPError || s.Status != StatusRetryExceeded || s.Counters.Timeouts != 8 {
				t.Fatalf("QP %v/%v with %d timeouts: want ERROR/RETRY_EXCEEDED after 8", s.State, s.Status, s.Counters.Timeouts)
			}
			if d := firstTO - lastAck; d < timeout || d > timeout+50*Microsecond {
				t.Fatalf("first timeout %d µs after the last ACK: want the timeout, %d µs", d/Microsecond, timeout/Microsecond)
			}
		})
	}
}

// sendLoss loses the data packet off PSNs after the first one side 0
// sends, on its first times transmissions; seen counts every PSN's sends.
type sendLoss struct {
	off, times int
	first      wire.PSN
	seen       map[wire.PSN]int
}

func (l *sendLoss) psn() wire.PSN { return l.first.Add(l.off) }

func (l *sendLoss) drop(from int, _ wire.Plane, _ []byte, p *wire.Packet) bool {
	if from != 0 {
		return false
	}
	if l.seen == nil {
		l.seen, l.first = map[wire.PSN]int{}, p.PSN
	}
	l.seen[p.PSN]++
	return p.PSN == l.psn() && l.seen[p.PSN] <= l.times
}

// TestRoCETimerWaitsForRetransmission: after a retry the transport timer
// guards the retransmission, so it starts when the retransmission leaves
// (rxe re-arms its retrans_timer when the requester sends with no timer
// pending), not when the retry was decided. A QP paced by DCQCN slower
// than one packet per timeout (8 Mb/s: 2 KiB every ~2 ms, timeout 100 µs)
// loses one packet: the timer finds it (the next packet, which would draw
// a NAK, is ~2 ms away) and the pacer holds the retransmission for ~2 ms.
// Before the fix the timer kept firing while nothing of the QP was on the
// wire, each firing a retry without a retransmission, and the QP failed
// with RETRY_EXCEEDED after 8 of them.
func TestRoCETimerWaitsForRetransmission(t *testing.T) {
	h := newHarness(t, hopts{seed: 51, qc: QPConfig{Transport: RoCE, RetryLimit: 7,
		AckTimeout: 100 * Microsecond, FixedRTO: true, TimeoutMode: TimeoutLinear,
		DCQCN: dcqcn.Config{LineRate: 8e6}}})
	var log dataLog
	loss := sendLoss{off: 2, times: 1}
	h.Filter = log.filter(loss.drop)
	h.transfer(8*2048, 8*2048, Second)
	s := h.snap(0)
	if s.State != QPReady || s.Counters.Timeouts != 1 || loss.seen[loss.psn()] != 2 {
		t.Fatalf("QP %v/%v, %d timeouts, %d NAKs, lost packet sent %d times: want READY after 1 timeout, the lost packet sent twice",
			s.State, s.Status, s.Counters.Timeouts, s.Counters.RxNACK, loss.seen[loss.psn()])
	}
}

// TestRoCEStaleNAK: a NAK sequence error that arrives after the transport
// timer already went back for the same PSN (no acknowledgement in between)
// is about the loss being repaired: it is no second retry and no second
// go-back (rxe's started_retry). Before the fix the late NAK re-queued
// every retransmission already on the wire, so each PSN from the lost one
// on left three times, and it counted as a retry of its own.
func TestRoCEStaleNAK(t *testing.T) {
	h := newHarness(t, hopts{seed: 61, qc: QPConfig{Transport: RoCE, RetryLimit: 7,
		AckTimeout: 100 * Microsecond, FixedRTO: true, TimeoutMode: TimeoutLinear}})
	const npkts, k = 8, 3
	seen := map[wire.PSN]int{}
	var first wire.PSN
	var nak []byte
	var nakPort wire.Plane
	h.Filter = func(from int, port wire.Plane, f []byte) bool {
		var p wire.Packet
		if (wire.Decoder{}).Decode(f, &p) != nil {
			return false
		}
		if from == 0 && p.Opcode.IsData() {
			if len(seen) == 0 {
				first = p.PSN
			}
			seen[p.PSN]++
			return p.PSN == first.Add(k) && seen[p.PSN] == 1
		}
		if from == 1 && p.Opcode == wire.OpAck && p.Syndrome&0xE0 == 0x60 && nak == nil {
			nak, nakPort = append([]byte(nil), f...), port // hold it until the timer has fired
			return true
		}
		return false
	}
	src := h.region(0, 0x11, 0x10000, npkts*2048, AccessLocalRead)
	dst := make([]byte, npkts*2048)
	h.mem[1].Register(0x22, 0x900000, dst, AccessRemoteWrite)
	if err := h.eng[0].PostWrite(h.qp[0], WR{ID: 1, LKey: 0x11, Addr: 0x10000, Len: npkts * 2048, RemoteVA: 0x900000, RKey: 0x22}); err != nil {
		t.Fatal(err)
	}
	injected, done := false, false
	h.run(Second, func() bool {
		if !injected && nak != nil && h.snap(0).Counters.Timeouts > 0 {
			injected = true
			h.eng[0].HandlePacket(h.now, nakPort, nak)
		}
		for _, c := range h.drainCQ(0) {
			if c.Status != StatusOK {
				t.Fatalf("completion %+v", c)
			}
			done = true
		}
		return done
	})
	s := h.snap(0)
	if !injected || !done || string(src) != string(dst) {
		t.Fatalf("NAK held and delivered late %v, transfer done %v, data equal %v", injected, done, string(src) == string(dst))
	}
	for i := range npkts {
		want := 1
		if i >= k {
			want = 2
		}
		if n := seen[first.Add(i)]; n != want {
			t.Errorf("PSN +%d sent %d times, want %d (one go-back after the timeout)", i, n, want)
		}
	}
	if s.Counters.Timeouts != 1 || s.RoCE.StaleNAK != 1 {
		t.Fatalf("%d timeouts, %d stale NAKs: want 1 and 1", s.Counters.Timeouts, s.RoCE.StaleNAK)
	}
}

// TestRoCERetryTimeout: MRC's RetryTimeout (nothing acknowledged for that
// long ends the QP) does not apply to RoCE QPs: IBTA RC fails a QP by its
// retry count alone. A tail loss under an ACK timeout longer than the
// RetryTimeout (mrc-nicd: qp.retry_timeout 4 s against NCCL's timeout 20,
// 4.3 s) must wait for the timer and recover. Before the fix the QP failed
// with RETRY_EXCEEDED one RetryTimeout after its last ACK, with no timeout
// at all (S7 roce-1qp-loss, 2026-12-03: acked 1417216 bytes, then error
// exactly 4.000 s later with 0 timeouts).
func TestRoCERetryTimeout(t *testing.T) {
	h := newHarness(t, hopts{seed: 71, qc: QPConfig{Transport: RoCE, RetryLimit: 7, RetryTimeout: 2 * Millisecond,
		AckTimeout: 5 * Millisecond, FixedRTO: true, TimeoutMode: TimeoutLinear}})
	seen := map[wire.PSN]int{}
	var last wire.PSN
	h.Filter = func(from int, _ wire.Plane, f []byte) bool {
		var p wire.Packet
		if from != 0 || (wire.Decoder{}).Decode(f, &p) != nil || !p.Opcode.IsData() {
			return false
		}
		if len(seen) == 0 {
			last = p.PSN.Add(7)
		}
		seen[p.PSN]++
		return p.PSN == last && seen[p.PSN] == 1 // the tail: only the timer finds it
	}
	h.transfer(8*2048, 8*2048, Second)
	s := h.snap(0)
	if s.State != QPReady || s.Counters.Timeouts != 1 || seen[last] != 2 {
		t.Fatalf("QP %v/%v, %d timeouts, last packet sent %d times: want READY after 1 timeout", s.State, s.Status, s.Counters.Timeouts, seen[last])
	}
}

// TestRoCEGoBackInOrder: a go-back resends from the oldest unacknowledged
// PSN, in PSN order, also when the transport timer fires again before the
// previous go-back's retransmissions have all left (DCQCN paces them below
// one window per timeout). The first packet is lost up to 6 times, below
// RetryLimit 7: each QP must end READY with the data delivered, and the
// PSNs it sends never step back except to restart at the lost one. Before
// the fix a go-back appended the PSNs behind those still queued from the
// go-back before, so a round began mid-window ("0 1 2 5 3 4", "0 3 4 0 1
// 2 0 3 4"), all of it out of order at the in-order receiver: 4 of these
// 36 cases failed, 2 so and 2 with RETRY_EXCEEDED after 7 timeouts in which
// the lost packet left only 4 times (mrc-lab S8 RoCE, 2026-12-04: a paced
// flow's retransmissions all counted rx_ooo at the receiver for 10
// timeouts).
func TestRoCEGoBackInOrder(t *testing.T) {
	for _, lineRate := range []float64{1e9, 100e6} {
		for _, timeout := range []Time{50 * Microsecond, 100 * Microsecond, 300 * Microsecond} {
			for _, ecn := range []float64{0, 1} {
				for _, drops := range []int{1, 3, 6} {
					t.Run(fmt.Sprintf("%gbps_%dus_ecn%g_%dlost", lineRate, timeout/Microsecond, ecn, drops), func(t *testing.T) {
						h := newHarness(t, hopts{seed: 71, qc: QPConfig{Transport: RoCE, RetryLimit: 7,
							AckTimeout: timeout, FixedRTO: true, TimeoutMode: TimeoutLinear,
							DCQCN: dcqcn.Config{LineRate: lineRate}}})
						h.Rate, h.ECN = 1, ecn // CE marks: CNPs slow the retransmissions
						var log dataLog
						loss := sendLoss{times: drops}
						h.Filter = log.filter(loss.drop)
						h.transfer(16*2048, 16*2048, Second)
						var rel []int
						for _, p := range log.psns[0] {
							rel = append(rel, int(p.Diff(loss.first)))
						}
						for i := 1; i < len(rel); i++ {
							if rel[i] < rel[i-1] && rel[i] != 0 {
								t.Fatalf("a go-back began mid-window: PSNs sent %v", rel)
							}
						}
						if s := h.snap(0); s.State != QPReady {
							t.Fatalf("QP %v/%v after %d timeouts: PSNs sent %v", s.State, s.Status, s.Counters.Timeouts, rel)
						}
					})
				}
			}
		}
	}
}
