package xsk

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// kicker makes a Socket's transmit kicks on a thread of its own
// (SocketConfig.KickThread). In copy mode the kick is where the transmit
// happens: sendto runs the kernel's copy-mode transmit, and on a veth also
// the peer's XDP program and the copy into the peer's UMEM, all charged to
// the calling thread. That is about 60 % of a sending mrc-nicd's CPU
// (docs/nic.md, "where time goes"). On a thread of its own it runs beside the
// engine's encode, on another core.
//
// Only the ring indexes are shared: the owner publishes the tx producer index
// (ring.submit, an atomic store) and pokes; the kicker reads both indexes
// atomically and never touches the owner's cached views. Completions are
// still collected by the owner (reclaim).
type kicker struct {
	fd      int
	ifindex int
	queue   int
	prod    *uint32 // the tx ring's producer and consumer indexes
	cons    *uint32
	flags   *uint32
	budget  bool // one sendto drains the ring (XDP_MAX_TX_SKB_BUDGET)
	c       *counters
	wake    chan struct{}
	stop    chan struct{}
	done    sync.WaitGroup
	asleep  atomic.Bool
	err     atomic.Pointer[error] // the first fatal kick error
	pokes   atomic.Uint64         // pokes that had to wake the thread
}

func newKicker(s *Socket) *kicker {
	k := &kicker{fd: s.fd, ifindex: s.ifindex, queue: s.queue,
		prod: s.tx.prod, cons: s.tx.cons, flags: s.tx.flags, budget: s.txBudget, c: &s.c,
		wake: make(chan struct{}, 1), stop: make(chan struct{})}
	k.done.Add(1)
	go k.run()
	return k
}

// outstanding is what the kernel has not consumed of the tx ring.
func (k *kicker) outstanding() uint32 {
	return atomic.LoadUint32(k.prod) - atomic.LoadUint32(k.cons)
}

func (k *kicker) needWakeup() bool {
	return atomic.LoadUint32(k.flags)&unix.XDP_RING_NEED_WAKEUP != 0
}

// poke tells the kicker the ring has new frames. It costs a channel send
// only while the kicker sleeps; a busy kicker sees the new producer index
// on its own.
func (k *kicker) poke() error {
	if e := k.err.Load(); e != nil {
		return *e
	}
	if k.asleep.Load() && k.asleep.CompareAndSwap(true, false) {
		k.pokes.Add(1)
		select {
		case k.wake <- struct{}{}:
		default:
		}
	}
	return nil
}

func (k *kicker) close() {
	close(k.stop)
	k.done.Wait()
}

func (k *kicker) run() {
	defer k.done.Done()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	for {
		k.drain()
		// Sleep, then look once more: a poke between the last look and
		// the store of asleep found the kicker awake and sent nothing.
		k.asleep.Store(true)
		if k.outstanding() != 0 && k.needWakeup() && k.asleep.CompareAndSwap(true, false) {
			continue
		}
		select {
		case <-k.wake:
		case <-k.stop:
			return
		}
	}
}

// drain kicks while the kernel leaves frames on the ring and wants a kick.
// A kick that makes no progress (EAGAIN, EBUSY with the ring unchanged) is
// retried a bounded number of times; what is left goes with the next poke,
// as Socket.kick leaves it for the next Send or Wait.
func (k *kicker) drain() {
	stuck := 0
	for stuck < 8 {
		select {
		case <-k.stop:
			return
		default:
		}
		if k.outstanding() == 0 || !k.needWakeup() {
			return
		}
		before := atomic.LoadUint32(k.cons)
		k.c.kicks.Add(1)
		_, _, errno := unix.Syscall6(unix.SYS_SENDTO, uintptr(k.fd), 0, 0, unix.MSG_DONTWAIT, 0, 0)
		switch errno {
		case 0, unix.EINTR, unix.EAGAIN:
		case unix.EBUSY, unix.ENOBUFS:
			k.c.txKickErrors.Add(1)
		default:
			k.c.txKickErrors.Add(1)
			err := fmt.Errorf("xsk: transmit kick on ifindex %d queue %d: %w (interface down or gone?)", k.ifindex, k.queue, errno)
			k.err.CompareAndSwap(nil, &err)
			return
		}
		if atomic.LoadUint32(k.cons) == before {
			stuck++
		} else {
			stuck = 0
		}
	}
}
