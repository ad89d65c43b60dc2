package collective

import (
	"math/rand/v2"
	"testing"
)

func TestPartition(t *testing.T) {
	for _, c := range []struct {
		count, parts int
		want         []int
	}{
		{0, 3, []int{0, 0, 0}},
		{1, 4, []int{1, 0, 0, 0}},
		{3, 4, []int{1, 1, 1, 0}},
		{8, 4, []int{2, 2, 2, 2}},
		{10, 4, []int{3, 3, 2, 2}},
		{7, 1, []int{7}},
	} {
		rs := Partition(c.count, c.parts)
		off := 0
		for i, r := range rs {
			if r.Len != c.want[i] || r.Off != off {
				t.Errorf("Partition(%d, %d) = %v, want lengths %v", c.count, c.parts, rs, c.want)
				break
			}
			off = r.End()
		}
		if off != c.count {
			t.Errorf("Partition(%d, %d) covers %d", c.count, c.parts, off)
		}
	}
}

// Pieces tile their range exactly, in order, and each fits a slot.
func TestPieces(t *testing.T) {
	for _, c := range []struct{ len, slot, want int }{
		{0, 16, 1}, {1, 16, 1}, {16, 16, 1}, {17, 16, 2}, {1 << 20, 16384, 64}, {1<<20 + 1, 16384, 65},
	} {
		m := PiecesFor(c.len, c.slot)
		if m != c.want {
			t.Errorf("PiecesFor(%d, %d) = %d, want %d", c.len, c.slot, m, c.want)
		}
		r := Range{Off: 100, Len: c.len}
		off := r.Off
		for p := 0; p < m; p++ {
			pc := Piece(r, m, p)
			if pc.Off != off || pc.Len > c.slot || pc.Len < 0 {
				t.Fatalf("len %d slot %d: piece %d = %+v (expected offset %d, at most %d)", c.len, c.slot, p, pc, off, c.slot)
			}
			off = pc.End()
		}
		if off != r.End() {
			t.Errorf("len %d: pieces end at %d, want %d", c.len, off, r.End())
		}
	}
}

// value is rank k's element i: small integers, so every sum is exact.
func value(k, i int) float32 { return float32((i*7 + k*13) % 101) }

// The ring schedule, run for n ranks in memory with messages delivered in a
// random order (as several QPs per peer deliver them), gives every rank the
// exact sums, with exactly 2(n−1)·m messages each way.
func TestRingScheduleSums(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, c := range []struct{ n, count, slot int }{
		{2, 1, 4}, {2, 5, 2}, {3, 1, 4}, {3, 10, 3}, {4, 3, 8}, {4, 1000, 7}, {5, 97, 4}, {8, 1 << 12, 64}, {7, 0, 4},
	} {
		plans := make([]ringPlan, c.n)
		buf := make([][]float32, c.n)
		type inflight struct {
			to, seq int
			data    []float32
		}
		var net []inflight
		sent, got := make([]int, c.n), make([]int, c.n)
		send := func(r, seq int) {
			rg := plans[r].sendRange(seq)
			net = append(net, inflight{(r + 1) % c.n, seq, append([]float32(nil), buf[r][rg.Off:rg.End()]...)})
			sent[r]++
		}
		for r := range plans {
			plans[r] = newRingPlan(r, c.n, c.count, c.slot)
			buf[r] = make([]float32, c.count)
			for i := range buf[r] {
				buf[r][i] = value(r, i)
			}
		}
		for r := range plans {
			for p := 0; p < plans[r].m; p++ {
				send(r, p)
			}
		}
		for len(net) > 0 {
			k := rng.IntN(len(net))
			msg := net[k]
			net[k] = net[len(net)-1]
			net = net[:len(net)-1]
			pl := plans[msg.to]
			rg, reduce := pl.recvRange(msg.seq)
			if len(msg.data) != rg.Len {
				t.Fatalf("n=%d count=%d: message %d carries %d elements, receiver expects %d", c.n, c.count, msg.seq, len(msg.data), rg.Len)
			}
			dst := buf[msg.to][rg.Off:rg.End()]
			for i, v := range msg.data {
				if reduce {
					dst[i] += v
				} else {
					dst[i] = v
				}
			}
			got[msg.to]++
			if nx := pl.next(msg.seq); nx >= 0 {
				send(msg.to, nx)
			}
		}
		for r := range plans {
			if sent[r] != plans[r].messages() || got[r] != plans[r].messages() {
				t.Errorf("n=%d count=%d: rank %d sent %d, got %d, want %d each", c.n, c.count, r, sent[r], got[r], plans[r].messages())
			}
			for i, v := range buf[r] {
				var want float32
				for k := 0; k < c.n; k++ {
					want += value(k, i)
				}
				if v != want {
					t.Fatalf("n=%d count=%d slot=%d: rank %d element %d = %v, want %v", c.n, c.count, c.slot, r, i, v, want)
				}
			}
		}
	}
}

// The all-to-all plan's pieces tile every block exactly.
func TestAllToAllPlanTiles(t *testing.T) {
	for _, c := range []struct{ n, block, slot int }{{2, 0, 4}, {2, 1, 4}, {4, 9, 4}, {3, 4096, 1024}} {
		p := newA2APlan(1, c.n, c.block, c.slot)
		for peer := 0; peer < c.n; peer++ {
			off := peer * c.block
			for s := 0; s < p.m; s++ {
				pc := p.piece(peer, s)
				if pc.Off != off || pc.Len > c.slot {
					t.Fatalf("%+v: peer %d piece %d = %+v", c, peer, s, pc)
				}
				off = pc.End()
			}
			if off != (peer+1)*c.block {
				t.Fatalf("%+v: peer %d pieces end at %d", c, peer, off)
			}
		}
	}
}

// auto runs direct up to DirectMax bytes, the ring above; ring and direct
// are kept whatever the size.
func TestAllReduceAlgo(t *testing.T) {
	for _, c := range []struct {
		algo  Algo
		max   int
		count int
		want  Algo
	}{
		{AlgoAuto, 0, 1, AlgoDirect},
		{AlgoAuto, 0, DefaultDirectMax / 4, AlgoDirect},
		{AlgoAuto, 0, DefaultDirectMax/4 + 1, AlgoRing},
		{AlgoAuto, 100, 25, AlgoDirect},
		{AlgoAuto, 100, 26, AlgoRing},
		{AlgoRing, 0, 1, AlgoRing},
		{AlgoDirect, 0, 1 << 24, AlgoDirect},
	} {
		cfg := Config{AllReduce: c.algo, DirectMax: c.max}
		if err := cfg.defaults(); err != nil {
			t.Fatal(err)
		}
		if got := (&Comm{cfg: cfg}).AllReduceAlgo(c.count); got != c.want {
			t.Errorf("%v, limit %d B, %d elements: %v, want %v", c.algo, c.max, c.count, got, c.want)
		}
	}
	for _, s := range []string{"auto", "ring", "direct"} {
		if a, err := ParseAlgo(s); err != nil || a.String() != s {
			t.Errorf("ParseAlgo(%q) = %v, %v", s, a, err)
		}
	}
	if _, err := ParseAlgo("tree"); err == nil {
		t.Error("ParseAlgo(tree) accepted")
	}
}

// The direct plan's pieces tile the buffer and each fits a slot; summing
// them in rank order gives the exact sums.
func TestDirectPlan(t *testing.T) {
	for _, c := range []struct{ count, slot int }{{0, 16}, {1, 16}, {16, 16}, {17, 16}, {1000, 7}} {
		p := newDirectPlan(c.count, c.slot)
		bufs := make([][]float32, 3)
		for k := range bufs {
			bufs[k] = make([]float32, c.count)
			for i := range bufs[k] {
				bufs[k][i] = value(k, i)
			}
		}
		out := make([]float32, c.count)
		next := 0
		for seq := 0; seq < p.m; seq++ {
			r := p.piece(seq)
			if r.Off != next || r.Len > c.slot {
				t.Fatalf("%+v: piece %d is %+v after %d", c, seq, r, next)
			}
			next = r.End()
			sumInRankOrder(out, bufs, r)
		}
		if next != c.count {
			t.Fatalf("%+v: pieces end at %d", c, next)
		}
		for i, v := range out {
			if want := value(0, i) + value(1, i) + value(2, i); v != want {
				t.Fatalf("%+v: element %d = %v, want %v", c, i, v, want)
			}
		}
	}
}
