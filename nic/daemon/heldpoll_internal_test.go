package daemon

import (
	"runtime"
	"slices"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestHeldPollDoesNotHoldGC: a garbage collection's stop-the-world does
// not wait for a goroutine asleep in ppollHeld (its preemption signal ends
// the sleep), as heldPollMax's comment says. With the same sleep made
// deaf to that signal (SIGURG in ppoll's mask), the first collection
// waited out the sleep (189 ms of a 200 ms one, 2026-12-05).
func TestHeldPollDoesNotHoldGC(t *testing.T) {
	if runtime.GOMAXPROCS(0) < 2 {
		t.Skip("GOMAXPROCS 1: the daemon never holds its P while it sleeps")
	}
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	defer unix.Close(p[0])
	defer unix.Close(p[1])
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		fds := []unix.PollFd{{Fd: int32(p[0]), Events: unix.POLLIN}}
		ts := unix.NsecToTimespec(int64(2 * time.Second))
		for {
			select {
			case <-stop:
				return
			default:
			}
			ppollHeld(fds, &ts)
		}
	}()
	time.Sleep(20 * time.Millisecond) // let it fall asleep
	var took []time.Duration
	for range 5 {
		t0 := time.Now()
		runtime.GC()
		took = append(took, time.Since(t0))
	}
	close(stop)
	_, _ = unix.Write(p[1], []byte{1})
	<-done
	if m := slices.Max(took); m > time.Second {
		t.Errorf("a runtime.GC took %v (of %v) beside a goroutine in a 2 s held ppoll: the stop-the-world waited for the sleep", m, took)
	}
}
