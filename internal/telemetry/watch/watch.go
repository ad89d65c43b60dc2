// Package watch subscribes to the telemetry of running daemons: mrc-nicd
// through its device socket (nic/verbs.Watch) and mrc-switchd through its
// control socket (switchd/ctl.Client.Watch), told apart by the socket type.
// mrc-lab, `mrcctl watch` and `mrc-switchd watch` use it.
package watch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"syscall"
	"time"

	"github.com/softmrc/softmrc/internal/telemetry"
	"github.com/softmrc/softmrc/nic/verbs"
	"github.com/softmrc/softmrc/switchd/ctl"
)

// Stream subscribes to the daemon serving the unix socket at path at
// interval (0: 10 ms; 1 ms to 10 s) and calls fn with every sample until
// ctx ends (nil) or the stream fails (the error says why). mrc-nicd's
// device socket is SOCK_SEQPACKET and mrc-switchd's control socket
// SOCK_STREAM; connecting to the wrong type fails with EPROTOTYPE, which is
// how the daemon is recognised.
func Stream(ctx context.Context, path string, interval time.Duration, fn func(telemetry.Sample)) error {
	err := NIC(ctx, path, interval, fn)
	switch {
	case errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.ECONNREFUSED):
		return fmt.Errorf("watch: no daemon answers at %s (want an mrc-nicd device socket or an mrc-switchd control socket): %w", path, err)
	case !errors.Is(err, syscall.EPROTOTYPE):
		return err
	}
	return Switch(ctx, path, interval, fn)
}

// NIC is Stream for mrc-nicd's device socket (nic/verbs.Watch).
func NIC(ctx context.Context, path string, interval time.Duration, fn func(telemetry.Sample)) error {
	return verbs.Watch(ctx, path, interval, fn)
}

// Switch is Stream for mrc-switchd's control socket.
func Switch(ctx context.Context, path string, interval time.Duration, fn func(telemetry.Sample)) error {
	c, err := ctl.Dial(ctx, path)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	defer c.Close()
	return c.Watch(ctx, interval, fn)
}

// StreamAll streams from every socket in paths at once until ctx ends or
// one stream fails; fn is called from one goroutine at a time. The first
// failure ends the others and is returned (with its path).
func StreamAll(ctx context.Context, paths []string, interval time.Duration, fn func(telemetry.Sample)) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var mu sync.Mutex
	errs := make(chan error, len(paths))
	for _, p := range paths {
		go func() {
			err := Stream(ctx, p, interval, func(s telemetry.Sample) {
				mu.Lock()
				defer mu.Unlock()
				fn(s)
			})
			if err != nil {
				err = fmt.Errorf("%s: %w", p, err)
				cancel()
			}
			errs <- err
		}()
	}
	var first error
	for range paths {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	return first
}

// Options bound Print.
type Options struct {
	// Stream is how to subscribe: NIC, Switch, or nil for Stream (either).
	Stream   func(ctx context.Context, path string, interval time.Duration, fn func(telemetry.Sample)) error
	Interval time.Duration
	// Count stops after this many samples (0: no limit).
	Count int
	// Duration stops after this long (0: no limit).
	Duration time.Duration
}

// Print writes the daemon's samples to w as JSON Lines until opts.Count
// samples, opts.Duration or ctx ends; the CLIs' watch command.
func Print(ctx context.Context, w io.Writer, path string, opts Options) (n int, err error) {
	if opts.Count < 0 || opts.Duration < 0 {
		return 0, fmt.Errorf("--count %d, --duration %v: want >= 0", opts.Count, opts.Duration)
	}
	if _, err := telemetry.CheckInterval(opts.Interval); err != nil {
		return 0, err
	}
	if opts.Duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, opts.Duration)
		defer cancel()
	}
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	enc := telemetry.NewEncoder(w)
	var werr error
	stream := opts.Stream
	if stream == nil {
		stream = Stream
	}
	err = stream(ctx, path, opts.Interval, func(s telemetry.Sample) {
		if werr != nil || (opts.Count > 0 && n >= opts.Count) {
			return
		}
		if werr = enc.Encode(&s); werr != nil {
			stop()
			return
		}
		n++
		if opts.Count > 0 && n >= opts.Count {
			stop()
		}
	})
	if werr != nil {
		return n, werr
	}
	return n, err
}
