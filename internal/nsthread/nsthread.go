// Package nsthread runs a function on a locked OS thread inside a network
// namespace. Go schedules goroutines over OS threads, and setns(2) changes only
// the calling thread, so every namespace switch must happen on a thread that is
// locked for the whole call and either restored afterwards or retired.
package nsthread

import (
	"errors"
	"fmt"
	"runtime"

	"github.com/vishvananda/netns"
)

// Run runs f on a fresh goroutine whose OS thread is locked, and restores the
// thread's namespace afterwards; when that fails the thread stays locked and
// dies with the goroutine, so no other goroutine ever runs in the wrong
// namespace.
func Run(f func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := netns.Get()
		if err != nil {
			runtime.UnlockOSThread()
			errc <- err
			return
		}
		defer orig.Close()
		ferr := f()
		if err := netns.Set(orig); err != nil {
			errc <- errors.Join(ferr, fmt.Errorf("restore namespace: %w", err))
			return
		}
		runtime.UnlockOSThread()
		errc <- ferr
	}()
	return <-errc
}

// In runs f inside the namespace h (see Run).
func In(h netns.NsHandle, f func() error) error {
	return Run(func() error {
		if err := netns.Set(h); err != nil {
			return fmt.Errorf("enter namespace: %w", err)
		}
		return f()
	})
}

// Named runs f inside the namespace mounted at /run/netns/name (ip netns).
func Named(name string, f func() error) error {
	h, err := netns.GetFromName(name)
	if err != nil {
		return fmt.Errorf("namespace %s: %w", name, err)
	}
	defer h.Close()
	return Run(func() error {
		if err := netns.Set(h); err != nil {
			return fmt.Errorf("enter namespace %s: %w", name, err)
		}
		return f()
	})
}
