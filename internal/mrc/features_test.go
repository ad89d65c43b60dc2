package mrc

import (
	"bytes"
	"math"
	"testing"

	"github.com/softmrc/softmrc/internal/wire"
)

func TestWriteImmOrderAndAfterData(t *testing.T) {
	h := newHarness(t, hopts{seed: 21, qc: QPConfig{MaxWImm: 16}})
	h.Loss, h.Jitter = 0.03, 3*Microsecond // reorder and lose, so immediates must wait
	const n, msg = 40, 20000
	dst := make([]byte, n*msg)
	h.mem[1].Register(0x22, 0, dst, AccessRemoteWrite)
	src := h.region(0, 0x11, 0, n*msg, AccessLocalRead)
	posted, done := 0, 0
	var imms []uint32
	ok := h.run(Second, func() bool {
		for _, c := range h.drainCQ(0) {
			if c.Status != StatusOK {
				t.Fatalf("send completion %+v", c)
			}
			done++
		}
		for posted < n {
			err := h.eng[0].PostWrite(h.qp[0], WR{Op: OpWriteImm, LKey: 0x11, Addr: uint64(posted * msg), Len: msg, RemoteVA: uint64(posted * msg), RKey: 0x22, Imm: uint32(1000 + posted)})
			if isErr(err, ErrWImmLimit) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			posted++
		}
		for _, c := range h.drainCQ(1) {
			if c.Kind != CompRecvImm {
				t.Fatalf("receiver completion %+v", c)
			}
			k := int(c.Imm - 1000)
			// The immediate comes only after its data (and all earlier data).
			if !bytes.Equal(dst[:(k+1)*msg], src[:(k+1)*msg]) {
				t.Fatalf("immediate %d delivered before its data landed", k)
			}
			imms = append(imms, c.Imm)
		}
		return done == n && len(imms) == n
	})
	if !ok {
		t.Fatalf("not done: %d sent, %d immediates", done, len(imms))
	}
	for i, v := range imms {
		if v != uint32(1000+i) {
			t.Fatalf("immediate %d is %d: out of order", i, v)
		}
	}
	s := h.snap(0)
	if s.Counters.TxRtx == 0 {
		t.Error("no loss happened: the test did not test ordering under loss")
	}
}

func TestWriteImmCap(t *testing.T) {
	// Sender-side cap: the documented error.
	h := newHarness(t, hopts{seed: 22, qc: QPConfig{MaxWImm: 4}})
	h.mem[1].Register(0x22, 0, make([]byte, 1<<20), AccessRemoteWrite)
	for i := 0; i < 4; i++ {
		if err := h.eng[0].PostWrite(h.qp[0], WR{Op: OpWriteImm, Local: make([]byte, 10), RKey: 0x22}); err != nil {
			t.Fatal(err)
		}
	}
	if err := h.eng[0].PostWrite(h.qp[0], WR{Op: OpWriteImm, Local: make([]byte, 10), RKey: 0x22}); !isErr(err, ErrWImmLimit) {
		t.Fatalf("5th WriteImm: %v, want ErrWImmLimit", err)
	}
	if err := h.eng[0].PostWrite(h.qp[0], WR{Op: OpWrite, Local: make([]byte, 10), RKey: 0x22}); err != nil {
		t.Fatalf("plain Write is not capped: %v", err)
	}

	// Receiver-side cap: a sender that ignores it (told a larger cap) gets
	// NACK WIMM_LIMIT and its QP goes to error with StatusWImmLimit.
	h = newHarness(t, hopts{seed: 23, noQPs: true})
	a, _ := h.eng[0].CreateQP(QPConfig{MaxWImm: 64})
	b, _ := h.eng[1].CreateQP(QPConfig{MaxWImm: 2})
	ia, _ := h.eng[0].Info(a)
	ib, _ := h.eng[1].Info(b)
	ib.MaxWImm = 64 // lie to the sender
	if err := h.eng[0].Connect(a, ib); err != nil {
		t.Fatal(err)
	}
	if err := h.eng[1].Connect(b, ia); err != nil {
		t.Fatal(err)
	}
	h.qp = [2]wire.QPN{a, b}
	h.mem[1].Register(0x22, 0, make([]byte, 1<<20), AccessRemoteWrite)
	// Make the first message's data lag so that immediates pile up.
	first := true
	h.Filter = func(from int, _ wire.Plane, f []byte) bool {
		var p wire.Packet
		if from == 0 && first && (wire.Decoder{}).Decode(f, &p) == nil && p.Opcode == wire.OpWriteFirst {
			first = false
			return true
		}
		return false
	}
	h.eng[0].PostWrite(a, WR{Op: OpWriteImm, Local: make([]byte, 5000), RKey: 0x22, Imm: 1})
	for i := 0; i < 5; i++ {
		h.eng[0].PostWrite(a, WR{Op: OpWriteImm, Local: make([]byte, 10), RemoteVA: 8192, RKey: 0x22, Imm: uint32(2 + i)})
	}
	h.run(10*Millisecond, func() bool { return h.snap(0).State == QPError })
	s := h.snap(0)
	if s.State != QPError || s.Status != StatusWImmLimit {
		t.Fatalf("sender state %v status %v, want ERROR WIMM_LIMIT", s.State, s.Status)
	}
	if r := h.snap(1); r.Counters.WImmRejected == 0 || r.Counters.NACKsSent[wire.NackWImmLimit] == 0 {
		t.Fatalf("receiver did not enforce its cap: %+v", r.Counters)
	}
}

func TestDeniedNeverUsed(t *testing.T) {
	h := newHarness(t, hopts{seed: 31})
	var s QPSnapshot
	h.eng[0].Snapshot(h.qp[0], &s)
	denied := map[wire.EV]bool{}
	for i, e := range s.EVs {
		if e.Active && i%3 == 0 {
			denied[e.EV] = true
			if err := h.eng[0].Deny(h.qp[0], e.EV); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := h.eng[0].DenyPlane(h.qp[0], 2); err != nil {
		t.Fatal(err)
	}
	bad := 0
	h.Filter = func(from int, port wire.Plane, f []byte) bool {
		var p wire.Packet
		if from == 0 && (wire.Decoder{}).Decode(f, &p) == nil && (p.Opcode.IsData() || p.Opcode == wire.OpProbe) {
			if denied[p.EV] || p.EV.Plane() == 2 || port == 2 {
				bad++
			}
		}
		return false
	}
	h.Loss = 0.01 // make probes and replacements happen too
	h.transfer(2<<20, 256<<10, Second)
	if bad != 0 {
		t.Fatalf("%d packets used a DENIED EV or plane", bad)
	}
	s = h.snap(0)
	checkTransitions(t, s)
	nDenied := 0
	for _, e := range s.EVs {
		if e.State == EVDenied {
			nDenied++
		}
		if e.Plane == 2 && e.Sent != 0 {
			t.Fatalf("EV %v on the denied plane sent %d", e.EV, e.Sent)
		}
	}
	if uint64(nDenied) != s.Counters.EVTransitions[EVGood][EVDenied] {
		t.Errorf("%d DENIED EVs, %d GOOD->DENIED transitions", nDenied, s.Counters.EVTransitions[EVGood][EVDenied])
	}
	// Allow brings them back and the next transfer uses plane 2 again.
	h.eng[0].AllowPlane(h.qp[0], 2)
	for ev := range denied {
		h.eng[0].Allow(h.qp[0], ev)
	}
	h.Filter = nil
	h.mem[0].Deregister(0x11)
	h.mem[1].Deregister(0x22)
	h.transfer(2<<20, 256<<10, Second)
	s = h.snap(0)
	checkTransitions(t, s)
	var plane2 uint64
	for _, e := range s.EVs {
		if e.Plane == 2 {
			plane2 += e.Sent
		}
		if e.State == EVDenied {
			t.Errorf("EV %v still DENIED after Allow", e.EV)
		}
	}
	if plane2 == 0 {
		t.Error("plane 2 unused after AllowPlane")
	}
}

func TestReplayDeterminism(t *testing.T) {
	run := func(seed uint64) uint64 {
		h := newHarness(t, hopts{seed: seed})
		h.Loss, h.Trim, h.ECN, h.Jitter = 0.02, 0.02, 0.02, 2*Microsecond
		h.transfer(2<<20, 128<<10, Second)
		return h.trace.Sum64()
	}
	a, b, c := run(42), run(42), run(43)
	if a != b {
		t.Fatalf("same seed, different traces: %x vs %x", a, b)
	}
	if a == c {
		t.Fatalf("different seeds gave the same trace %x (the hash sees nothing)", a)
	}
}

func TestRTO(t *testing.T) {
	for _, tc := range []struct {
		mode   TimeoutMode
		fixed  bool
		srtt   Time
		rttvar Time
		tries  uint8
		want   Time
	}{
		{TimeoutExponential, false, 0, 0, 0, Millisecond}, // AckTimeout before a sample
		{TimeoutExponential, false, 0, 0, 2, 4 * Millisecond},
		{TimeoutExponential, false, 10 * Microsecond, 5 * Microsecond, 0, 40 * Microsecond}, // srtt + 4·rttvar + srtt
		{TimeoutExponential, false, 10 * Microsecond, 5 * Microsecond, 3, 320 * Microsecond},
		{TimeoutExponential, false, 10 * Microsecond, 5 * Microsecond, 30, 64 * Millisecond},     // MaxAckTimeout
		{TimeoutExponential, false, 400 * Microsecond, 200 * Microsecond, 0, 1600 * Microsecond}, // above the old 500 µs cap
		{TimeoutExponential, false, 100 * Millisecond, 0, 0, 64 * Millisecond},                   // MaxRTO
		{TimeoutLinear, false, 10 * Microsecond, 5 * Microsecond, 0, 40 * Microsecond},
		{TimeoutLinear, false, 10 * Microsecond, 5 * Microsecond, 5, 40 * Microsecond},
		{TimeoutLinear, false, Microsecond, 0, 5, 20 * Microsecond}, // MinRTO
		{TimeoutLinear, true, 10 * Microsecond, 5 * Microsecond, 5, Millisecond},
		{TimeoutExponential, true, 10 * Microsecond, 5 * Microsecond, 1, 2 * Millisecond},
	} {
		c := QPConfig{TimeoutMode: tc.mode, FixedRTO: tc.fixed}
		if err := c.setDefaults(); err != nil {
			t.Fatal(err)
		}
		q := &qp{cfg: c, srtt: tc.srtt, rttvar: tc.rttvar}
		if got := q.rto(tc.tries); got != tc.want {
			t.Errorf("%v fixed %v srtt %d rttvar %d tries %d: rto %d, want %d", tc.mode, tc.fixed, tc.srtt, tc.rttvar, tc.tries, got, tc.want)
		}
	}
}

func TestRemoteAccessErrorFlushes(t *testing.T) {
	h := newHarness(t, hopts{seed: 81})
	h.mem[1].Register(0x22, 0, make([]byte, 4096), AccessRemoteWrite)
	h.eng[0].PostWrite(h.qp[0], WR{ID: 1, Local: make([]byte, 100), RKey: 0x22})
	h.eng[0].PostWrite(h.qp[0], WR{ID: 2, Local: make([]byte, 100), RKey: 0x23}) // bad rkey
	h.eng[0].PostWrite(h.qp[0], WR{ID: 3, Local: make([]byte, 100), RKey: 0x22})
	var got []Completion
	h.run(10*Millisecond, func() bool {
		got = append(got, h.drainCQ(0)...)
		return len(got) >= 4
	})
	want := []Completion{
		{Kind: CompSend, Status: StatusOK, WRID: 1},
		{Kind: CompQPError, Status: StatusRemoteAccess},
		{Kind: CompSend, Status: StatusRemoteAccess, WRID: 2},
		{Kind: CompSend, Status: StatusFlushed, WRID: 3},
	}
	if len(got) != len(want) {
		t.Fatalf("completions %+v", got)
	}
	for i := range want {
		if got[i].Kind != want[i].Kind || got[i].Status != want[i].Status || got[i].WRID != want[i].WRID {
			t.Errorf("completion %d = %+v, want %+v", i, got[i], want[i])
		}
	}
	if err := h.eng[0].PostWrite(h.qp[0], WR{Local: []byte{1}}); !isErr(err, ErrQPState) {
		t.Errorf("post on an errored QP: %v", err)
	}
	if s := h.snap(0); s.InFlight != 0 {
		t.Errorf("errored QP still holds %d bytes of the window", s.InFlight)
	}
	if err := h.eng[0].DestroyQP(h.qp[0]); err != nil {
		t.Fatal(err)
	}
	if err := h.eng[0].DestroyQP(h.qp[0]); !isErr(err, ErrUnknownQP) {
		t.Errorf("second destroy: %v", err)
	}
}

func TestConfigErrors(t *testing.T) {
	mem := NewMemTable()
	for name, c := range map[string]Config{
		"no planes":     {},
		"bad MTU":       {Planes: 1, MTU: 1500, Mode: ECMP},
		"srv6 template": {Planes: 1},
	} {
		if _, err := New(c, mem, nil); !isErr(err, ErrConfig) {
			t.Errorf("%s: %v", name, err)
		}
	}
	h := newHarness(t, hopts{seed: 1, noQPs: true})
	for name, qc := range map[string]QPConfig{
		"too many EVs": {NumEVs: 300},
		"bad window":   {Window: 1000},
		"huge window":  {Window: 1 << 14},
	} {
		if _, err := h.eng[0].CreateQP(qc); !isErr(err, ErrConfig) {
			t.Errorf("%s: %v", name, err)
		}
	}
	a, _ := h.eng[0].CreateQP(QPConfig{})
	b, _ := h.eng[1].CreateQP(QPConfig{Transport: GoBackN})
	ib, _ := h.eng[1].Info(b)
	if err := h.eng[0].Connect(a, ib); !isErr(err, ErrConfig) {
		t.Errorf("transport mismatch: %v", err)
	}
	ib.Transport = MRC
	ib.Addrs[0] = addr("fd00:99::1")
	ib.Addrs[1], ib.Addrs[2], ib.Addrs[3] = ib.Addrs[0], ib.Addrs[0], ib.Addrs[0]
	if err := h.eng[0].Connect(a, ib); !isErr(err, ErrNoPeer) {
		t.Errorf("peer not in template: %v", err)
	}
}

func TestExplicitEVs(t *testing.T) {
	a, b, c := wire.MakeEV(0, 0, 1), wire.MakeEV(0, 1, 2), wire.MakeEV(0, 2, 3) // same plane: replacement stays in it
	h := newHarness(t, hopts{seed: 91, noQPs: true})
	h.qp[0], h.qp[1] = h.connect(QPConfig{EVs: []wire.EV{a, b}, Reserve: []wire.EV{c}}, QPConfig{})
	used := map[wire.EV]int{}
	h.Filter = func(from int, _ wire.Plane, f []byte) bool {
		var p wire.Packet
		if from == 0 && (wire.Decoder{}).Decode(f, &p) == nil && p.Opcode.IsData() {
			used[p.EV]++
		}
		return false
	}
	h.eng[0].Deny(h.qp[0], a)
	h.transfer(1<<20, 64<<10, Second)
	if len(used) != 2 || used[b] == 0 || used[c] == 0 {
		t.Fatalf("EVs used %v, want only %v and the reserve %v (%v denied)", used, b, c, a)
	}
	if _, err := h.eng[0].CreateQP(QPConfig{EVs: []wire.EV{wire.MakeEV(9, 0, 0)}}); err != nil {
		t.Fatal(err) // checked at Connect, where the planes are known
	}
	q, _ := h.eng[0].CreateQP(QPConfig{EVs: []wire.EV{wire.MakeEV(9, 0, 0)}})
	ib, _ := h.eng[1].Info(h.qp[1])
	if err := h.eng[0].Connect(q, ib); !isErr(err, ErrConfig) {
		t.Errorf("EV on a missing plane: %v", err)
	}
}

func TestSkipRotation(t *testing.T) {
	h := newHarness(t, hopts{seed: 95, qc: QPConfig{NumEVs: 8, ReservePerPlane: -1}})
	q := h.eng[0].qps[h.qp[0]]
	for i := range q.order {
		q.setState(q.order[i], EVSkip)
	}
	// Every EV is SKIP: picks never stall, and the weights share the
	// packets out (no EV is left out).
	used := map[int32]int{}
	for k := 0; k < 8*len(q.order); k++ {
		idx := q.pickEV(-1)
		if idx < 0 {
			t.Fatal("stalled with SKIP EVs available")
		}
		used[idx]++
	}
	if len(used) != len(q.order) {
		t.Errorf("all-SKIP set: used %d of %d EVs (%v)", len(used), len(q.order), used)
	}
	// Per-mark and per-ack factors are scaled to the set size (skipRefEVs):
	// 8 EVs move by skipDecrease^(4/8) per mark.
	if want := math.Pow(skipDecrease, skipRefEVs/float64(len(q.order))); q.skipCut != want || len(q.order) != 8 {
		t.Fatalf("%d EVs: cut factor %v, want %v", len(q.order), q.skipCut, want)
	}
	// A SKIP EV among GOOD ones carries about its weight's share (skipCut
	// after one mark, skipCut² after two) of what a GOOD EV carries.
	for i := range q.order {
		q.setState(q.order[i], EVGood)
	}
	skipped := q.order[(q.cur+1)%len(q.order)]
	q.srtt = 10 * Microsecond
	q.skipEV(skipped)
	q.e.now += q.srtt // marks within 5/4 RTT of a cut echo the same queue: no second cut
	q.skipEV(skipped)
	if w := q.evs[skipped].w; w != q.skipCut {
		t.Fatalf("two marks within an RTT: weight %v, want %v", w, q.skipCut)
	}
	q.e.now += q.srtt
	q.skipEV(skipped)
	const rounds = 64
	counts := map[int32]int{}
	for k := 0; k < rounds*len(q.order); k++ {
		idx := q.pickEV(-1)
		counts[idx]++
		if idx != skipped && q.evs[idx].state != EVGood {
			t.Fatalf("picked a %v EV", q.evs[idx].state)
		}
	}
	good := counts[q.order[0]]
	if q.order[0] == skipped {
		good = counts[q.order[1]]
	}
	w2 := q.skipCut * q.skipCut
	if got := float64(counts[skipped]); got < w2*float64(good)*3/4 || got > w2*float64(good)*5/4 {
		t.Errorf("SKIP EV at weight %.3f carried %v packets, a GOOD one %d", w2, got, good)
	}
	// Clean acknowledgements raise the weight back to 1: GOOD again.
	for k := 0; k < 64 && q.evs[skipped].state == EVSkip; k++ {
		q.unskip(skipped)
	}
	if q.evs[skipped].state != EVGood || q.evs[skipped].w != 1 {
		t.Errorf("SKIP EV not restored by clean ACKs: %v, weight %v", q.evs[skipped].state, q.evs[skipped].w)
	}
	checkTransitions(t, h.snap(0))
}
