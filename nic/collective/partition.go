package collective

// Range is a half-open range of elements [Off, Off+Len).
type Range struct{ Off, Len int }

// End is the first element after the range.
func (r Range) End() int { return r.Off + r.Len }

// Partition splits count elements into parts contiguous ranges whose
// lengths differ by at most one, the longer ones first (parts >= 1). Empty
// ranges are allowed: 3 elements over 4 ranks give 1, 1, 1, 0.
func Partition(count, parts int) []Range {
	rs := make([]Range, parts)
	base, extra := count/parts, count%parts
	off := 0
	for i := range rs {
		n := base
		if i < extra {
			n++
		}
		rs[i] = Range{off, n}
		off += n
	}
	return rs
}

// PiecesFor is how many pieces a chunk of up to maxLen elements is cut into
// so that each piece fits a slot of slotElems elements: ceil(maxLen /
// slotElems), at least 1 (an empty chunk still travels as one zero-length
// message, which keeps every rank's schedule the same shape).
func PiecesFor(maxLen, slotElems int) int {
	if maxLen <= 0 {
		return 1
	}
	return (maxLen + slotElems - 1) / slotElems
}

// Piece is piece p of m of the range r: Partition(r.Len, m)[p] moved to r.
func Piece(r Range, m, p int) Range {
	base, extra := r.Len/m, r.Len%m
	n := base
	off := p * base
	if p < extra {
		n++
		off += p
	} else {
		off += extra
	}
	return Range{r.Off + off, n}
}
