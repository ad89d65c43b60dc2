package daemon

import (
	"errors"
	"fmt"
	"os"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/softmrc/softmrc/internal/mrc"
	"github.com/softmrc/softmrc/nic/service"
	"github.com/softmrc/softmrc/nic/shmring"
	"github.com/softmrc/softmrc/nic/vproto"
)

// The Daemon serves sessions through shared-memory rings.
var _ service.RingNIC = (*Daemon)(nil)

// ringSession is one session's shared-memory rings (nic/shmring), as the
// loop sees them: posts are taken from the SQ every loop turn, completions
// are written to the CQ, and the doorbell eventfd is polled while the loop
// sleeps. Loop-only after AttachRing hands it over.
type ringSession struct {
	owner    uint32
	r        *shmring.Daemon
	mem      []byte
	bell     int  // the application's doorbell eventfd (our dup)
	overflow bool // the CQ was full once: completions go on the socket from then on
	failed   bool
}

// maxRingBytes bounds the memory a session may ask the daemon to map for
// its rings (the largest layout nic/shmring allows, rounded up).
const maxRingBytes = 128 << 20

// ringBudget bounds the work requests taken from one ring per loop turn,
// so that one busy session cannot starve the ports or the others.
const ringBudget = 256

// AttachRing maps owner's ring memfd and keeps a dup of its doorbell
// eventfd: from then on the loop serves the session's posts and
// completions through shared memory. The memfd must be sealed against
// shrinking (a shrunk mapping would fault the daemon) and the doorbell
// must be an eventfd.
func (d *Daemon) AttachRing(owner uint32, memfd, doorbell int, req vproto.Ring) (err error) {
	if req.Size < shmring.HeaderLen || req.Size > maxRingBytes {
		return fmt.Errorf("ring size %d bytes: want %d .. %d", req.Size, shmring.HeaderLen, maxRingBytes)
	}
	seals, err := unix.FcntlInt(uintptr(memfd), unix.F_GET_SEALS, 0)
	if err != nil {
		return fmt.Errorf("the ring descriptor is not a sealable memfd (F_GET_SEALS: %v): create it with memfd_create(MFD_ALLOW_SEALING)", err)
	}
	if seals&unix.F_SEAL_SHRINK == 0 {
		return errors.New("the ring memfd is not sealed against shrinking: add F_SEAL_SHRINK before passing it")
	}
	var st unix.Stat_t
	if err := unix.Fstat(memfd, &st); err != nil {
		return fmt.Errorf("stat the ring memfd: %w", err)
	}
	if st.Size < int64(req.Size) {
		return fmt.Errorf("the ring memfd holds %d bytes, fewer than the %d announced", st.Size, req.Size)
	}
	if l, _ := os.Readlink("/proc/self/fd/" + strconv.Itoa(doorbell)); l != "anon_inode:[eventfd]" {
		return fmt.Errorf("the doorbell descriptor is %q, not an eventfd", l)
	}
	mem, err := unix.Mmap(memfd, 0, req.Size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return fmt.Errorf("map the ring memfd (%d bytes): %w", req.Size, err)
	}
	rs := &ringSession{owner: owner, mem: mem, bell: -1}
	defer func() {
		if err != nil {
			rs.close()
		}
	}()
	if rs.r, err = shmring.Attach(mem); err != nil {
		return err
	}
	if rs.bell, err = unix.FcntlInt(uintptr(doorbell), unix.F_DUPFD_CLOEXEC, 0); err != nil {
		return fmt.Errorf("dup the doorbell eventfd: %w", err)
	}
	// The loop reads the doorbell only after poll says it is readable, but
	// a read must never block the loop whatever the application set.
	if err := unix.SetNonblock(rs.bell, true); err != nil {
		return fmt.Errorf("doorbell eventfd: %w", err)
	}
	if e := d.exec(func() {
		if d.rings[owner] != nil {
			err = errors.New("this session already has a ring")
			return
		}
		d.rings[owner] = rs
		d.ringList = append(d.ringList, rs)
	}); e != nil {
		return e
	}
	return err
}

func (rs *ringSession) close() {
	if rs.mem != nil {
		_ = unix.Munmap(rs.mem)
		rs.mem = nil
	}
	if rs.bell >= 0 {
		unix.Close(rs.bell)
		rs.bell = -1
	}
}

// drainRings takes the work requests every ring holds (up to ringBudget
// each) and posts them like the socket's. Each slot is decoded once into
// a private WR and checked like any post (owner, opcode, length; the
// engine checks the lkey range); a bad index fails the session.
func (d *Daemon) drainRings(now mrc.Time) int {
	total := 0
	failed := false
	for _, rs := range d.ringList {
		n := 0
		for n < ringBudget {
			s, err := rs.r.SQNext()
			if err != nil {
				d.failRing(rs, err)
				failed = true
				break
			}
			if s == nil {
				break
			}
			var w vproto.WR
			w.Get(s)
			d.post(now, rs.owner, &w)
			n++
		}
		if n > 0 && !rs.failed {
			rs.r.SQRelease()
			// A poster waiting for SQ room (only: a thread waiting
			// for completions is not woken by its own posts).
			if rs.r.WakeApp(shmring.WaitSQ) {
				d.c.appWakes.Add(1)
				d.wokeApp = true
			}
		}
		total += n
	}
	if failed {
		d.dropFailedRings()
	}
	if total > 0 {
		d.c.ringPosts.Add(uint64(total))
		d.forwardPosts()
		d.flushDeliveries()
	}
	return total
}

// failRing stops serving a ring the application corrupted and ends its
// session (on its own goroutine: the farewell message may block a second).
func (d *Daemon) failRing(rs *ringSession, err error) {
	d.c.ringFailures.Add(1)
	rs.failed = true
	rs.r.SetFlags(shmring.FlagFailed)
	reason := fmt.Sprintf("shared-memory ring of session %d: %v; the session is closed (a bug or memory corruption in the application)", rs.owner, err)
	d.log.Warn("daemon: closing a session with a corrupt ring", "session", rs.owner, "err", err)
	go d.svc.Fail(rs.owner, reason)
}

// dropFailedRings removes failed rings from the loop and unmaps them.
func (d *Daemon) dropFailedRings() {
	kept := d.ringList[:0]
	for _, rs := range d.ringList {
		if rs.failed {
			delete(d.rings, rs.owner)
			rs.close()
			continue
		}
		kept = append(kept, rs)
	}
	clear(d.ringList[len(kept):])
	d.ringList = kept
}

// detachRing forgets owner's ring (its session ended); loop only.
func (d *Daemon) detachRing(owner uint32) {
	if rs := d.rings[owner]; rs != nil {
		rs.failed = true // not a failure: just marked for removal
		d.dropFailedRings()
	}
}

// ringDeliver writes cqes into rs's CQ and returns those that did not fit.
// A full CQ switches the session to socket delivery for good (the
// application reads the ring before the socket, so order holds).
func (d *Daemon) ringDeliver(rs *ringSession, cqes []vproto.CQE) []vproto.CQE {
	i := 0
	for ; i < len(cqes); i++ {
		s, err := rs.r.CQReserve()
		if err != nil {
			d.failRing(rs, err)
			d.dropFailedRings()
			return cqes[i:]
		}
		if s == nil {
			rs.overflow = true
			rs.r.SetFlags(shmring.FlagCQOverflow)
			d.c.ringOverflows.Add(1)
			d.log.Warn("daemon: a session's completion ring is full; its completions go on the socket from now on", "session", rs.owner)
			break
		}
		cqes[i].Put(s)
		rs.r.CQCommit()
	}
	if rs.r.CQPublish() {
		d.c.appWakes.Add(1)
		d.wokeApp = true
	}
	return cqes[i:]
}

// ringsAsleep publishes need_wakeup on every ring (the loop is about to
// sleep, or awake again).
func (d *Daemon) ringsAsleep(asleep bool) {
	for _, rs := range d.ringList {
		rs.r.SetNeedWakeup(asleep)
	}
}

// ringsPending reports whether a ring holds work requests (the last check
// after publishing need_wakeup).
func (d *Daemon) ringsPending() bool {
	for _, rs := range d.ringList {
		if rs.r.SQPending() {
			return true
		}
	}
	return false
}

// closeRings unmaps every ring (the loop has ended).
func (d *Daemon) closeRings() {
	for _, rs := range d.ringList {
		rs.close()
	}
	d.ringList = nil
	clear(d.rings)
}
