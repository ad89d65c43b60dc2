package collective

// a2aPlan is one rank's schedule of an all-to-all, pure. Rank r's send
// buffer holds n blocks of b elements, block j for rank j; its receive
// buffer gets block j from rank j. Each block to a peer is cut into m pieces
// that fit a slot; message seq = piece. Every message is ready at the start
// (the NIC's credits pace them), and receives are independent copies.
type a2aPlan struct {
	rank, n, b, m int
}

func newA2APlan(rank, n, block, slotElems int) a2aPlan {
	return a2aPlan{rank: rank, n: n, b: block, m: PiecesFor(block, slotElems)}
}

// block is peer's block of a buffer.
func (p a2aPlan) block(peer int) Range { return Range{peer * p.b, p.b} }

// piece is the elements of message seq in peer's block.
func (p a2aPlan) piece(peer, seq int) Range { return Piece(p.block(peer), p.m, seq) }
