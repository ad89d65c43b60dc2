package mrc

import "github.com/softmrc/softmrc/internal/wire"

// timerEnt is one per-packet ACK timer. Entries are never removed early: a
// popped entry whose seq no longer matches the packet's latest transmission
// (acknowledged or resent since) is stale and ignored.
type timerEnt struct {
	at  Time
	psn wire.PSN
	seq uint32
}

// timerHeap is a binary min-heap on at, preallocated so that pushing does
// not allocate in steady state.
type timerHeap struct{ h []timerEnt }

func (t *timerHeap) init(n int) { t.h = make([]timerEnt, 0, n) }
func (t *timerHeap) reset()     { t.h = t.h[:0] }

func (t *timerHeap) peek() (Time, bool) {
	if len(t.h) == 0 {
		return 0, false
	}
	return t.h[0].at, true
}

func (t *timerHeap) push(x timerEnt) {
	t.h = append(t.h, x)
	h := t.h
	i := len(h) - 1
	for i > 0 {
		p := (i - 1) / 2
		if h[p].at <= h[i].at {
			break
		}
		h[p], h[i] = h[i], h[p]
		i = p
	}
}

func (t *timerHeap) pop() timerEnt {
	h := t.h
	top := h[0]
	n := len(h) - 1
	h[0] = h[n]
	t.h = h[:n]
	h = t.h
	i := 0
	for {
		l := 2*i + 1
		if l >= n {
			break
		}
		m := l
		if r := l + 1; r < n && h[r].at < h[l].at {
			m = r
		}
		if h[i].at <= h[m].at {
			break
		}
		h[i], h[m] = h[m], h[i]
		i = m
	}
	return top
}
