package verbs

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/softmrc/softmrc/nic/shmring"
)

// threadSwitches returns the context switches of every thread of this
// process but tid, from /proc/self/task/*/status.
func threadSwitches(t *testing.T, tid int) uint64 {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/task")
	if err != nil {
		t.Fatalf("reading /proc/self/task: %v", err)
	}
	var n uint64
	for _, e := range ents {
		if e.Name() == strconv.Itoa(tid) {
			continue
		}
		b, err := os.ReadFile(fmt.Sprintf("/proc/self/task/%s/status", e.Name()))
		if err != nil {
			continue // the thread exited
		}
		for _, l := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(l, ":"); ok && strings.HasSuffix(k, "ctxt_switches") {
				x, _ := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
				n += x
			}
		}
	}
	return n
}

// TestWaitCQKeepsOtherThreadsAsleep waits on an empty completion ring with
// one P, as mrc-write-lat runs, and counts the context switches of the
// process's other threads. A wait made as an ordinary blocking system call
// lets the runtime's monitor take the P away after 20 µs and start another
// thread to look for work, two or three more thread wake-ups per wait on
// the latency path; the held wait (Options.HeldWait) makes none.
// MRC_VERBS_HELD_WAIT=0 runs the old path, which fails the check.
func TestWaitCQKeepsOtherThreadsAsleep(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	o, err := DefaultOptions()
	if err != nil {
		t.Fatal(err)
	}
	mem, err := unix.Mmap(-1, 0, shmring.DefaultLayout.Size(), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_ANONYMOUS)
	if err != nil {
		t.Fatalf("mmap: %v", err)
	}
	defer unix.Munmap(mem)
	app, err := shmring.Init(mem, shmring.DefaultLayout)
	if err != nil {
		t.Fatal(err)
	}
	d := &Device{ring: &ring{app: app, mem: mem, bell: -1}, heldWait: o.HeldWait}

	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	tid := unix.Gettid()
	// Settle: the runtime's threads from before (the test framework's,
	// a garbage collection) go quiet.
	for i := 0; i < 20; i++ {
		d.WaitCQ(300 * time.Microsecond)
	}
	const waits = 200
	s0 := threadSwitches(t, tid)
	for i := 0; i < waits; i++ {
		if ok, err := d.WaitCQ(300 * time.Microsecond); ok || err != nil {
			t.Fatalf("WaitCQ on an empty ring: %v, %v", ok, err)
		}
	}
	per := float64(threadSwitches(t, tid)-s0) / waits
	t.Logf("held wait %v: %.2f context switches of other threads per 300 µs wait", o.HeldWait, per)
	if per > 0.5 {
		t.Fatalf("%.2f context switches of other threads per completion wait, want < 0.5 (the waiter should keep its P)", per)
	}
}
