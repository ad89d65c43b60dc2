package collective

import (
	"context"
	"fmt"
	"strings"
)

// Algo is an all-reduce algorithm.
type Algo int

const (
	// AlgoAuto is AlgoDirect for buffers of at most Config.DirectMax
	// bytes and AlgoRing above.
	AlgoAuto Algo = iota
	// AlgoRing is reduce-scatter then all-gather around a ring: 2(n−1)/n
	// of the buffer sent per rank, in 2(n−1) dependent steps. Its
	// bandwidth is the best; its latency grows with the group.
	AlgoRing
	// AlgoDirect sends the whole buffer to every peer and every rank sums
	// all n buffers itself: n−1 buffers sent per rank, in one step. Small
	// buffers are bound by latency, not by bandwidth, and one step
	// instead of 2(n−1) is what they need (docs/collectives.md).
	AlgoDirect
)

var algoNames = [...]string{AlgoAuto: "auto", AlgoRing: "ring", AlgoDirect: "direct"}

func (a Algo) String() string {
	if a >= 0 && int(a) < len(algoNames) {
		return algoNames[a]
	}
	return fmt.Sprintf("Algo(%d)", int(a))
}

// ParseAlgo reads auto, ring or direct.
func ParseAlgo(s string) (Algo, error) {
	for a, name := range algoNames {
		if s == name {
			return Algo(a), nil
		}
	}
	return 0, fmt.Errorf("unknown all-reduce algorithm %q: want %s", s, strings.Join(algoNames[:], ", "))
}

// DefaultDirectMax is AlgoAuto's largest direct all-reduce, in bytes per
// rank. Measured on clos-2p with 4 ranks (docs/collectives.md, "Small
// all-reduces"): direct took about half the ring's time up to 4 KiB and
// 0.65–0.85 of it at 32 KiB; from 48 KiB, where each rank sends 1.5 times
// what the ring sends, the ring was as fast or faster.
const DefaultDirectMax = 32 << 10

// AllReduceAlgo is the algorithm an all-reduce of count elements runs
// (AlgoRing or AlgoDirect). Every rank computes the same from the same
// Config and count.
func (c *Comm) AllReduceAlgo(count int) Algo {
	switch c.cfg.AllReduce {
	case AlgoRing, AlgoDirect:
		return c.cfg.AllReduce
	}
	if count*4 <= c.cfg.DirectMax {
		return AlgoDirect
	}
	return AlgoRing
}

// directPlan is one rank's schedule of a direct all-reduce, pure: the count
// elements are cut into m pieces that fit a slot, and message seq to (and
// from) every peer is piece seq of the whole buffer.
type directPlan struct {
	count, m int
}

func newDirectPlan(count, slotElems int) directPlan {
	return directPlan{count: count, m: PiecesFor(count, slotElems)}
}

func (p directPlan) piece(seq int) Range { return Piece(Range{0, p.count}, p.m, seq) }

// sumInRankOrder sets out to bufs[0] + bufs[1] + … + bufs[n−1] over r, added
// in that order: every rank computes the same float32 sums bit for bit, as
// the ring's all-gather gives every rank the same reduced chunks.
func sumInRankOrder(out []float32, bufs [][]float32, r Range) {
	dst := out[r.Off:r.End()]
	copy(dst, bufs[0][r.Off:r.End()])
	for _, b := range bufs[1:] {
		src := b[r.Off:r.End()]
		for i, v := range src {
			dst[i] += v
		}
	}
}

// allReduceDirect runs the direct all-reduce of recv, which holds this
// rank's contribution.
func (c *Comm) allReduceDirect(ctx context.Context, recv []float32) error {
	n, count := c.size, len(recv)
	p := newDirectPlan(count, c.cfg.SlotSize/4)
	// Every rank's contribution side by side, this rank's too: the sums
	// are taken in rank order, and what this rank sends must not change
	// when its pieces are reduced in place.
	if cap(c.gather) < n*count {
		c.gather = make([]float32, n*count)
	}
	g := c.gather[:n*count]
	bufs := make([][]float32, n)
	for k := range bufs {
		bufs[k] = g[k*count : (k+1)*count]
	}
	copy(bufs[c.rank], recv)
	arrived := make([]int, p.m)
	o := &op{
		name: "all-reduce (direct)",
		want: (n - 1) * p.m,
		src: func(_, seq int) []float32 {
			r := p.piece(seq)
			return bufs[c.rank][r.Off:r.End()]
		},
		recvLen: func(_, seq int) int {
			if seq >= p.m {
				return -1
			}
			return p.piece(seq).Len
		},
		deliver: func(peer, seq int, data []float32) (int, int, bool, error) {
			if seq >= p.m || arrived[seq] == n-1 {
				return 0, 0, false, fmt.Errorf("direct all-reduce message %d from rank %d: %d messages per peer (ranks run different operations or counts?)", seq, peer, p.m)
			}
			r := p.piece(seq)
			copy(bufs[peer][r.Off:r.End()], data)
			if arrived[seq]++; arrived[seq] == n-1 {
				sumInRankOrder(recv, bufs, r)
			}
			return 0, 0, false, nil
		},
	}
	return c.run(ctx, o, c.toEveryPeer(p.m))
}
