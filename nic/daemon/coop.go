package daemon

import (
	"context"
	"os"
	"runtime"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/softmrc/softmrc/internal/mrc"
)

// coopNap bounds a cooperative loop's naps when its ports have no file
// descriptor to park on (in-memory pipes in tests): the longest a frame or
// a post waits while the application runs. The scheduler runs the timers
// at every goroutine switch, so the nap ends on time while another
// goroutine runs; with nothing to run, the thread sleeps in the runtime's
// poller, whose timeout is whole milliseconds.
const coopNap = 50 * time.Microsecond

// coopLoop is the loop of a cooperative daemon (Options.Cooperative): the
// same turns, on an ordinary goroutine that yields its P after each one,
// tells the application after each turn that did work (Options.Notify),
// and parks in the runtime's poller once busy_poll has passed without work.
func (d *Daemon) coopLoop(ctx context.Context) error {
	defer close(d.stopped)
	defer d.closePosts()
	// The goroutine runs on the thread it starts on until a system call
	// outlasts the runtime's patience, which the loop never makes: that
	// thread's statistics are the loop's, the application's time on it
	// included (both wait for a CPU together).
	stats := openThreadStats()
	defer stats.close()
	if d.fdPoll {
		var err error
		if d.cp, err = newCoopPoller(d.pollFDs()); err != nil {
			d.log.Warn("cooperative loop: cannot park in the runtime's poller; it naps instead (a frame may wait up to a nap)", "err", err, "nap", coopNap)
		}
	}
	defer d.cp.close()
	busy := d.begin(stats)
	lastWork := time.Now()
	for {
		if d.ended(ctx) {
			return nil
		}
		work := d.turn()
		d.wokeApp = false
		if work > 0 && d.notify != nil {
			d.notify()
		}
		// A goroutine this turn made runnable (the application waiting
		// for its completions) runs now, on this thread.
		runtime.Gosched()
		if work > 0 {
			lastWork = time.Now()
			continue
		}
		if time.Since(lastWork) < busy && d.spin.allow(d.clk.wall()) {
			d.c.spinTurns.Add(1)
			continue
		}
		d.coopIdle(ctx)
	}
}

// pollFDs are the file descriptors an idle loop waits on: every port's and
// the eventfd that requests and the applications' posts write (wake).
func (d *Daemon) pollFDs() []int {
	fds := make([]int, 0, len(d.ports)+1)
	for _, p := range d.ports {
		fds = append(fds, p.(interface{ FD() int }).FD())
	}
	return append(fds, d.evfd)
}

// coopIdle is idle for a cooperative loop: kick what the ports hold, then
// wait until a port is readable, a request or a post comes (wake), or the
// engine's next deadline, leaving the P to the application meanwhile. It
// never blocks in a system call: a thread blocked there keeps the program's
// only P until the runtime's monitor takes it back (20 µs to 10 ms).
func (d *Daemon) coopIdle(ctx context.Context) {
	now := d.now()
	dl := d.nextDeadline(now)
	wait := 100 * time.Millisecond // ctx is checked at least this often
	if dl != mrc.Never {
		wait = min(wait, time.Duration(dl-now))
	}
	if d.cp == nil {
		wait = min(wait, coopNap)
	}
	if wait <= 0 {
		return
	}
	for _, p := range d.ports {
		_ = p.Wait(0) // kicks pending transmissions and reclaims completions
	}
	// Posts and requests that come from now on write the eventfd (wake);
	// one more look catches what raced the flag.
	d.sleep.Store(true)
	defer d.sleep.Store(false)
	if len(d.cmds) > 0 || d.pq.n.Load() > 0 || d.ringsPending() || ctx.Err() != nil {
		return
	}
	d.c.sleeps.Add(1)
	slept := time.Now()
	if d.cp != nil {
		if d.cp.wait(wait, d.evfd) {
			d.c.wakes.Add(1)
		}
	} else {
		time.Sleep(wait)
	}
	s := time.Since(slept)
	d.clk.asleep(s)
	d.gapSlept += mrc.Time(min(s, wait))
}

// Wake wakes the loop if it sleeps. A cooperative NIC's application calls
// it after it posts (nic/inprocess): its rings never ask for a doorbell.
func (d *Daemon) Wake() { d.wake() }

// coopPoller parks the cooperative loop's goroutine in the Go runtime's
// poller until one of a set of file descriptors is readable: an epoll
// instance holding them, itself registered with the runtime's poller
// through an os.File. A frame or a post wakes the loop at once, and while
// it waits the thread runs the application or, with nothing to run, sleeps
// in the runtime's own epoll_wait.
type coopPoller struct {
	epfd int
	f    *os.File
	rc   syscall.RawConn
	evs  [8]unix.EpollEvent
	n    int
}

func newCoopPoller(fds []int) (*coopPoller, error) {
	epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return nil, err
	}
	for _, fd := range fds {
		if err := unix.EpollCtl(epfd, unix.EPOLL_CTL_ADD, fd, &unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(fd)}); err != nil {
			unix.Close(epfd)
			return nil, err
		}
	}
	// Non-blocking, so that os.NewFile registers it with the runtime's
	// poller (an epoll instance is readable while events are ready).
	if err := unix.SetNonblock(epfd, true); err != nil {
		unix.Close(epfd)
		return nil, err
	}
	p := &coopPoller{epfd: epfd, f: os.NewFile(uintptr(epfd), "mrc-nicd-coop-epoll")}
	if err := p.f.SetReadDeadline(time.Time{}); err != nil {
		p.f.Close() // not pollable: the caller naps instead
		return nil, err
	}
	if p.rc, err = p.f.SyscallConn(); err != nil {
		p.f.Close()
		return nil, err
	}
	return p, nil
}

// wait parks the calling goroutine until a descriptor is readable or d
// passes, then reads the eventfd evfd if it was among them; it reports
// whether it was.
func (p *coopPoller) wait(d time.Duration, evfd int) bool {
	p.n = 0
	_ = p.f.SetReadDeadline(time.Now().Add(d))
	_ = p.rc.Read(func(uintptr) bool {
		n, err := unix.EpollWait(p.epfd, p.evs[:], 0)
		if err != nil || n <= 0 {
			return false // nothing ready (or EINTR): park until there is
		}
		p.n = n
		return true
	})
	woken := false
	for _, ev := range p.evs[:p.n] {
		if int(ev.Fd) == evfd {
			var b [8]byte
			_, _ = unix.Read(evfd, b[:])
			woken = true
		}
	}
	return woken
}

func (p *coopPoller) close() {
	if p != nil {
		p.f.Close()
	}
}
