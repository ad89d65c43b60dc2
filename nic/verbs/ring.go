package verbs

import (
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/softmrc/softmrc/nic/shmring"
	"github.com/softmrc/softmrc/nic/vproto"
)

// Options configure OpenWith.
type Options struct {
	// Spin is how long WaitCQ (and NextCompletion) keep polling the
	// completion ring before they sleep on it; 0 sleeps at once. Spinning
	// saves the wake-up of a completion that comes within the budget, at
	// the cost of a CPU for the budget. Only with the ring (the socket
	// path always sleeps).
	Spin time.Duration
	// HeldWait is how long, after the spin, WaitCQ sleeps on the
	// completion ring without handing its P back to the Go scheduler
	// (shmring.WaitHeld), at most shmring.MaxHeldWait; after that it
	// sleeps as an ordinary blocking system call. 0 never holds the P.
	// Holding it saves the runtime's monitor thread taking the P away
	// and waking another OS thread during every wait longer than 20 µs
	// (with GOMAXPROCS=1, as the perftest-like tools run, that was two
	// to three more thread wake-ups per completion: docs/nic.md, The
	// latency path). Only with the ring.
	HeldWait time.Duration
	// NoRing keeps the session on the device socket: posts are messages
	// and completions come back as messages (the path of daemons older
	// than the rings, which the library falls back to by itself).
	NoRing bool
	// Layout is the ring sizes (zero: shmring.DefaultLayout).
	Layout shmring.Layout
	// Cooperative is for a device whose daemon runs in this process on
	// the same single P (nic/daemon Options.Cooperative, GOMAXPROCS=1;
	// nic/inprocess sets this and the two hooks below): waits never block
	// in the kernel, where they would keep the P from the daemon's loop.
	// WaitCQ yields the P (runtime.Gosched) for Spin, so the loop runs a
	// turn between two looks at the ring, and then parks on Notify (or,
	// without it, naps 50 µs at a time); HeldWait is not used. Only with
	// the ring.
	Cooperative bool
	// Notify, with Cooperative, receives a value after each of the loop's
	// turns that did work (nic/daemon Options.Notify): a wait parks on it.
	Notify <-chan struct{}
	// Kick, with Cooperative, is called after each post: it wakes the loop
	// if it sleeps (nic/daemon Daemon.Wake), in place of the doorbell.
	Kick func()
}

// coopNap is the longest nap of a cooperative wait (Options.Cooperative),
// nic/daemon's own bound: the wait's timer ends it on time while the loop
// yields the P.
const coopNap = 50 * time.Microsecond

// DefaultSpin is Open's completion spin budget, chosen by measurement on a
// 2-vCPU VM shared with other load (docs/performance.md): spinning did not
// pay there, because the spinner takes the CPU the daemon needs.
const DefaultSpin = 0

// DefaultHeldWait is Open's HeldWait when the program runs with one P
// (GOMAXPROCS=1, as the perftest-like tools do): a latency test's
// completion comes within tens of µs, and a millisecond bounds how long
// other goroutines (and a garbage collection) can wait for the sleeper.
// With more Ps Open does not hold one: an idle P spares the waiter the
// monitor's hand-off, and several goroutines waiting at once (the ranks of
// an in-process collective) would keep the Ps the others need.
const DefaultHeldWait = shmring.MaxHeldWait

// DefaultOptions are Open's: DefaultSpin, DefaultHeldWait (with one P,
// else 0) and the shared-memory rings, overridden by the environment:
// MRC_VERBS_SPIN (a duration, e.g. 20us), MRC_VERBS_HELD_WAIT (a duration
// from 0 to 1ms) and MRC_VERBS_RING=0 (stay on the socket). The variables
// let a test harness or a user try both without rebuilding the
// application.
func DefaultOptions() (Options, error) {
	o := Options{Spin: DefaultSpin}
	if runtime.GOMAXPROCS(0) == 1 {
		o.HeldWait = DefaultHeldWait
	}
	if v := os.Getenv("MRC_VERBS_SPIN"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 || d > time.Second {
			return o, fmt.Errorf("verbs: MRC_VERBS_SPIN=%q: want a duration from 0 to 1s, e.g. 20us", v)
		}
		o.Spin = d
	}
	if v := os.Getenv("MRC_VERBS_HELD_WAIT"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 || d > shmring.MaxHeldWait {
			return o, fmt.Errorf("verbs: MRC_VERBS_HELD_WAIT=%q: want a duration from 0 to %v, e.g. 500us (0: never hold the P)", v, shmring.MaxHeldWait)
		}
		o.HeldWait = d
	}
	switch v := os.Getenv("MRC_VERBS_RING"); v {
	case "", "1":
	case "0":
		o.NoRing = true
	default:
		return o, fmt.Errorf("verbs: MRC_VERBS_RING=%q: want 0 (socket only) or 1", v)
	}
	return o, nil
}

// ring is the device's shared-memory path (nic/shmring): the mapping, the
// application end and the doorbell eventfd.
type ring struct {
	app  *shmring.App
	mem  []byte
	bell int
}

// attachRing creates the rings in a sealed memfd and asks the daemon to
// serve the session through them. An error leaves the session on the
// socket.
func (d *Device) attachRing(l shmring.Layout) (err error) {
	if l == (shmring.Layout{}) {
		l = shmring.DefaultLayout
	}
	if err := l.Check(); err != nil {
		return err
	}
	size := l.Size()
	fd, err := unix.MemfdCreate("mrc-ring", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return fmt.Errorf("memfd_create: %w", err)
	}
	defer unix.Close(fd) // the mapping and the daemon's keep the memory
	if err := unix.Ftruncate(fd, int64(size)); err != nil {
		return fmt.Errorf("grow the ring memfd to %d bytes: %w", size, err)
	}
	// Sealed so that the daemon's mapping can never fault on a shrunk file.
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, unix.F_SEAL_SHRINK|unix.F_SEAL_GROW|unix.F_SEAL_SEAL); err != nil {
		return fmt.Errorf("seal the ring memfd: %w", err)
	}
	mem, err := unix.Mmap(fd, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return fmt.Errorf("map the ring memfd: %w", err)
	}
	r := &ring{mem: mem, bell: -1}
	defer func() {
		if err != nil {
			r.close()
		}
	}()
	if r.app, err = shmring.Init(mem, l); err != nil {
		return err
	}
	if r.bell, err = unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC); err != nil {
		return fmt.Errorf("doorbell eventfd: %w", err)
	}
	if err := d.callFDs(vproto.TypeRing, vproto.Ring{Size: size}, []int{fd, r.bell}, nil); err != nil {
		return err
	}
	// The reader goroutine (wakeRingLocked) reads d.ring under d.mu.
	d.rmu.Lock()
	d.mu.Lock()
	d.ring = r
	d.mu.Unlock()
	d.rmu.Unlock()
	return nil
}

func (r *ring) close() {
	if r.mem != nil {
		_ = unix.Munmap(r.mem)
		r.mem = nil
	}
	if r.bell >= 0 {
		unix.Close(r.bell)
		r.bell = -1
	}
}

// Ring reports whether the session posts and completes through the
// shared-memory rings (false: the device socket).
func (d *Device) Ring() bool {
	d.rmu.RLock()
	defer d.rmu.RUnlock()
	return d.ring != nil
}

// RingStats are the shared-memory path's counters.
type RingStats struct {
	// Doorbells: posts that found the daemon asleep and woke it.
	Doorbells uint64
	// Wakes: times the daemon woke this application from its futex.
	Wakes uint64
}

// RingStats returns the ring's counters (zero without a ring).
func (d *Device) RingStats() RingStats {
	d.rmu.RLock()
	defer d.rmu.RUnlock()
	if d.ring == nil {
		return RingStats{}
	}
	return RingStats{Doorbells: d.ring.app.Doorbells(), Wakes: d.ring.app.AppWakes()}
}

// wakeRingLocked wakes the application's own sleepers on the ring (a
// completion came on the socket, or the device died). d.mu held: Close
// unmaps under it.
func (d *Device) wakeRingLocked() {
	if d.ring != nil && d.ring.mem != nil {
		d.ring.app.WakeApp(shmring.WaitCQ | shmring.WaitSQ)
	}
}

// postRing writes wrs into the SQ and rings the doorbell only when the
// daemon sleeps. Called with rmu read-locked and every WR checked.
func (qp *QP) postRing(r *ring, wrs []SendWR) error {
	d := qp.d
	d.sqmu.Lock()
	defer d.sqmu.Unlock()
	for i := range wrs {
		s, err := d.sqSlot(r)
		if err != nil {
			return err
		}
		wr := qp.wireWR(&wrs[i])
		wr.Put(s)
		r.app.SQCommit()
	}
	d.publish(r)
	return nil
}

// sqSlot reserves the next SQ slot; while the SQ is full it hands the
// daemon what is there and waits for room. Called with sqmu held.
func (d *Device) sqSlot(r *ring) ([]byte, error) {
	for {
		if s := r.app.SQReserve(); s != nil {
			return s, nil
		}
		if err := d.waitSQRoom(r); err != nil {
			return nil, err
		}
	}
}

// wireWR is a checked work request as the daemon reads it (vproto.WR).
func (qp *QP) wireWR(w *SendWR) vproto.WR {
	var addr uint64
	var lkey uint32
	if w.Local != nil {
		addr, lkey = w.Local.Addr+w.Offset, w.Local.LKey
	}
	flags := vproto.FlagSignaled
	if w.Unsignaled {
		flags = 0
	}
	return vproto.WR{ID: w.ID, QPN: qp.QPN, Op: w.Op, Flags: flags, LocalAddr: addr, LKey: lkey,
		Len: w.Len, RemoteAddr: w.RemoteAddr, RKey: w.RKey, Imm: w.Imm}
}

// postRawRing is PostRaw on the ring.
func (d *Device) postRawRing(r *ring, wrs []vproto.WR) error {
	d.sqmu.Lock()
	defer d.sqmu.Unlock()
	for i := range wrs {
		s, err := d.sqSlot(r)
		if err != nil {
			return err
		}
		wrs[i].Put(s)
		r.app.SQCommit()
	}
	d.publish(r)
	return nil
}

// publish stores the SQ tail and rings the doorbell if the daemon sleeps
// (a cooperative device's loop: Kick).
func (d *Device) publish(r *ring) {
	need := r.app.SQPublish()
	if d.kick != nil {
		d.kick()
		return
	}
	if need {
		r.app.Rang()
		one := [8]byte{1}
		_, _ = unix.Write(r.bell, one[:]) // EAGAIN: the counter is full, the daemon is awake anyway
	}
}

// waitSQRoom publishes what the SQ holds and sleeps until the daemon takes
// some (it wakes the futex after taking work requests).
func (d *Device) waitSQRoom(r *ring) error {
	for {
		d.publish(r)
		if r.app.SQFree() > 0 {
			return nil
		}
		if d.coop {
			// The daemon's loop takes the work once it has the P and says
			// so on Notify; the futex flag would only cost it a wake call.
			if d.dead.Load() {
				return d.deadErr()
			}
			d.coopPause(time.Now().Add(100 * time.Millisecond))
			continue
		}
		v := r.app.SetWaiting(shmring.WaitSQ)
		if r.app.SQFree() > 0 {
			return nil
		}
		if d.dead.Load() {
			return d.deadErr()
		}
		// Bounded: a daemon that stopped taking work is noticed through
		// the socket (dead), checked every round.
		r.app.Wait(v, 100*time.Millisecond)
	}
}

// pollRing moves completions from the CQ into out; d.mu held.
func (d *Device) pollRing(r *ring, out []Completion) (int, error) {
	n := 0
	for n < len(out) {
		s, err := r.app.CQNext()
		if err != nil {
			return n, err
		}
		if s == nil {
			break
		}
		out[n].Get(s)
		r.app.CQRelease(1)
		n++
	}
	return n, nil
}

// waitRing is WaitCQ on the ring: spin for the budget, then sleep on the
// futex until the daemon (or the reader, for socket completions and the
// device's death) wakes it, keeping the P for the first HeldWait.
func (d *Device) waitRing(r *ring, timeout time.Duration) (bool, error) {
	start := time.Now()
	ready := func() bool {
		if r.app.CQPending() {
			return true
		}
		d.mu.Lock()
		n := len(d.cq)
		d.mu.Unlock()
		return n > 0
	}
	if d.coop {
		return d.waitRingCoop(r, timeout, start, ready)
	}
	if d.spin > 0 {
		for i := 0; ; i++ {
			if r.app.CQPending() {
				return true, nil
			}
			if i&63 == 63 {
				if d.dead.Load() || time.Since(start) >= d.spin || ready() {
					break
				}
			}
		}
	}
	for {
		if ready() {
			return true, nil
		}
		if d.dead.Load() {
			return false, d.deadErr()
		}
		wait := 100 * time.Millisecond
		if timeout >= 0 {
			left := timeout - time.Since(start)
			if left <= 0 {
				return false, nil
			}
			wait = min(wait, left)
		}
		v := r.app.SetWaiting(shmring.WaitCQ)
		if ready() || d.dead.Load() {
			continue
		}
		if held := d.heldWait - time.Since(start); held > 0 {
			r.app.WaitHeld(v, min(wait, held))
			continue
		}
		r.app.Wait(v, wait)
	}
}

// waitRingCoop is waitRing for a cooperative device: yield the P to the
// daemon's loop between looks for Spin, then park until the loop did work
// (Options.Cooperative).
func (d *Device) waitRingCoop(r *ring, timeout time.Duration, start time.Time, ready func() bool) (bool, error) {
	for i := 0; ; i++ {
		if r.app.CQPending() {
			return true, nil
		}
		if i&15 == 15 && ready() {
			return true, nil
		}
		if d.dead.Load() {
			return false, d.deadErr()
		}
		since := time.Since(start)
		if timeout >= 0 && since >= timeout {
			return ready(), nil
		}
		if since < d.spin {
			runtime.Gosched()
			continue
		}
		// From now, not from the wait's start: d.dead is checked at least
		// every 100 ms, and a pause never ends at once.
		until := time.Now().Add(100 * time.Millisecond)
		if end := start.Add(timeout); timeout >= 0 && end.Before(until) {
			until = end
		}
		d.coopPause(until)
	}
}

// coopPause waits, without blocking in the kernel, until the daemon's loop
// did work (Notify) or until passes; without Notify it naps.
func (d *Device) coopPause(until time.Time) {
	left := time.Until(until)
	if left <= 0 {
		return
	}
	if d.notify == nil {
		time.Sleep(min(coopNap, left))
		return
	}
	t := coopTimers.Get().(*time.Timer)
	t.Reset(left)
	select {
	case <-d.notify:
	case <-t.C:
	}
	t.Stop() // since Go 1.23 a stopped timer's channel holds no stale value
	coopTimers.Put(t)
}

// coopTimers spares each cooperative wait a timer allocation; waits on
// one device may run at once (several goroutines in WaitCQ).
var coopTimers = sync.Pool{New: func() any {
	t := time.NewTimer(time.Hour)
	t.Stop()
	return t
}}

// closeRing unmaps the ring once no caller uses it.
func (d *Device) closeRing() {
	d.rmu.Lock()
	defer d.rmu.Unlock()
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.ring != nil {
		d.ring.close()
		d.ring = nil
	}
}

// ringFallback logs why the session stays on the socket.
func ringFallback(path string, err error) {
	slog.Debug("verbs: shared-memory rings not in use; posting through the device socket", "device", path, "err", err)
}
