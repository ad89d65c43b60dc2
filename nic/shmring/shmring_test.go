package shmring

import (
	"encoding/binary"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"
)

// mem returns 8-byte aligned memory of n bytes (as a mapping would be).
func mem(n int) []byte {
	w := make([]uint64, (n+7)/8)
	return unsafe.Slice((*byte)(unsafe.Pointer(&w[0])), n)
}

func newPair(t testing.TB, l Layout) (*App, *Daemon, []byte) {
	t.Helper()
	m := mem(l.Size())
	a, err := Init(m, l)
	if err != nil {
		t.Fatal(err)
	}
	d, err := Attach(m)
	if err != nil {
		t.Fatal(err)
	}
	return a, d, m
}

func TestLayoutCheck(t *testing.T) {
	for _, tc := range []struct {
		l  Layout
		ok bool
	}{
		{DefaultLayout, true},
		{Layout{16, 16}, true},
		{Layout{MaxEntries, 16}, true},
		{Layout{15, 16}, false},
		{Layout{16, 0}, false},
		{Layout{24, 16}, false},
		{Layout{MaxEntries * 2, 16}, false},
	} {
		if err := tc.l.Check(); (err == nil) != tc.ok {
			t.Errorf("%+v: err %v, want ok=%v", tc.l, err, tc.ok)
		}
	}
}

// TestAttachRejects: the daemon refuses a header it cannot trust, each
// with an error naming the field.
func TestAttachRejects(t *testing.T) {
	l := Layout{SQEntries: 16, CQEntries: 16}
	for _, tc := range []struct {
		name  string
		off   int
		val   uint32
		short int
		want  error
	}{
		{name: "ok"},
		{name: "magic", off: offMagic, val: 1, want: ErrCorrupt},
		{name: "sq entries not a power of 2", off: offSQN, val: 17, want: ErrCorrupt},
		{name: "sq entries beyond memory", off: offSQN, val: 1 << 16, want: ErrCorrupt},
		{name: "cq slot size", off: offCQSlot, val: 64, want: ErrCorrupt},
		{name: "sq tail ahead", off: offSQTail, val: 17, want: ErrCorrupt},
		{name: "cq head ahead of tail", off: offCQHead, val: 5, want: ErrCorrupt},
		{name: "short memory", short: 4096, want: ErrCorrupt},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := mem(l.Size())
			if _, err := Init(m, l); err != nil {
				t.Fatal(err)
			}
			if tc.off != 0 || tc.val != 0 {
				binary.LittleEndian.PutUint32(m[tc.off:], tc.val)
			}
			_, err := Attach(m[:len(m)-tc.short])
			if tc.want == nil && err != nil || tc.want != nil && !errors.Is(err, tc.want) {
				t.Fatalf("Attach: %v, want %v", err, tc.want)
			}
		})
	}
	m := mem(l.Size())
	if _, err := Init(m, l); err != nil {
		t.Fatal(err)
	}
	binary.LittleEndian.PutUint32(m[offVersion:], 9)
	if _, err := Attach(m); err == nil || errors.Is(err, ErrCorrupt) {
		t.Fatalf("version 9: %v, want a version mismatch error", err)
	}
}

// TestSQFullAndWrap fills the SQ, sees it full, drains it, and goes round
// several times: every slot comes out once, in order.
func TestSQFullAndWrap(t *testing.T) {
	a, d, _ := newPair(t, Layout{SQEntries: 16, CQEntries: 16})
	next := uint64(0)
	want := uint64(0)
	for round := 0; round < 5; round++ {
		for {
			s := a.SQReserve()
			if s == nil {
				break
			}
			binary.LittleEndian.PutUint64(s, next)
			next++
			a.SQCommit()
		}
		if got := next - want; got != 16 {
			t.Fatalf("round %d: %d posted before full, want 16", round, got)
		}
		a.SQPublish()
		for {
			s, err := d.SQNext()
			if err != nil {
				t.Fatal(err)
			}
			if s == nil {
				break
			}
			if v := binary.LittleEndian.Uint64(s); v != want {
				t.Fatalf("slot %d, want %d", v, want)
			}
			want++
		}
		d.SQRelease()
		if a.SQFree() != 16 {
			t.Fatalf("free %d after drain", a.SQFree())
		}
	}
}

// TestBadIndexFails: indices the application moves beyond what it could
// have written fail the daemon's end with ErrCorrupt, never a panic or an
// out-of-range slot.
func TestBadIndexFails(t *testing.T) {
	for _, tc := range []struct {
		name string
		off  int
		val  uint32
		sq   bool
	}{
		{"sq tail far ahead", offSQTail, 1000, true},
		{"sq tail behind head", offSQTail, 0xffffffff, true},
		{"cq head ahead of tail", offCQHead, 3, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, d, m := newPair(t, Layout{SQEntries: 16, CQEntries: 16})
			binary.LittleEndian.PutUint32(m[tc.off:], tc.val)
			var err error
			if tc.sq {
				_, err = d.SQNext()
			} else {
				_, err = d.CQReserve()
			}
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("err %v, want ErrCorrupt", err)
			}
		})
	}
}

// TestCQFullAndOverflowFlag: the daemon sees a full CQ (nil slot), and the
// application reads what it holds in order.
func TestCQFullAndOverflowFlag(t *testing.T) {
	a, d, _ := newPair(t, Layout{SQEntries: 16, CQEntries: 16})
	for i := 0; i < 16; i++ {
		s, err := d.CQReserve()
		if err != nil || s == nil {
			t.Fatalf("slot %d: %v %v", i, s, err)
		}
		binary.LittleEndian.PutUint32(s, uint32(i))
		d.CQCommit()
	}
	if s, err := d.CQReserve(); s != nil || err != nil {
		t.Fatalf("17th slot: %v %v, want full", s, err)
	}
	d.SetFlags(FlagCQOverflow)
	d.CQPublish()
	if a.Flags()&FlagCQOverflow == 0 {
		t.Fatal("overflow flag not published")
	}
	for i := 0; i < 16; i++ {
		s, err := a.CQNext()
		if err != nil || s == nil {
			t.Fatalf("read %d: %v", i, err)
		}
		if v := binary.LittleEndian.Uint32(s); v != uint32(i) {
			t.Fatalf("read %d, want %d", v, i)
		}
		a.CQRelease(1)
	}
	if s, _ := a.CQNext(); s != nil {
		t.Fatal("CQ not empty")
	}
}

// TestStress runs a producer and a consumer on each ring at once, with the
// doorbell and futex rules, and checks every entry arrives once, in order,
// and that no sleeper waits out its timeout (a lost wake-up). Run with
// -race: the atomics are what orders the slot bytes.
func TestStress(t *testing.T) {
	const n = 200000
	a, d, _ := newPair(t, Layout{SQEntries: 64, CQEntries: 64})
	bell := make(chan struct{}, 1)
	var lost atomic.Int64
	var wg sync.WaitGroup
	wg.Add(2)
	// Application: posts n WRs, consumes n completions.
	go func() {
		defer wg.Done()
		got := uint64(0)
		for sent := uint64(0); sent < n || got < n; {
			for k := 0; k < 8 && sent < n; k++ {
				s := a.SQReserve()
				if s == nil {
					break
				}
				binary.LittleEndian.PutUint64(s, sent)
				a.SQCommit()
				sent++
			}
			if a.SQPublish() {
				a.Rang()
				select {
				case bell <- struct{}{}:
				default:
				}
			}
			for {
				s, err := a.CQNext()
				if err != nil {
					t.Error(err)
					return
				}
				if s == nil {
					break
				}
				if v := binary.LittleEndian.Uint64(s); v != got {
					t.Errorf("completion %d, want %d", v, got)
					return
				}
				got++
				a.CQRelease(1)
			}
			if got < n && sent == n || a.SQFree() == 0 {
				v := a.SetWaiting(WaitCQ | WaitSQ)
				if !a.CQPending() && a.SQFree() == 0 || !a.CQPending() && sent == n {
					t0 := time.Now()
					a.Wait(v, 2*time.Second)
					if time.Since(t0) > 1900*time.Millisecond {
						lost.Add(1)
					}
				}
			}
		}
	}()
	// Daemon: takes WRs, completes each with the same number.
	go func() {
		defer wg.Done()
		var backlog []uint64
		done := uint64(0)
		for done < n {
			work := false
			for len(backlog) < 128 {
				s, err := d.SQNext()
				if err != nil {
					t.Error(err)
					return
				}
				if s == nil {
					break
				}
				backlog = append(backlog, binary.LittleEndian.Uint64(s))
				work = true
			}
			d.SQRelease()
			for len(backlog) > 0 {
				s, err := d.CQReserve()
				if err != nil {
					t.Error(err)
					return
				}
				if s == nil {
					break
				}
				binary.LittleEndian.PutUint64(s, backlog[0])
				backlog = backlog[1:]
				d.CQCommit()
				done++
				work = true
			}
			// Taking WRs frees SQ room the application may wait for.
			if !d.CQPublish() && work {
				d.WakeApp(WaitSQ)
			}
			if work || len(backlog) > 0 {
				continue
			}
			d.SetNeedWakeup(true)
			if !d.SQPending() {
				select {
				case <-bell:
				case <-time.After(2 * time.Second):
					lost.Add(1)
				}
			}
			d.SetNeedWakeup(false)
		}
	}()
	wg.Wait()
	if l := lost.Load(); l != 0 {
		t.Fatalf("%d sleeps waited out their timeout: a lost wake-up", l)
	}
	t.Logf("%d messages: %d doorbells, %d application wake-ups", n, a.Doorbells(), a.AppWakes())
}

// FuzzDaemon feeds arbitrary shared memory to the daemon's end: whatever
// the application wrote, Attach and the consumer either work within the
// ring's bounds or fail with an error; they never panic or hand out more
// than a ring's worth of slots before a release.
func FuzzDaemon(f *testing.F) {
	l := Layout{SQEntries: 16, CQEntries: 16}
	seed := mem(l.Size())
	if _, err := Init(seed, l); err != nil {
		f.Fatal(err)
	}
	f.Add(append([]byte(nil), seed[:512]...), uint32(5), uint32(0))
	f.Add(append([]byte(nil), seed[:512]...), uint32(1<<31), uint32(7))
	f.Fuzz(func(t *testing.T, hdr []byte, tail, cqHead uint32) {
		m := mem(l.Size())
		if _, err := Init(m, l); err != nil {
			t.Fatal(err)
		}
		copy(m, hdr)
		d, err := Attach(m)
		if err != nil {
			return
		}
		lay := d.Layout()
		binary.LittleEndian.PutUint32(m[offSQTail:], tail)
		binary.LittleEndian.PutUint32(m[offCQHead:], cqHead)
		taken := uint32(0)
		for {
			s, err := d.SQNext()
			if err != nil || s == nil {
				break
			}
			if len(s) != SQSlot {
				t.Fatalf("slot of %d bytes", len(s))
			}
			if taken++; taken > lay.SQEntries {
				t.Fatalf("%d slots from a ring of %d", taken, lay.SQEntries)
			}
		}
		d.SQRelease()
		filled := uint32(0)
		for {
			s, err := d.CQReserve()
			if err != nil || s == nil {
				break
			}
			d.CQCommit()
			if filled++; filled > lay.CQEntries {
				t.Fatalf("%d completions into a ring of %d", filled, lay.CQEntries)
			}
		}
		d.CQPublish()
	})
}

// BenchmarkPostPoll is one work request through the SQ and one completion
// through the CQ, both ends in one goroutine: the ring's own cost per
// message (allocs/op must stay 0).
func BenchmarkPostPoll(b *testing.B) {
	a, d, _ := newPair(b, DefaultLayout)
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		s := a.SQReserve()
		binary.LittleEndian.PutUint64(s, uint64(i))
		a.SQCommit()
		a.SQPublish()
		w, err := d.SQNext()
		if err != nil || w == nil {
			b.Fatal(err)
		}
		v := binary.LittleEndian.Uint64(w)
		d.SQRelease()
		c, _ := d.CQReserve()
		binary.LittleEndian.PutUint64(c, v)
		d.CQCommit()
		d.CQPublish()
		r, _ := a.CQNext()
		if binary.LittleEndian.Uint64(r) != uint64(i) {
			b.Fatal("wrong completion")
		}
		a.CQRelease(1)
	}
}

// WaitHeld keeps its P, so it must never sleep unbounded: a wait asked for
// without limit or longer than MaxHeldWait ends by MaxHeldWait (checked
// with a bound far above it: a loaded machine delays the return, never
// shortens it), and a wake ends it early.
func TestWaitHeldBounded(t *testing.T) {
	for _, tc := range []struct {
		name    string
		timeout time.Duration
		wake    bool
	}{
		{"no limit asked", -1, false},
		{"a second asked", time.Second, false},
		{"woken", time.Second, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var word uint32 = 7
			if tc.wake {
				go func() {
					for !atomic.CompareAndSwapUint32(&word, 7, 8) {
					}
					futexWake(&word)
				}()
			}
			start := time.Now()
			for i := 0; i < 10 && atomic.LoadUint32(&word) == 7; i++ {
				WaitHeld(&word, 7, tc.timeout)
			}
			if took := time.Since(start); took > 500*time.Millisecond {
				t.Fatalf("WaitHeld(%v) took %v in all, want each wait capped at %v", tc.timeout, took, MaxHeldWait)
			}
		})
	}
}
