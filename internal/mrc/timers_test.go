package mrc

import (
	"cmp"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/softmrc/softmrc/internal/wire"
)

// TestTimerQueueMatchesHeap runs the per-packet timer queue and the binary
// heap it replaced through the same random schedules: a clock that only
// moves forward, pushes at now + an RTO that drifts, jumps down (srtt fell)
// and doubles (backoff of a retransmission), and expiry passes that pop
// everything due. Both must hand out the same timers in the same deadline
// order (ties, which the heap orders arbitrarily, compared as sets), with
// the ring wrapping and growing past its initial size.
func TestTimerQueueMatchesHeap(t *testing.T) {
	for _, tc := range []struct {
		name       string
		seed       uint64
		initial    int // init size (the ring rounds it up to 16 at least)
		pushes     int
		rtoJitter  Time // RTO drift per push
		downEvery  int  // every so many pushes the RTO falls by half (0: never)
		backoffPct int  // % of pushes with a doubled RTO (retransmissions)
		coarse     Time // deadlines rounded to this (many ties); 0 = none
	}{
		{"monotone", 1, 64, 5000, 0, 0, 0, 0},
		{"drift", 2, 64, 5000, 300, 0, 0, 0},
		{"falling rto", 3, 64, 5000, 100, 50, 0, 0},
		{"backoff", 4, 64, 5000, 100, 0, 10, 0},
		{"everything", 5, 16, 20000, 500, 97, 15, 0},
		{"ties", 6, 16, 20000, 500, 31, 10, 1000},
		{"grow from small", 7, 1, 3000, 50, 0, 5, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(tc.seed, 99))
			var q timerQueue
			var h timerHeap
			q.init(tc.initial)
			h.init(tc.initial)
			var now Time
			rto := 200 * Microsecond
			var gotQ, gotH []timerEnt
			expire := func() {
				var a, b []timerEnt
				for {
					at, ok := q.peek()
					if !ok || at > now {
						break
					}
					a = append(a, q.pop())
				}
				for {
					at, ok := h.peek()
					if !ok || at > now {
						break
					}
					b = append(b, h.pop())
				}
				gotQ, gotH = append(gotQ, a...), append(gotH, b...)
			}
			for i := 0; i < tc.pushes; i++ {
				now += Time(rng.IntN(3000))
				if tc.rtoJitter > 0 {
					rto = max(10*Microsecond, rto+Time(rng.IntN(int(2*tc.rtoJitter+1)))-tc.rtoJitter)
				}
				if tc.downEvery > 0 && i%tc.downEvery == tc.downEvery-1 {
					rto = max(10*Microsecond, rto/2)
				}
				d := rto
				if rng.IntN(100) < tc.backoffPct {
					d *= Time(2 << rng.IntN(3))
				}
				at := now + d
				if tc.coarse > 0 {
					at -= at % tc.coarse
				}
				e := timerEnt{at: at, psn: wire.PSN(i) & wire.PSNMask, seq: uint32(i)}
				q.push(e)
				h.push(e)
				if q.len() != len(h.h) {
					t.Fatalf("push %d: queue holds %d timers, heap %d", i, q.len(), len(h.h))
				}
				if rng.IntN(4) == 0 {
					expire()
				}
			}
			now += 1 << 40
			expire()
			if q.len() != 0 {
				t.Fatalf("%d timers left after the last expiry", q.len())
			}
			if len(gotQ) != tc.pushes || len(gotH) != tc.pushes {
				t.Fatalf("popped %d from the queue, %d from the heap, want %d each", len(gotQ), len(gotH), tc.pushes)
			}
			for i := range gotQ {
				if gotQ[i].at != gotH[i].at {
					t.Fatalf("pop %d: queue deadline %d, heap %d", i, gotQ[i].at, gotH[i].at)
				}
				if i > 0 && gotQ[i].at < gotQ[i-1].at {
					t.Fatalf("pop %d: deadline %d after %d", i, gotQ[i].at, gotQ[i-1].at)
				}
			}
			bySeq := func(a, b timerEnt) int { return cmp.Or(cmp.Compare(a.at, b.at), cmp.Compare(a.seq, b.seq)) }
			slices.SortFunc(gotQ, bySeq)
			slices.SortFunc(gotH, bySeq)
			if !slices.Equal(gotQ, gotH) {
				t.Fatal("queue and heap popped different timers")
			}
		})
	}
}

// TestTimerQueueReset: a reset queue is empty and works again from any
// ring position.
func TestTimerQueueReset(t *testing.T) {
	var q timerQueue
	q.init(4)
	for i := range 40 {
		q.push(timerEnt{at: Time(100 - i%7), seq: uint32(i)})
	}
	q.pop()
	q.reset()
	if _, ok := q.peek(); ok || q.len() != 0 {
		t.Fatalf("after reset: %d timers, peek ok %v", q.len(), ok)
	}
	for i := range 3 {
		q.push(timerEnt{at: Time(10 - i), seq: uint32(i)})
	}
	for want := Time(8); want <= 10; want++ {
		if x := q.pop(); x.at != want {
			t.Fatalf("popped deadline %d, want %d", x.at, want)
		}
	}
}

// BenchmarkTimerQueue: one push and one pop per packet with a window of
// timers outstanding, as the sender's ACK timers run; the old heap beside.
func BenchmarkTimerQueue(b *testing.B) {
	b.Run("queue", func(b *testing.B) { benchTimers(b, &timerQueue{}) })
	b.Run("heap", func(b *testing.B) { benchTimers(b, &timerHeap{}) })
}

// benchTimers runs BenchmarkTimerQueue on one implementation (both behind
// the same interface, so the call cost is the same for both).
func benchTimers(b *testing.B, q interface {
	init(int)
	push(timerEnt)
	pop() timerEnt
}) {
	const window = 1024
	q.init(2 * window)
	for i := range window {
		q.push(timerEnt{at: Time(i)})
	}
	var now Time = window
	for b.Loop() {
		q.push(timerEnt{at: now})
		q.pop()
		now++
	}
}
