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
// re-check their condition in a loop.
func Wait(word *uint32, val uint32, timeout time.Duration) {
	var ts *syscall.Timespec
	if timeout >= 0 {
		t := syscall.NsecToTimespec(int64(timeout))
		ts = &t
	}
	_, _, _ = syscall.Syscall6(syscall.SYS_FUTEX, uintptr(unsafe.Pointer(word)), opFutexWait, uintptr(val),
		uintptr(unsafe.Pointer(ts)), 0, 0)
}

// futexWake wakes every waiter on word (several application goroutines
// may wait on one ring: a poller and a poster waiting for SQ room).
func futexWake(word *uint32) {
	_, _, _ = syscall.Syscall6(syscall.SYS_FUTEX, uintptr(unsafe.Pointer(word)), opFutexWake, uintptr(1<<31-1), 0, 0, 0)
}
