package mrc

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/softmrc/softmrc/internal/pathtmpl"
	"github.com/softmrc/softmrc/internal/wire"
)

// The stateful engine fuzzer: each input is a program of operations (post
// writes on either side, let time pass, deliver, drop, duplicate, reorder,
// corrupt, trim or CE-mark frames in flight, take ports down and up,
// destroy a QP) against a live pair of engines, followed by a lossless
// settle phase. Invariants, checked after every operation and at the end:
//   - nothing is written outside a registered region, and nothing into a
//     source region (canary guards around every buffer);
//   - every posted WR completes exactly once, by the end of the settle
//     phase (OK, an error, or flushed), and no completion names an unknown
//     WR;
//   - no WR to an invalid address completes OK, the data of every WR that
//     completed OK is at its destination, and the immediates arrive in
//     posting order (these three only when no frame was corrupted: a
//     corrupted frame with a fixed-up ICRC may legally carry other bytes,
//     or another rkey, to a valid address, or acknowledge what never
//     arrived);
//   - no panic.
//
// The pair is built once per fuzz worker (templates, buffers, memory
// tables); an input costs two engine constructions and a Connect with a
// small QP (8 EVs, a 128-packet window). BenchmarkFuzzStateful measures
// the inputs per second.

const (
	fzSlots   = 16       // WRs per side and input (= SendQueue)
	fzSlotLen = 8 << 10  // bytes per destination slot
	fzSrcLen  = 64 << 10 // source region per side
	fzDstBase = 0x4000_0000
	fzSrcBase = 0x1000_0000
	fzSrcKey  = 0x11
	fzDstKey  = 0x22
	fzMaxOps  = 256
	fzSettle  = 20 * Millisecond // simulated time the lossless settle phase may take (10 RetryTimeouts)
	// A RoCE requester whose responder went to ERROR (its own write drew
	// a remote access NAK) fails only when its transport timer has fired
	// RetryLimit+1 times (IBTA retry_cnt; RetryTimeout does not apply to
	// RoCE), each after up to MaxRTO: seed 195 of the fuzzer needed 24.7 ms.
	fzSettleRoCE = fzSettle + (defaultRetryLimit+1)*defaultMaxRTO
	fzMaxSteps   = 20000 // event steps of the settle phase
)

type fzWR struct {
	side   int
	id     uint64
	slot   int
	src    []byte
	imm    bool
	immVal uint32
	valid  bool // inside the destination region with a valid rkey
	done   int  // completions seen
	status Status
}

type fzFrame struct {
	port wire.Plane
	b    []byte
}

// fuzzPair is the reusable part of the harness.
type fuzzPair struct {
	tmpl  [2]*pathtmpl.Template
	src   [2]*guarded // source regions (local read): must never change
	dst   [2]*guarded // destination regions (remote write)
	leg   [2]*guarded // FuzzHandlePacket's region (rkey 0x77 at 0x5000)
	srcOK [2][]byte   // pristine copy of the source bytes
	free  [][]byte

	eng  [2]*Engine
	mem  [2]*MemTable
	qp   [2]wire.QPN
	now  Time
	net  [2][]fzFrame // in flight toward side i
	wrs  []fzWR
	imms [2][]uint32 // immediates posted toward side i, in order
	got  [2]int      // immediates delivered at side i
	cq   []Completion
	emit [2]func(wire.Plane, []byte)

	corrupted bool
	destroyed [2]bool
	settleFor Time // fzSettle, or fzSettleRoCE
	t         testing.TB
}

func newFuzzPair() *fuzzPair {
	f := &fuzzPair{cq: make([]Completion, 64)}
	for i := 0; i < 2; i++ {
		f.tmpl[i] = testTemplate(i)
		f.src[i] = newGuardBuf(fzSrcLen)
		f.dst[i] = newGuardBuf(fzSlots * fzSlotLen)
		f.leg[i] = newGuardBuf(1000)
		r := rand.New(rand.NewPCG(uint64(i), 77))
		for j := range f.src[i].region {
			f.src[i].region[j] = byte(r.Uint32())
		}
		f.srcOK[i] = append([]byte(nil), f.src[i].region...)
		side := i
		f.emit[i] = func(port wire.Plane, frame []byte) {
			var b []byte
			if n := len(f.free); n > 0 {
				b, f.free = f.free[n-1][:0], f.free[:n-1]
			}
			f.net[1-side] = append(f.net[1-side], fzFrame{port, append(b, frame...)})
		}
	}
	return f
}

func newGuardBuf(n int) *guarded {
	g := &guarded{all: make([]byte, n+2*guardLen)}
	for i := range g.all {
		g.all[i] = 0xAA
	}
	g.region = g.all[guardLen : guardLen+n : guardLen+n]
	return g
}

var guardPattern = bytes.Repeat([]byte{0xAA}, guardLen)

func (g *guarded) check() error {
	if !bytes.Equal(g.all[:guardLen], guardPattern) || !bytes.Equal(g.all[len(g.all)-guardLen:], guardPattern) {
		return fmt.Errorf("write outside a registered region (a guard byte changed)")
	}
	return nil
}

// reset starts a fresh pair of engines with one connected QP each.
func (f *fuzzPair) reset(t testing.TB, seed uint64) {
	f.t, f.now, f.corrupted = t, 0, false
	f.destroyed = [2]bool{}
	f.wrs = f.wrs[:0]
	for i := 0; i < 2; i++ {
		for _, fr := range f.net[i] {
			f.free = append(f.free, fr.b)
		}
		f.net[i] = f.net[i][:0]
		f.imms[i] = f.imms[i][:0]
		f.got[i] = 0
		clear(f.dst[i].region)
		clear(f.leg[i].region)
		f.mem[i] = NewMemTable()
		f.mem[i].Register(fzSrcKey, fzSrcBase, f.src[i].region, AccessLocalRead)
		f.mem[i].Register(fzDstKey, fzDstBase, f.dst[i].region, AccessRemoteWrite)
		f.mem[i].Register(0x77, 0x5000, f.leg[i].region, AccessRemoteWrite)
		cfg := Config{Planes: testPlanes, Addrs: hostAddrs(i), Template: f.tmpl[i], MTU: 1024, CtrlQueue: 64}
		e, err := New(cfg, f.mem[i], rand.New(rand.NewPCG(seed, uint64(i))))
		if err != nil {
			t.Fatal(err)
		}
		f.eng[i] = e
	}
	// Mostly MRC; a quarter of the seeds go-back-N, a quarter RoCE.
	tr := [...]Transport{MRC, MRC, GoBackN, RoCE}[seed%4]
	f.settleFor = fzSettle
	if tr == RoCE {
		f.settleFor = fzSettleRoCE
	}
	qc := QPConfig{Transport: tr, NumEVs: 8, ReservePerPlane: 1, Window: 128, SendQueue: fzSlots, MaxWImm: 4,
		RetryTimeout: 2 * Millisecond, NoEVTimeout: Millisecond, ProbeInterval: 50 * Microsecond}
	var info [2]QPInfo
	for i := 0; i < 2; i++ {
		q, err := f.eng[i].CreateQP(qc)
		if err != nil {
			t.Fatal(err)
		}
		f.qp[i] = q
		info[i], _ = f.eng[i].Info(q)
	}
	for i := 0; i < 2; i++ {
		if err := f.eng[i].Connect(f.qp[i], info[1-i]); err != nil {
			t.Fatal(err)
		}
	}
}

// poll lets both engines emit what is due now.
func (f *fuzzPair) poll() {
	for i := 0; i < 2; i++ {
		f.eng[i].Poll(f.now, f.emit[i])
		_ = f.eng[i].NextDeadline()
	}
}

// deliver hands frame k of the flight toward side to it and removes it.
func (f *fuzzPair) deliver(side, k int) {
	fr := f.net[side][k]
	f.net[side] = append(f.net[side][:k], f.net[side][k+1:]...)
	f.eng[side].HandlePacket(f.now, fr.port, fr.b)
	f.free = append(f.free, fr.b)
}

func (f *fuzzPair) post(side int, a, b, c byte) {
	n := 0
	for _, w := range f.wrs {
		if w.side == side {
			n++
		}
	}
	if n >= fzSlots {
		return
	}
	length := (int(a)<<8 | int(b)) % (fzSlotLen + 1)
	off := int(c) * 97 % (fzSrcLen - length + 1)
	w := fzWR{side: side, id: uint64(len(f.wrs))<<8 | uint64(side), slot: n,
		src: f.srcOK[side][off : off+length], imm: c&1 != 0, immVal: uint32(a)<<16 | uint32(c), valid: true}
	va := uint64(fzDstBase + n*fzSlotLen)
	rkey := uint32(fzDstKey)
	switch {
	case c%16 == 15 && length >= 2: // straddles the end of the destination region
		va = fzDstBase + fzSlots*fzSlotLen - uint64(length)/2
		w.valid = false
	case c%16 == 14: // an rkey nobody registered (IBTA lets a zero-length write pass)
		rkey = 0x404
		w.valid = length == 0
	}
	wr := WR{ID: w.id, Op: OpWrite, LKey: fzSrcKey, Addr: fzSrcBase + uint64(off), Len: uint32(length), RemoteVA: va, RKey: rkey}
	if w.imm {
		wr.Op, wr.Imm = OpWriteImm, w.immVal
	}
	if err := f.eng[side].PostWrite(f.qp[side], wr); err != nil {
		return // queue full, WriteImm cap, QP in error: refused, never completes
	}
	if w.imm {
		f.imms[1-side] = append(f.imms[1-side], w.immVal)
	}
	f.wrs = append(f.wrs, w)
}

// drain takes every completion out of both CQs and checks it.
func (f *fuzzPair) drain() error {
	for side := 0; side < 2; side++ {
		for {
			n := f.eng[side].PollCQ(f.cq)
			if n == 0 {
				break
			}
			for _, c := range f.cq[:n] {
				switch c.Kind {
				case CompSend:
					k := int(c.WRID >> 8)
					if k >= len(f.wrs) || f.wrs[k].side != side || f.wrs[k].id != c.WRID {
						return fmt.Errorf("side %d: completion for unknown WR %#x", side, c.WRID)
					}
					w := &f.wrs[k]
					w.done++
					w.status = c.Status
					if w.done > 1 {
						return fmt.Errorf("side %d: WR %#x completed %d times", side, c.WRID, w.done)
					}
					if c.Status == StatusOK && !w.valid && !f.corrupted {
						return fmt.Errorf("side %d: WR %#x to an invalid address completed OK", side, c.WRID)
					}
				case CompRecvImm:
					if !f.corrupted {
						if f.got[side] >= len(f.imms[side]) {
							return fmt.Errorf("side %d: immediate %#x delivered, but only %d were posted", side, c.Imm, len(f.imms[side]))
						}
						if want := f.imms[side][f.got[side]]; c.Imm != want {
							return fmt.Errorf("side %d: immediate #%d is %#x, want %#x (order)", side, f.got[side], c.Imm, want)
						}
					}
					f.got[side]++
				}
			}
		}
	}
	return nil
}

func (f *fuzzPair) guards() error {
	for i := 0; i < 2; i++ {
		if err := f.dst[i].check(); err != nil {
			return fmt.Errorf("side %d destination: %w", i, err)
		}
		if err := f.leg[i].check(); err != nil {
			return fmt.Errorf("side %d: %w", i, err)
		}
		if err := f.src[i].check(); err != nil {
			return fmt.Errorf("side %d source: %w", i, err)
		}
		if !bytes.Equal(f.src[i].region, f.srcOK[i]) {
			return fmt.Errorf("side %d: a source region was written", i)
		}
	}
	return nil
}

// internal checks the engines' own bookkeeping: the rotation slots agree
// with the EVs' slot counts, the held-packet count with the flags, the
// probe records in use with nProbes and probeHi, and each destination's
// inflight bytes with the packets marked in flight.
func (f *fuzzPair) internal() error {
	for side, e := range f.eng {
		inflight := map[*peer]int{}
		for _, q := range e.qpList {
			seen := make([]int32, len(q.evs))
			for s, idx := range q.order {
				x := &q.evs[idx]
				if !x.active || x.slots <= 0 {
					return fmt.Errorf("side %d: slot %d holds EV %d, which is not active (slots %d)", side, s, idx, x.slots)
				}
				seen[idx]++
			}
			for i := range q.evs {
				if x := &q.evs[i]; seen[i] != x.slots || x.active != (x.slots > 0) {
					return fmt.Errorf("side %d: EV %d holds %d slots, counts %d (active %v)", side, i, seen[i], x.slots, x.active)
				}
			}
			held := 0
			for psn := q.sndUna; psn.Before(q.sndNxt); psn = psn.Add(1) {
				pk := q.slot(psn)
				if pk.flags&pktHeld != 0 {
					held++
				}
				if pk.flags&pktInFlight != 0 {
					inflight[q.peer] += int(pk.n)
				}
			}
			if held != q.nHeld {
				return fmt.Errorf("side %d: %d packets held, nHeld %d", side, held, q.nHeld)
			}
			used := 0
			for i := range q.probes {
				if q.probes[i].used {
					used++
					if i >= q.probeHi {
						return fmt.Errorf("side %d: probe record %d in use above probeHi %d: the scans miss it", side, i, q.probeHi)
					}
				}
			}
			if used != q.nProbes {
				return fmt.Errorf("side %d: %d probe records in use, nProbes %d", side, used, q.nProbes)
			}
		}
		for _, p := range e.peers {
			if p.cc.inflight != inflight[p] {
				return fmt.Errorf("side %d: destination inflight %d bytes, packets in flight %d bytes", side, p.cc.inflight, inflight[p])
			}
		}
	}
	return nil
}

// step runs one operation of the program; it returns the bytes used.
func (f *fuzzPair) step(p []byte) int {
	op := p[0]
	arg := func(i int) byte {
		if i < len(p) {
			return p[i]
		}
		return 0
	}
	side := int(op>>4) & 1
	q := f.net[side]
	switch op & 15 {
	case 0, 1: // post a write
		f.post(side, arg(1), arg(2), arg(3))
		return 4
	case 2, 3: // time passes: 0..255 × 100 ns, then both engines poll
		f.now += Time(arg(1)) * 100
		f.poll()
		return 2
	case 4, 5: // deliver the k-th frame in flight
		if len(q) > 0 {
			f.deliver(side, int(arg(1))%len(q))
		}
		return 2
	case 6: // drop the k-th frame
		if len(q) > 0 {
			k := int(arg(1)) % len(q)
			f.free = append(f.free, q[k].b)
			f.net[side] = append(q[:k], q[k+1:]...)
		}
		return 2
	case 7: // deliver a copy of the k-th frame (a duplicate)
		if len(q) > 0 {
			fr := q[int(arg(1))%len(q)]
			f.eng[side].HandlePacket(f.now, fr.port, fr.b)
		}
		return 2
	case 8: // swap two frames (reordering)
		if len(q) > 1 {
			i, j := int(arg(1))%len(q), int(arg(2))%len(q)
			q[i], q[j] = q[j], q[i]
		}
		return 3
	case 9: // corrupt a byte (ICRC fixed up half of the time)
		if len(q) > 0 {
			fr := q[int(arg(1))%len(q)]
			i := int(arg(2)) * 7 % len(fr.b)
			fr.b[i] ^= arg(3) | 1
			if arg(3)&0x80 != 0 {
				fixICRC(fr.b)
			}
			f.corrupted = true
		}
		return 4
	case 10: // trim a data frame (a switch cut its payload)
		if len(q) > 0 {
			k := int(arg(1)) % len(q)
			if n, ok := wire.Trim(q[k].b, arg(1)&0x80 != 0); ok {
				q[k].b = q[k].b[:n]
			}
		}
		return 2
	case 11: // CE-mark a frame
		if len(q) > 0 {
			b := q[int(arg(1))%len(q)].b
			if len(b) > wire.EthLen+wire.IPv6Len {
				wire.IPv6(b[wire.EthLen:]).SetECN(wire.ECNCE)
			}
		}
		return 2
	case 12: // a port goes down or up
		f.eng[side].SetPortState(f.now, wire.Plane(arg(1)%testPlanes), arg(1)&0x80 != 0)
		return 2
	case 13: // deliver everything in flight toward side, in order
		for len(f.net[side]) > 0 {
			f.deliver(side, 0)
		}
		return 1
	case 14: // the next deadline arrives
		d := min(f.eng[0].NextDeadline(), f.eng[1].NextDeadline())
		if d != Never && d > f.now && d-f.now < 100*Millisecond {
			f.now = d
		}
		f.poll()
		return 1
	default: // destroy a QP (rarely: only with the high bit of the argument)
		if arg(1) == 0xFF && !f.destroyed[side] {
			f.destroyed[side] = true
			if err := f.eng[side].DestroyQP(f.qp[side]); err != nil {
				f.t.Fatal(err)
			}
		}
		return 2
	}
}

// settle brings every port up and runs a lossless network until every WR
// has completed or the bounds pass.
func (f *fuzzPair) settle() error {
	for i := 0; i < 2; i++ {
		for p := 0; p < testPlanes; p++ {
			f.eng[i].SetPortState(f.now, wire.Plane(p), true)
		}
	}
	limit := f.now + f.settleFor
	pending := func() (int, error) {
		if err := f.drain(); err != nil {
			return 0, err
		}
		n := 0
		for _, w := range f.wrs {
			if w.done == 0 {
				n++
			}
		}
		return n, nil
	}
	for steps := 0; steps < fzMaxSteps; steps++ {
		if n, err := pending(); n == 0 || err != nil {
			return err
		}
		for i := 0; i < 2; i++ {
			for len(f.net[i]) > 0 {
				f.deliver(i, 0)
			}
		}
		f.poll()
		if len(f.net[0])+len(f.net[1]) > 0 {
			continue
		}
		pending, err := pending()
		if pending == 0 || err != nil {
			return err
		}
		d := min(f.eng[0].NextDeadline(), f.eng[1].NextDeadline())
		if d == Never || d > limit {
			return fmt.Errorf("%d WRs never completed (no deadline before %v ms; steps %d)", pending, limit/Millisecond, steps)
		}
		f.now = max(f.now+1, d)
	}
	return fmt.Errorf("settle phase did not finish in %d steps", fzMaxSteps)
}

// run executes one program and checks the invariants.
func (f *fuzzPair) run(t testing.TB, seed uint64, prog []byte) error {
	f.reset(t, seed)
	for i, ops := 0, 0; i < len(prog) && ops < fzMaxOps; ops++ {
		i += f.step(prog[i:])
		if err := f.drain(); err != nil {
			return err
		}
		if err := f.internal(); err != nil {
			return err
		}
	}
	// A stray write stays in the guards: checking them once at the end
	// finds it as surely as after every operation.
	if err := f.settle(); err != nil {
		return err
	}
	if err := f.internal(); err != nil {
		return err
	}
	if err := f.guards(); err != nil {
		return err
	}
	if f.corrupted {
		return nil
	}
	for _, w := range f.wrs {
		if w.status != StatusOK {
			continue
		}
		got := f.dst[1-w.side].region[w.slot*fzSlotLen : w.slot*fzSlotLen+len(w.src)]
		if !bytes.Equal(got, w.src) {
			return fmt.Errorf("side %d WR %#x completed OK but its %d bytes differ at the destination", w.side, w.id, len(w.src))
		}
	}
	return nil
}

var fzPair *fuzzPair // one per fuzz worker process

// fuzzSeeds are programs that exercise the paths the invariants are about.
var fuzzSeeds = [][]byte{
	{0x00, 0x10, 0x00, 0x01, 0x02, 0x40},                                           // post, time
	{0x00, 0x20, 0x00, 0x02, 0x01, 0x04, 0x01, 0x02, 0x50, 0x0D, 0x02, 0x50},       // post imm; time; deliver
	{0x00, 0x30, 0x00, 0x03, 0x02, 0x20, 0x06, 0x00, 0x02, 0xFF, 0x0D, 0x1D},       // drop the first frame
	{0x00, 0x3F, 0x00, 0x05, 0x02, 0x20, 0x08, 0x00, 0x03, 0x07, 0x01, 0x0D},       // reorder, duplicate
	{0x00, 0x10, 0x00, 0x0F, 0x02, 0x20, 0x0D, 0x12, 0x80, 0x1D},                   // bad VA: remote access error
	{0x00, 0x10, 0x00, 0x0E, 0x02, 0x20, 0x0D, 0x1D},                               // bad rkey
	{0x00, 0x20, 0x00, 0x01, 0x0C, 0x01, 0x02, 0x20, 0x1C, 0x02, 0x0D, 0x1C, 0x81}, // port down/up
	{0x00, 0x20, 0x00, 0x01, 0x02, 0x20, 0x0A, 0x00, 0x0B, 0x01, 0x0D, 0x1D},       // trim, CE
	{0x00, 0x20, 0x00, 0x01, 0x02, 0x20, 0x09, 0x00, 0x05, 0x80, 0x0D},             // corrupt, ICRC fixed
	{0x00, 0x20, 0x00, 0x01, 0x01, 0x20, 0x00, 0x03, 0x02, 0x08, 0x0F, 0xFF},       // destroy mid transfer
	{0x00, 0xFF, 0x00, 0x01, 0x10, 0x40, 0x00, 0x03, 0x0E, 0x0E, 0x0E, 0x04, 0x14}, // both sides, deadlines
}

func FuzzEngineStateful(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add(uint64(1), s)
	}
	f.Fuzz(func(t *testing.T, seed uint64, prog []byte) {
		if fzPair == nil {
			fzPair = newFuzzPair()
		}
		if err := fzPair.run(t, seed, prog); err != nil {
			t.Fatalf("seed %d program %x: %v", seed, prog, err)
		}
	})
}

// TestFuzzSeedsStateful runs the seed programs (also in -short runs) so a
// regression in what they cover fails the ordinary test suite.
func TestFuzzSeedsStateful(t *testing.T) {
	fp := newFuzzPair()
	for i, s := range fuzzSeeds {
		if err := fp.run(t, uint64(i), s); err != nil {
			t.Fatalf("seed program %d (%x): %v", i, s, err)
		}
	}
}

// BenchmarkFuzzStateful is the fuzzer's cost per input (inputs/s =
// 1e9 / ns/op), over random programs of 64 bytes.
func BenchmarkFuzzStateful(b *testing.B) {
	fp := newFuzzPair()
	r := rand.New(rand.NewPCG(1, 2))
	progs := make([][]byte, 64)
	for i := range progs {
		progs[i] = make([]byte, 64)
		for j := range progs[i] {
			progs[i][j] = byte(r.Uint32())
		}
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := fp.run(b, uint64(i), progs[i%len(progs)]); err != nil {
			b.Fatal(err)
		}
	}
}
