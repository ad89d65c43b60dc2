package delayline

import (
	"strings"
	"testing"
	"time"
)

// step is one scripted call: put frame at t, or release (max frames) at t
// expecting exactly want, in order.
type step struct {
	t    int64
	put  string
	ok   bool // Put's result
	rel  int  // > 0: Release(t, rel) instead of Put
	want string
}

func TestLineScript(t *testing.T) {
	const d = 5 * time.Millisecond
	ms := int64(time.Millisecond)
	for _, tc := range []struct {
		name     string
		capacity int
		steps    []step
		want     Counters
	}{
		{name: "each frame leaves delay after it came, in order", capacity: 4, steps: []step{
			{t: 0, put: "a", ok: true},
			{t: 1 * ms, put: "b", ok: true},
			{t: 4 * ms, rel: 10, want: ""},   // nothing due yet
			{t: 5 * ms, rel: 10, want: "a"},  // a is due at exactly 5 ms
			{t: 5*ms + 1, rel: 10, want: ""}, // b not before 6 ms
			{t: 9 * ms, put: "c", ok: true},  // due at 14 ms
			{t: 13 * ms, rel: 10, want: "b"}, // late consumer: b still first
			{t: 20 * ms, rel: 10, want: "c"},
		}, want: Counters{In: 3, Out: 3, PeakHeld: 2}},
		{name: "a full pool drops and counts, never blocks", capacity: 2, steps: []step{
			{t: 0, put: "a", ok: true},
			{t: 0, put: "b", ok: true},
			{t: 0, put: "c", ok: false},
			{t: 5 * ms, rel: 1, want: "a"}, // max bounds one release
			{t: 5 * ms, put: "d", ok: true},
			{t: 10 * ms, rel: 10, want: "bd"},
		}, want: Counters{In: 3, Out: 3, Dropped: 1, PeakHeld: 2}},
		{name: "frames longer than a buffer are refused", capacity: 2, steps: []step{
			{t: 0, put: strings.Repeat("x", 9), ok: false},
			{t: 0, put: "y", ok: true},
			{t: 5 * ms, rel: 4, want: "y"},
		}, want: Counters{In: 1, Out: 1, TooLong: 1, PeakHeld: 1}},
		{name: "the ring wraps", capacity: 2, steps: []step{
			{t: 0, put: "a", ok: true},
			{t: 1 * ms, put: "b", ok: true},
			{t: 5 * ms, rel: 5, want: "a"},
			{t: 5 * ms, put: "c", ok: true},
			{t: 6 * ms, rel: 5, want: "b"},
			{t: 6 * ms, put: "d", ok: true},
			{t: 11 * ms, rel: 5, want: "cd"},
		}, want: Counters{In: 4, Out: 4, PeakHeld: 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, err := New(d, tc.capacity, 8)
			if err != nil {
				t.Fatal(err)
			}
			for i, s := range tc.steps {
				if s.rel > 0 {
					var got strings.Builder
					l.Release(s.t, s.rel, func(f []byte) { got.Write(f) })
					if got.String() != s.want {
						t.Fatalf("step %d: released %q at %v, want %q", i, got.String(), time.Duration(s.t), s.want)
					}
					continue
				}
				if ok := l.Put(s.t, []byte(s.put)); ok != s.ok {
					t.Fatalf("step %d: Put(%q) = %v, want %v", i, s.put, ok, s.ok)
				}
			}
			if c := l.Counters(); c != tc.want {
				t.Fatalf("counters %+v, want %+v", c, tc.want)
			}
		})
	}
}

// TestDuePop: a consumer that takes fewer frames than are due (a full
// transmit ring) gets the rest, in order, next time.
func TestDuePop(t *testing.T) {
	l, _ := New(time.Microsecond, 8, 4)
	for _, f := range []string{"a", "b", "c"} {
		l.Put(0, []byte(f))
	}
	if _, ok := l.Next(); !ok {
		t.Fatal("Next: nothing held after 3 Puts")
	}
	if due := l.Due(999, 8, nil); len(due) != 0 {
		t.Fatalf("%d due before the delay", len(due))
	}
	due := l.Due(1000, 8, nil)
	if len(due) != 3 || string(due[0]) != "a" {
		t.Fatalf("due %q", due)
	}
	l.Pop(2)
	due = l.Due(1000, 8, due[:0])
	if len(due) != 1 || string(due[0]) != "c" || l.Len() != 1 {
		t.Fatalf("after Pop(2): due %q, held %d", due, l.Len())
	}
	l.Pop(1)
	if _, ok := l.Next(); ok || l.Counters().Out != 3 {
		t.Fatalf("after popping all: %+v", l.Counters())
	}
}

// TestNoAllocPerFrame: putting and releasing frames allocates nothing.
func TestNoAllocPerFrame(t *testing.T) {
	l, _ := New(time.Microsecond, 64, 2048)
	frame := make([]byte, 1500)
	now := int64(0)
	sink := 0
	fn := func(f []byte) { sink += len(f) }
	allocs := testing.AllocsPerRun(1000, func() {
		l.Put(now, frame)
		now += 1000
		l.Release(now, 64, fn)
	})
	if allocs != 0 || sink == 0 {
		t.Fatalf("%v allocations per frame (released %d bytes), want 0", allocs, sink)
	}
}

func TestNewErrors(t *testing.T) {
	for _, tc := range []struct {
		d    time.Duration
		c, f int
	}{{-1, 1, 1}, {0, 0, 1}, {0, 1, 0}} {
		if _, err := New(tc.d, tc.c, tc.f); err == nil {
			t.Errorf("New(%v, %d, %d): no error", tc.d, tc.c, tc.f)
		}
	}
}
