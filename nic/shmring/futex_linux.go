package shmring

import (
	"syscall"
	"time"
	"unsafe"
)

// futex(2) operations on a word in shared memory. Not FUTEX_PRIVATE: the
// daemon and the application map the word in different processes, and the
// kernel keys a shared futex by the page it lives in.
const (
	opFutexWait = 0
	opFutexWake = 1
)

// Wait sleeps while *word == val, at most timeout (negative: no limit), or
// until a wake. It returns early on a spurious wake-up or a signal: callers
// re-check their condition in a loop. The goroutine's P is released for
// the sleep (an ordinary blocking system call).
func Wait(word *uint32, val uint32, timeout time.Duration) {
	var ts *syscall.Timespec
	if timeout >= 0 {
		t := syscall.NsecToTimespec(int64(timeout))
		ts = &t
	}
	_, _, _ = syscall.Syscall6(syscall.SYS_FUTEX, uintptr(unsafe.Pointer(word)), opFutexWait, uintptr(val),
		uintptr(unsafe.Pointer(ts)), 0, 0)
}

// MaxHeldWait bounds WaitHeld's sleep: while it sleeps, no other goroutine
// runs on its P, the garbage collector's stop-the-world may wait for it
// (on kernel 6.18 the runtime's preemption signal ended a held timed
// FUTEX_WAIT with EINTR although its handlers are SA_RESTART, tried beside
// nic/daemon TestHeldPollDoesNotHoldGC; a kernel that restarted the wait
// would hold the stop-the-world for the rest of it), and with
// GOMAXPROCS=1 the rest of the program stands still.
const MaxHeldWait = time.Millisecond

// WaitHeld is Wait without handing the goroutine's P back to the Go
// scheduler (a raw system call), for at most MaxHeldWait. A blocking
// system call that lasts more than 20 µs has its P taken away by the
// runtime's monitor thread (sysmon), which then starts another OS thread
// to look for work; when the call returns, the waiter takes a P back.
// With GOMAXPROCS=1 that is two or three more thread wake-ups for every
// completion waited for, and sysmon never slows its 20 µs polling
// (docs/nic.md, The latency path). A short wait for a completion that is
// due soon pays none of that; a long wait should be Wait.
func WaitHeld(word *uint32, val uint32, timeout time.Duration) {
	if timeout < 0 || timeout > MaxHeldWait {
		timeout = MaxHeldWait
	}
	t := syscall.NsecToTimespec(int64(timeout))
	_, _, _ = syscall.RawSyscall6(syscall.SYS_FUTEX, uintptr(unsafe.Pointer(word)), opFutexWait, uintptr(val),
		uintptr(unsafe.Pointer(&t)), 0, 0)
}

// Wake wakes every thread in Wait or WaitHeld on word.
func Wake(word *uint32) { futexWake(word) }

// futexWake wakes every waiter on word (several application goroutines
// may wait on one ring: a poller and a poster waiting for SQ room).
func futexWake(word *uint32) {
	_, _, _ = syscall.Syscall6(syscall.SYS_FUTEX, uintptr(unsafe.Pointer(word)), opFutexWake, uintptr(1<<31-1), 0, 0, 0)
}
