// Package delayline is a fixed-delay FIFO for frames: the propagation delay
// of one direction of a wire, which mrc-nicd puts on a port when its config
// asks for `delay` (docs/nic.md). An XDP program cannot hold a frame and
// the testbed's kernel may lack sch_netem, so the soft NIC holds them.
//
// A Line copies each frame into a buffer of its own pool, sized once at
// New: holding frames never pins the port's UMEM, never allocates per
// frame, and never blocks. A frame that finds the pool full is dropped and
// counted, as a wire whose far end cannot keep up loses it. Frames leave in
// the order they came, each Delay after it was put in (or later, if the
// consumer is late).
//
// The package is pure: every call takes the time (ns on any monotonic
// clock), so tests script it.
package delayline

import (
	"fmt"
	"time"
)

// Counters are a line's events since New.
type Counters struct {
	In       uint64 // frames put in
	Out      uint64 // frames released
	Dropped  uint64 // frames refused: the pool was full
	TooLong  uint64 // frames refused: longer than a pool buffer
	Held     uint64 // frames held now
	PeakHeld uint64 // the most frames held at once
}

// Line is one direction of a delayed wire. Not safe for concurrent use.
type Line struct {
	delay int64
	bufs  [][]byte // ring of pool buffers
	at    []int64  // release time of each slot
	head  int      // oldest held
	n     int      // held
	c     Counters
}

// New returns a line that holds frames for delay, with a pool of capacity
// buffers of frameSize bytes each.
func New(delay time.Duration, capacity, frameSize int) (*Line, error) {
	if delay < 0 || capacity < 1 || frameSize < 1 {
		return nil, fmt.Errorf("delayline: delay %v, capacity %d frames of %d bytes: want delay >= 0 and both sizes >= 1", delay, capacity, frameSize)
	}
	l := &Line{delay: int64(delay), bufs: make([][]byte, capacity), at: make([]int64, capacity)}
	pool := make([]byte, capacity*frameSize)
	for i := range l.bufs {
		l.bufs[i] = pool[i*frameSize : i*frameSize : (i+1)*frameSize]
	}
	return l, nil
}

// Delay is the line's delay.
func (l *Line) Delay() time.Duration { return time.Duration(l.delay) }

// Cap is the pool's size in frames.
func (l *Line) Cap() int { return len(l.bufs) }

// Put copies frame into the line at now. It reports false, and counts the
// frame as dropped, when the pool is full or the frame longer than a
// buffer.
func (l *Line) Put(now int64, frame []byte) bool {
	if l.n == len(l.bufs) {
		l.c.Dropped++
		return false
	}
	i := (l.head + l.n) % len(l.bufs)
	b := l.bufs[i]
	if len(frame) > cap(b) {
		l.c.TooLong++
		return false
	}
	l.bufs[i] = append(b[:0], frame...)
	l.at[i] = now + l.delay
	l.n++
	l.c.In++
	l.c.Held = uint64(l.n)
	l.c.PeakHeld = max(l.c.PeakHeld, l.c.Held)
	return true
}

// Due appends to dst, oldest first, up to max frames whose time has come
// at now, without taking them out: the consumer may accept fewer (a full
// transmit ring), then Pop takes the ones it accepted. The slices alias
// the pool and stay valid until Pop.
func (l *Line) Due(now int64, max int, dst [][]byte) [][]byte {
	for k := 0; k < l.n && k < max; k++ {
		i := (l.head + k) % len(l.bufs)
		if l.at[i] > now {
			break
		}
		dst = append(dst, l.bufs[i])
	}
	return dst
}

// Pop takes the k oldest frames out (k ≤ what Due returned).
func (l *Line) Pop(k int) {
	k = min(k, l.n)
	l.head = (l.head + k) % len(l.bufs)
	l.n -= k
	l.c.Out += uint64(k)
	l.c.Held = uint64(l.n)
}

// Release hands every frame due at now to fn, oldest first, up to max, and
// takes it out; a frame is valid only during fn. It returns how many.
func (l *Line) Release(now int64, max int, fn func(frame []byte)) int {
	k := 0
	for ; k < max && l.n > 0; k++ {
		if l.at[l.head] > now {
			break
		}
		fn(l.bufs[l.head])
		l.head = (l.head + 1) % len(l.bufs)
		l.n--
	}
	l.c.Out += uint64(k)
	l.c.Held = uint64(l.n)
	return k
}

// Ready is how many held frames are due at now, counting up to max.
func (l *Line) Ready(now int64, max int) int {
	k := 0
	for ; k < max && k < l.n; k++ {
		if l.at[(l.head+k)%len(l.bufs)] > now {
			break
		}
	}
	return k
}

// Next is when the oldest held frame is due, and false when none is held.
func (l *Line) Next() (int64, bool) {
	if l.n == 0 {
		return 0, false
	}
	return l.at[l.head], true
}

// Len is the number of frames held.
func (l *Line) Len() int { return l.n }

// Counters returns the line's counters.
func (l *Line) Counters() Counters { return l.c }
