// Package shmring is the shared-memory path between a verbs application and
// mrc-nicd: one submission ring (work requests, application → daemon) and
// one completion ring (completions, daemon → application) in a memfd both
// processes map, with the wake-up words that let each side sleep without
// the other paying a syscall per message while it is awake.
//
// Both rings are single-producer/single-consumer with free-running 32-bit
// indices: the producer writes a slot, then stores its index (release); the
// consumer loads the index (acquire), reads the slot, then stores its own.
// A slot is opaque bytes here (the verbs WR and CQE encodings of
// nic/vproto): the package moves slots, the daemon validates their fields.
//
// Layout, version 1 (all integers little-endian, offsets in bytes; every
// word written by one side sits on its own 64-byte line so the two sides
// do not share a cache line they both write):
//
//	0    magic "MRCR" (0x5243524d)     uint32  app, at Init
//	4    version (1)                   uint32  app, at Init
//	8    SQ entries (power of 2)       uint32  app, at Init
//	12   CQ entries (power of 2)       uint32  app, at Init
//	16   SQ slot size (64)             uint32  app, at Init
//	20   CQ slot size (32)             uint32  app, at Init
//	64   SQ tail (producer index)      uint32  app
//	128  SQ head (consumer index)      uint32  daemon
//	192  CQ tail (producer index)      uint32  daemon
//	256  CQ head (consumer index)      uint32  app
//	320  need_wakeup                   uint32  daemon: 1 = asleep, ring the doorbell after posting
//	384  app_wait (futex word)         uint32  app ors in WaitCQ/WaitSQ before it sleeps; daemon swaps 0 and wakes it
//	448  flags                         uint32  daemon: FlagCQOverflow (sticky), FlagFailed
//	512  doorbells rung                uint64  app (statistics)
//	576  app wake-ups                  uint64  daemon (statistics)
//	4096 SQ slots, then CQ slots
//
// The doorbell rule (AF_XDP's need_wakeup): the daemon stores need_wakeup
// = 1, then checks the SQ once more, then sleeps; the application stores
// the SQ tail, then loads need_wakeup and rings the doorbell (an eventfd
// the daemon polls) only when it is 1. With sequentially consistent
// atomics on both sides either the daemon sees the new tail or the
// application sees need_wakeup, so no post is left asleep. The completion
// side is the mirror: the application ors WaitCQ into app_wait, checks the
// CQ once more, then waits on the futex; the daemon stores the CQ tail,
// then swaps app_wait to 0 and wakes the futex only when it was set. A
// poster waiting for SQ room does the same with WaitSQ, and the daemon
// wakes it after taking work requests only when that bit is set, so a
// thread waiting for completions is not woken by every post it made.
//
// Neither side trusts the other's indices: the daemon keeps its own copy of
// the SQ head and CQ tail and only reads the application's SQ tail and CQ
// head, checked against the ring size (ErrCorrupt); a bad index fails that
// session only.
package shmring

import (
	"errors"
	"fmt"
	"sync/atomic"
	"time"
	"unsafe"
)

// Version is the layout version.
const Version = 1

// Magic marks an initialised ring region ("MRCR").
const Magic = 0x5243524d

// Slot sizes.
const (
	SQSlot = 64 // a vproto.WR (48 bytes) with room to grow
	CQSlot = 32 // a vproto.CQE
)

// HeaderLen is the size of the header page; the SQ slots follow it.
const HeaderLen = 4096

// Header offsets (see the package comment).
const (
	offMagic    = 0
	offVersion  = 4
	offSQN      = 8
	offCQN      = 12
	offSQSlot   = 16
	offCQSlot   = 20
	offSQTail   = 64
	offSQHead   = 128
	offCQTail   = 192
	offCQHead   = 256
	offNeedWake = 320
	offAppWait  = 384
	offFlags    = 448
	offBells    = 512
	offWakes    = 576
)

// Flags the daemon publishes.
const (
	// FlagCQOverflow: the completion ring was full once, and from then on
	// the daemon delivers this session's completions on the socket. Every
	// completion in the ring precedes every one on the socket.
	FlagCQOverflow = 1 << 0
	// FlagFailed: the daemon found a bad index or slot and dropped the ring;
	// the session is being closed.
	FlagFailed = 1 << 1
)

// Bounds on the entry counts.
const (
	MinEntries = 16
	MaxEntries = 1 << 20
)

// Layout is the ring sizes an application asks for.
type Layout struct {
	SQEntries uint32
	CQEntries uint32
}

// DefaultLayout: 4096 work requests (256 KiB) and 65536 completions
// (2 MiB; pages are touched only as the ring goes round).
var DefaultLayout = Layout{SQEntries: 4096, CQEntries: 1 << 16}

// Check says what is wrong with l, or nil.
func (l Layout) Check() error {
	for _, e := range []struct {
		name string
		n    uint32
	}{{"SQ", l.SQEntries}, {"CQ", l.CQEntries}} {
		if e.n < MinEntries || e.n > MaxEntries || e.n&(e.n-1) != 0 {
			return fmt.Errorf("shmring: %s entries %d: want a power of 2 from %d to %d", e.name, e.n, MinEntries, MaxEntries)
		}
	}
	return nil
}

// Size is the bytes of shared memory l needs (a multiple of 4096).
func (l Layout) Size() int {
	n := HeaderLen + int(l.SQEntries)*SQSlot + int(l.CQEntries)*CQSlot
	return (n + 4095) &^ 4095
}

// ErrCorrupt is returned (wrapped) when the shared memory holds an index or
// header the reader cannot accept: the other side is broken or hostile.
var ErrCorrupt = errors.New("shmring: corrupt ring")

// ring is what both sides share: the mapped memory and its parts.
type ring struct {
	mem    []byte
	sq, cq []byte
	sqN    uint32
	cqN    uint32
}

func (r *ring) word(off int) *uint32 { return (*uint32)(unsafe.Pointer(&r.mem[off])) }
func (r *ring) dword(off int) *uint64 {
	return (*uint64)(unsafe.Pointer(&r.mem[off]))
}

// Init writes an empty ring of layout l into mem (the application side,
// before passing the memory to the daemon) and returns its application
// end. mem must be at least l.Size() bytes, 8-byte aligned (a mapping is).
func Init(mem []byte, l Layout) (*App, error) {
	if err := l.Check(); err != nil {
		return nil, err
	}
	if len(mem) < l.Size() {
		return nil, fmt.Errorf("shmring: %d bytes of memory for a ring of %d", len(mem), l.Size())
	}
	if uintptr(unsafe.Pointer(&mem[0]))%8 != 0 {
		return nil, errors.New("shmring: memory is not 8-byte aligned (map it)")
	}
	clear(mem[:HeaderLen])
	r := &ring{mem: mem}
	atomic.StoreUint32(r.word(offVersion), Version)
	atomic.StoreUint32(r.word(offSQN), l.SQEntries)
	atomic.StoreUint32(r.word(offCQN), l.CQEntries)
	atomic.StoreUint32(r.word(offSQSlot), SQSlot)
	atomic.StoreUint32(r.word(offCQSlot), CQSlot)
	atomic.StoreUint32(r.word(offMagic), Magic)
	r.split(l)
	return &App{ring: r}, nil
}

func (r *ring) split(l Layout) {
	r.sqN, r.cqN = l.SQEntries, l.CQEntries
	sqEnd := HeaderLen + int(l.SQEntries)*SQSlot
	r.sq = r.mem[HeaderLen:sqEnd:sqEnd]
	cqEnd := sqEnd + int(l.CQEntries)*CQSlot
	r.cq = r.mem[sqEnd:cqEnd:cqEnd]
}

// header reads and checks the header of mem.
func header(mem []byte) (Layout, error) {
	if len(mem) < HeaderLen {
		return Layout{}, fmt.Errorf("%w: %d bytes, shorter than the %d-byte header", ErrCorrupt, len(mem), HeaderLen)
	}
	if uintptr(unsafe.Pointer(&mem[0]))%8 != 0 {
		return Layout{}, errors.New("shmring: memory is not 8-byte aligned (map it)")
	}
	r := &ring{mem: mem}
	if m := atomic.LoadUint32(r.word(offMagic)); m != Magic {
		return Layout{}, fmt.Errorf("%w: magic %#x, want %#x (not a ring, or not initialised)", ErrCorrupt, m, Magic)
	}
	if v := atomic.LoadUint32(r.word(offVersion)); v != Version {
		return Layout{}, fmt.Errorf("shmring: layout version %d, this side speaks %d: use matching mrc-nicd and nic/verbs builds", v, Version)
	}
	if s, c := atomic.LoadUint32(r.word(offSQSlot)), atomic.LoadUint32(r.word(offCQSlot)); s != SQSlot || c != CQSlot {
		return Layout{}, fmt.Errorf("%w: slot sizes %d/%d, want %d/%d", ErrCorrupt, s, c, SQSlot, CQSlot)
	}
	l := Layout{SQEntries: atomic.LoadUint32(r.word(offSQN)), CQEntries: atomic.LoadUint32(r.word(offCQN))}
	if err := l.Check(); err != nil {
		return Layout{}, fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	if len(mem) < l.Size() {
		return Layout{}, fmt.Errorf("%w: %d bytes of memory for a ring of %d", ErrCorrupt, len(mem), l.Size())
	}
	return l, nil
}

// Attach checks the header of a ring the application initialised and
// returns the daemon's end. The header is read once: the sizes cannot
// change under the daemon afterwards. Indices start where the application
// left them (normally 0).
func Attach(mem []byte) (*Daemon, error) {
	l, err := header(mem)
	if err != nil {
		return nil, err
	}
	r := &ring{mem: mem}
	r.split(l)
	d := &Daemon{ring: r}
	d.sqHead = atomic.LoadUint32(r.word(offSQHead))
	d.sqSeen = d.sqHead // nothing seen yet: SQNext checks the tail first
	d.cqTail = atomic.LoadUint32(r.word(offCQTail))
	// The starting indices are the application's word: check them once
	// like every later one.
	if q := atomic.LoadUint32(r.word(offSQTail)) - d.sqHead; q > r.sqN {
		return nil, fmt.Errorf("%w: SQ holds %d entries at attach, more than its %d", ErrCorrupt, q, r.sqN)
	}
	if q := d.cqTail - atomic.LoadUint32(r.word(offCQHead)); q > r.cqN {
		return nil, fmt.Errorf("%w: CQ holds %d entries at attach, more than its %d", ErrCorrupt, q, r.cqN)
	}
	return d, nil
}

// Layout returns the ring's sizes.
func (r *ring) Layout() Layout { return Layout{SQEntries: r.sqN, CQEntries: r.cqN} }

// Flags returns the daemon's flags.
func (r *ring) Flags() uint32 { return atomic.LoadUint32(r.word(offFlags)) }

// Doorbells is how many doorbells the application rang.
func (r *ring) Doorbells() uint64 { return atomic.LoadUint64(r.dword(offBells)) }

// AppWakes is how many times the daemon woke a waiting application.
func (r *ring) AppWakes() uint64 { return atomic.LoadUint64(r.dword(offWakes)) }

// NeedWakeup reports whether the daemon is (about to be) asleep: a post
// must ring the doorbell.
func (r *ring) NeedWakeup() bool { return atomic.LoadUint32(r.word(offNeedWake)) != 0 }

// What the application waits for (bits of app_wait).
const (
	WaitCQ = 1 << 0 // a completion
	WaitSQ = 1 << 1 // room in the SQ
)

// WakeApp wakes the application if it waits for any of what (WaitCQ,
// WaitSQ): it swaps app_wait to 0 and wakes every waiter on the futex
// (each re-checks and waits again if its own condition is unmet). It
// reports whether it woke anyone. Both the daemon (after publishing
// completions: WaitCQ|WaitSQ; after taking work requests: WaitSQ) and the
// application's own goroutines (completions that came on the socket, the
// device's death) call it.
func (r *ring) WakeApp(what uint32) bool {
	if atomic.LoadUint32(r.word(offAppWait))&what == 0 || atomic.SwapUint32(r.word(offAppWait), 0) == 0 {
		return false
	}
	atomic.AddUint64(r.dword(offWakes), 1)
	futexWake(r.word(offAppWait))
	return true
}

// App is the application's end: it produces work requests and consumes
// completions. It is not safe for concurrent use: callers serialise
// producers and consumers (separately).
type App struct {
	*ring
	sqTail uint32 // private: the next slot to fill
	cqHead uint32 // private: the next completion to read
}

// SQReserve returns the next free SQ slot (SQSlot bytes, to be filled and
// then committed), or nil when the ring is full.
func (a *App) SQReserve() []byte {
	head := atomic.LoadUint32(a.word(offSQHead))
	if a.sqTail-head >= a.sqN {
		return nil
	}
	off := int(a.sqTail&(a.sqN-1)) * SQSlot
	return a.sq[off : off+SQSlot : off+SQSlot]
}

// SQCommit makes the reserved slot part of the batch; SQPublish hands the
// batch to the daemon.
func (a *App) SQCommit() { a.sqTail++ }

// SQPublish stores the SQ tail and reports whether the daemon sleeps, in
// which case the caller rings the doorbell (and counts it with Rang).
func (a *App) SQPublish() (needWakeup bool) {
	atomic.StoreUint32(a.word(offSQTail), a.sqTail)
	return atomic.LoadUint32(a.word(offNeedWake)) != 0
}

// SQFree is how many slots are free now.
func (a *App) SQFree() uint32 {
	return a.sqN - (a.sqTail - atomic.LoadUint32(a.word(offSQHead)))
}

// Rang counts a doorbell.
func (a *App) Rang() { atomic.AddUint64(a.dword(offBells), 1) }

// CQNext returns the next completion slot (CQSlot bytes, valid until
// CQRelease), or nil when the ring is empty. A CQ tail the daemon could
// not have written is ErrCorrupt.
func (a *App) CQNext() ([]byte, error) {
	tail := atomic.LoadUint32(a.word(offCQTail))
	q := tail - a.cqHead
	if q == 0 {
		return nil, nil
	}
	if q > a.cqN {
		return nil, fmt.Errorf("%w: CQ tail %d is %d ahead of head %d, more than its %d entries", ErrCorrupt, tail, q, a.cqHead, a.cqN)
	}
	off := int(a.cqHead&(a.cqN-1)) * CQSlot
	return a.cq[off : off+CQSlot : off+CQSlot], nil
}

// CQRelease frees the completions read so far (n of them) for the daemon.
func (a *App) CQRelease(n uint32) {
	a.cqHead += n
	atomic.StoreUint32(a.word(offCQHead), a.cqHead)
}

// CQPending reports whether completions are waiting (no validation: a
// hint for spinning; CQNext checks).
func (a *App) CQPending() bool { return atomic.LoadUint32(a.word(offCQTail)) != a.cqHead }

// SetWaiting ors what (WaitCQ or WaitSQ) into app_wait before the
// application sleeps and returns the word's new value for Wait; the caller
// must then check its condition once more before calling Wait.
func (a *App) SetWaiting(what uint32) uint32 { return atomic.OrUint32(a.word(offAppWait), what) | what }

// Daemon is the daemon's end: it consumes work requests and produces
// completions. It is not safe for concurrent use (the daemon's loop owns
// it). Its own indices live here, never re-read from shared memory.
type Daemon struct {
	*ring
	sqHead  uint32 // private: the next WR to take
	sqSeen  uint32 // the application's SQ tail as last checked
	cqTail  uint32 // private: the next slot to fill
	cqFree  uint32 // free slots as last checked
	pending uint32 // slots filled since the last CQPublish
	flags   uint32 // private copy of the published flags
}

// SQNext returns the next work request slot, or nil when the ring is empty.
// The slot is shared memory the application may still scribble on: decode
// it once into private memory and validate the copy. An SQ tail the
// application could not have written (more entries than the ring holds) is
// ErrCorrupt.
func (d *Daemon) SQNext() ([]byte, error) {
	if d.sqHead == d.sqSeen {
		tail := atomic.LoadUint32(d.word(offSQTail))
		if q := tail - d.sqHead; q > d.sqN {
			return nil, fmt.Errorf("%w: SQ tail %d is %d ahead of head %d, more than its %d entries", ErrCorrupt, tail, q, d.sqHead, d.sqN)
		}
		d.sqSeen = tail
		if d.sqHead == tail {
			return nil, nil
		}
	}
	off := int(d.sqHead&(d.sqN-1)) * SQSlot
	d.sqHead++
	return d.sq[off : off+SQSlot : off+SQSlot], nil
}

// SQRelease stores the SQ head: the slots taken are free again.
func (d *Daemon) SQRelease() { atomic.StoreUint32(d.word(offSQHead), d.sqHead) }

// SQPending reports whether work requests are waiting (the check before
// sleeping). It does not validate: SQNext does.
func (d *Daemon) SQPending() bool { return atomic.LoadUint32(d.word(offSQTail)) != d.sqHead }

// CQReserve returns the next free completion slot, or nil when the ring is
// full. A CQ head the application could not have written is ErrCorrupt.
func (d *Daemon) CQReserve() ([]byte, error) {
	if d.cqFree == 0 {
		head := atomic.LoadUint32(d.word(offCQHead))
		used := d.cqTail - head
		if used > d.cqN {
			return nil, fmt.Errorf("%w: CQ head %d is %d behind tail %d, more than its %d entries", ErrCorrupt, head, used, d.cqTail, d.cqN)
		}
		if d.cqFree = d.cqN - used; d.cqFree == 0 {
			return nil, nil
		}
	}
	off := int(d.cqTail&(d.cqN-1)) * CQSlot
	return d.cq[off : off+CQSlot : off+CQSlot], nil
}

// CQCommit adds the reserved slot to the batch.
func (d *Daemon) CQCommit() {
	d.cqTail++
	d.cqFree--
	d.pending++
}

// CQPublish stores the CQ tail and wakes the application if it waits. It
// reports whether it woke it.
func (d *Daemon) CQPublish() bool {
	if d.pending == 0 {
		return false
	}
	d.pending = 0
	atomic.StoreUint32(d.word(offCQTail), d.cqTail)
	return d.WakeApp(WaitCQ | WaitSQ)
}

// SetNeedWakeup publishes whether the daemon sleeps. After storing true
// the daemon must check SQPending once more before it sleeps.
func (d *Daemon) SetNeedWakeup(asleep bool) {
	var v uint32
	if asleep {
		v = 1
	}
	atomic.StoreUint32(d.word(offNeedWake), v)
}

// SetFlags ors f into the published flags (from the daemon's own copy:
// what the application writes there is overwritten, never read back).
func (d *Daemon) SetFlags(f uint32) {
	d.flags |= f
	atomic.StoreUint32(d.word(offFlags), d.flags)
}

// Wait sleeps on app_wait while it holds val (SetWaiting's result, after
// a last check) until the daemon or another goroutine wakes it, or timeout
// passes (negative: no limit). Spurious returns happen: re-check and loop.
func (a *App) Wait(val uint32, timeout time.Duration) { Wait(a.word(offAppWait), val, timeout) }

// WaitHeld is Wait keeping the goroutine's P, at most MaxHeldWait
// (WaitHeld, the function): for the first moments of a wait for a
// completion that is due soon.
func (a *App) WaitHeld(val uint32, timeout time.Duration) {
	WaitHeld(a.word(offAppWait), val, timeout)
}
