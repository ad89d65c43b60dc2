package mrc

import "iter"

// timerQueue holds a QP's per-packet ACK timers, earliest first. A packet's
// deadline is its send time plus the RTO, and the engine's clock never goes
// back, so deadlines arrive almost always in non-decreasing order: those go
// into a FIFO ring (push and pop O(1), no sift through a heap of a window's
// worth of entries per packet, which showed as 2.6 % of a sending daemon's
// CPU). The exceptions (the RTO shrank since the last push, a short timer
// after a long one) go into a binary heap, usually empty. The earliest
// deadline is the earlier of the two heads; on a tie the FIFO's goes first
// (the earlier push). Pops come out in the same deadline order as from one
// heap (TestTimerQueueMatchesHeap).
type timerQueue struct {
	ring    []timerEnt // len is a power of two
	head, n int
	out     timerHeap // deadlines earlier than the ring's last
}

func (t *timerQueue) init(n int) {
	size := 16
	for size < n {
		size *= 2
	}
	t.ring = make([]timerEnt, size)
	t.head, t.n = 0, 0
	t.out.init(16)
}

func (t *timerQueue) reset() {
	t.head, t.n = 0, 0
	t.out.reset()
}

func (t *timerQueue) len() int { return t.n + len(t.out.h) }

func (t *timerQueue) last() *timerEnt {
	return &t.ring[(t.head+t.n-1)&(len(t.ring)-1)]
}

func (t *timerQueue) push(x timerEnt) {
	if t.n > 0 && x.at < t.last().at {
		t.out.push(x)
		return
	}
	if t.n == len(t.ring) {
		t.grow()
	}
	t.ring[(t.head+t.n)&(len(t.ring)-1)] = x
	t.n++
}

// grow doubles the ring (more timers outstanding than 2 × the window:
// retransmissions of many packets within one RTO).
func (t *timerQueue) grow() {
	r := make([]timerEnt, 2*max(len(t.ring), 8))
	for i := 0; i < t.n; i++ {
		r[i] = t.ring[(t.head+i)&(len(t.ring)-1)]
	}
	t.ring, t.head = r, 0
}

func (t *timerQueue) peek() (Time, bool) {
	h, ok := t.out.peek()
	if t.n > 0 && (!ok || t.ring[t.head].at <= h) {
		return t.ring[t.head].at, true
	}
	return h, ok
}

// pop removes and returns the earliest timer; the queue must not be empty.
func (t *timerQueue) pop() timerEnt {
	h, ok := t.out.peek()
	if t.n > 0 && (!ok || t.ring[t.head].at <= h) {
		x := t.ring[t.head]
		t.head = (t.head + 1) & (len(t.ring) - 1)
		t.n--
		return x
	}
	return t.out.pop()
}

// all yields every pending timer, in no particular order (tests).
func (t *timerQueue) all() iter.Seq[timerEnt] {
	return func(yield func(timerEnt) bool) {
		for i := 0; i < t.n; i++ {
			if !yield(t.ring[(t.head+i)&(len(t.ring)-1)]) {
				return
			}
		}
		for _, x := range t.out.h {
			if !yield(x) {
				return
			}
		}
	}
}
