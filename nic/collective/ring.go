package collective

// ringPlan is one rank's schedule of a ring all-reduce (reduce-scatter then
// all-gather), pure: no I/O, no clock. The count elements are cut into n
// chunks (Partition) and every chunk into m pieces (Piece) that fit a slot.
// Rank r sends only to its right neighbour (r+1) and receives only from its
// left (r−1), 2(n−1)·m messages each way. Message seq = s·m + p is step s,
// piece p:
//
//   - reduce-scatter steps s = 0 … n−2: r sends chunk (r−s) mod n and
//     receives chunk (r−1−s) mod n, which it adds to its own copy; after step
//     n−2 it holds chunk (r+1) mod n fully reduced;
//   - all-gather steps s = n−1 … 2n−3 (t = s−(n−1)): r sends chunk
//     (r+1−t) mod n and receives chunk (r−t) mod n, which it copies in.
//
// Every received piece (s, p) makes exactly the send (s+1, p) ready: the
// chunk just reduced or copied is the one r sends next, so pieces pipeline
// independently. The first step's m sends are ready at the start.
type ringPlan struct {
	rank, n, m int
	chunks     []Range
}

func newRingPlan(rank, n, count, slotElems int) ringPlan {
	chunks := Partition(count, n)
	return ringPlan{rank: rank, n: n, m: PiecesFor(chunks[0].Len, slotElems), chunks: chunks}
}

func (p ringPlan) steps() int    { return 2 * (p.n - 1) }
func (p ringPlan) messages() int { return p.steps() * p.m }

func mod(a, n int) int { return ((a % n) + n) % n }

// sendRange is the elements message seq carries (read from the working
// buffer when the message is posted).
func (p ringPlan) sendRange(seq int) Range {
	s, piece := seq/p.m, seq%p.m
	var c int
	if s < p.n-1 {
		c = mod(p.rank-s, p.n)
	} else {
		c = mod(p.rank+1-(s-(p.n-1)), p.n)
	}
	return Piece(p.chunks[c], p.m, piece)
}

// recvRange is where the received message seq goes and whether it is added
// (reduce-scatter) or copied (all-gather).
func (p ringPlan) recvRange(seq int) (r Range, reduce bool) {
	s, piece := seq/p.m, seq%p.m
	if s < p.n-1 {
		return Piece(p.chunks[mod(p.rank-1-s, p.n)], p.m, piece), true
	}
	return Piece(p.chunks[mod(p.rank-(s-(p.n-1)), p.n)], p.m, piece), false
}

// next is the send that receiving seq makes ready, or -1 after the last step.
func (p ringPlan) next(seq int) int {
	if seq/p.m+1 >= p.steps() {
		return -1
	}
	return seq + p.m
}
