package collective

import (
	"context"
	"fmt"
	"unsafe"
)

// sameOrDisjoint says whether a and b are the same buffer (in place) and
// fails when they overlap otherwise.
func sameOrDisjoint(a, b []float32) (bool, error) {
	if len(a) == 0 || len(b) == 0 {
		return false, nil
	}
	pa, pb := uintptr(unsafe.Pointer(&a[0])), uintptr(unsafe.Pointer(&b[0]))
	if pa == pb {
		return true, nil
	}
	if pa < pb+uintptr(len(b))*4 && pb < pa+uintptr(len(a))*4 {
		return false, fmt.Errorf("collective: send and receive buffers overlap without being the same: pass the same slice for in place")
	}
	return false, nil
}

// AllReduce sums send over every rank into recv (float32, elementwise),
// with Config.AllReduce's algorithm: a ring (reduce-scatter then
// all-gather, 2(n−1)/n of the buffer sent and received per rank) or, for
// small buffers, direct (the buffer to every peer, one step). Every rank
// gets the same sums bit for bit. send and recv have the same length on
// every rank; they may be the same slice (in place).
func (c *Comm) AllReduce(ctx context.Context, send, recv []float32) error {
	if len(send) != len(recv) {
		return fmt.Errorf("collective: all-reduce of %d elements into %d", len(send), len(recv))
	}
	if _, err := sameOrDisjoint(send, recv); err != nil {
		return err
	}
	copy(recv, send) // no-op in place
	if c.size == 1 {
		return nil
	}
	if c.AllReduceAlgo(len(recv)) == AlgoDirect {
		return c.allReduceDirect(ctx, recv)
	}
	p := newRingPlan(c.rank, c.size, len(recv), c.cfg.SlotSize/4)
	right, left := (c.rank+1)%c.size, (c.rank+c.size-1)%c.size
	o := &op{
		name: "all-reduce",
		want: p.messages(),
		src: func(_, seq int) []float32 {
			r := p.sendRange(seq)
			return recv[r.Off:r.End()]
		},
		recvLen: func(_, seq int) int {
			if seq >= p.messages() {
				return -1
			}
			r, _ := p.recvRange(seq)
			return r.Len
		},
		deliver: func(peer, seq int, data []float32) (int, int, bool, error) {
			if peer != left || seq >= p.messages() {
				return 0, 0, false, fmt.Errorf("all-reduce message %d from rank %d: only rank %d sends, %d messages (ranks run different operations?)", seq, peer, left, p.messages())
			}
			r, reduce := p.recvRange(seq)
			dst := recv[r.Off:r.End()]
			if reduce {
				for i, v := range data {
					dst[i] += v
				}
			} else {
				copy(dst, data)
			}
			next := p.next(seq)
			return right, next, next >= 0, nil
		},
	}
	first := make([]int, p.m)
	for i := range first {
		first[i] = i
	}
	return c.run(ctx, o, map[int][]int{right: first})
}

// AllToAll sends block j of send (len(send)/n elements) to rank j, which
// puts it in block r of its recv (r this rank). send and recv have the same
// length, a multiple of the group size; they may be the same slice (in
// place: send is copied first).
func (c *Comm) AllToAll(ctx context.Context, send, recv []float32) error {
	if len(send) != len(recv) || len(send)%c.size != 0 {
		return fmt.Errorf("collective: all-to-all of %d elements into %d: want equal lengths, a multiple of %d ranks", len(send), len(recv), c.size)
	}
	inPlace, err := sameOrDisjoint(send, recv)
	if err != nil {
		return err
	}
	if inPlace {
		c.tmp = append(c.tmp[:0], send...)
		send = c.tmp
	}
	p := newA2APlan(c.rank, c.size, len(send)/c.size, c.cfg.SlotSize/4)
	own := p.block(c.rank)
	copy(recv[own.Off:own.End()], send[own.Off:own.End()])
	if c.size == 1 || p.b == 0 {
		return nil
	}
	o := &op{
		name: "all-to-all",
		want: (c.size - 1) * p.m,
		src: func(peer, seq int) []float32 {
			r := p.piece(peer, seq)
			return send[r.Off:r.End()]
		},
		recvLen: func(peer, seq int) int {
			if seq >= p.m {
				return -1
			}
			return p.piece(peer, seq).Len
		},
		deliver: func(peer, seq int, data []float32) (int, int, bool, error) {
			if seq >= p.m {
				return 0, 0, false, fmt.Errorf("all-to-all message %d from rank %d: %d messages per peer (ranks run different operations?)", seq, peer, p.m)
			}
			r := p.piece(peer, seq)
			copy(recv[r.Off:r.End()], data)
			return 0, 0, false, nil
		},
	}
	return c.run(ctx, o, c.toEveryPeer(p.m))
}

// toEveryPeer is the initial sends of an operation whose m messages to
// every peer are all ready at the start (all-to-all, direct all-reduce).
func (c *Comm) toEveryPeer(m int) map[int][]int {
	initial := map[int][]int{}
	for k := 1; k < c.size; k++ {
		// Rank r starts with r+1, r+2, …: no peer is everyone's first.
		seqs := make([]int, m)
		for i := range seqs {
			seqs[i] = i
		}
		initial[(c.rank+k)%c.size] = seqs
	}
	return initial
}
