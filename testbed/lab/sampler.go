package lab

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/softmrc/softmrc/internal/telemetry"
	"github.com/softmrc/softmrc/internal/telemetry/watch"
	"github.com/softmrc/softmrc/testbed/lab/series"
)

// Sampler streams telemetry samples to fn until ctx ends.
type Sampler interface {
	Run(ctx context.Context, fn func(series.Sample)) error
}

// Monotonic is CLOCK_MONOTONIC in ns: the clock every sample and fault
// time of a run is on.
func Monotonic() int64 { return telemetry.Now() }

// Telemetry subscribes to the daemons' telemetry streams (mrc-switchd's
// control socket, mrc-nicd's device socket) at Interval. Sockets maps a
// plan node name (p0-t0-1, h3) to its socket; every sample's Source is
// rewritten to that name, so series keys do not depend on how a daemon
// names itself (mrc-switchd uses the prefixed config name).
type Telemetry struct {
	Sockets  map[string]string
	Interval time.Duration
}

// Run implements Sampler: fn is called from one goroutine at a time. The
// first stream that fails ends the others, and its error is returned.
func (t Telemetry) Run(ctx context.Context, fn func(series.Sample)) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var mu sync.Mutex
	errs := make(chan error, len(t.Sockets))
	for node, path := range t.Sockets {
		go func() {
			var err error
			var failedAt time.Time // when the stream last broke (zero: it delivers)
			for {
				err = watch.Stream(ctx, path, t.Interval, func(s telemetry.Sample) {
					s.Source = node
					mu.Lock()
					defer mu.Unlock()
					failedAt = time.Time{}
					fn(s)
				})
				if err == nil || ctx.Err() != nil {
					err = nil
					break
				}
				// A scenario may restart a daemon (S10's switch reboot):
				// its stream ends, and a new daemon answers on the same
				// socket within RestartGrace. The counters in between are
				// interpolated; a counter that went backwards contributes
				// 0 (series.Counters).
				mu.Lock()
				if failedAt.IsZero() {
					failedAt = time.Now()
				}
				gone := time.Since(failedAt) > RestartGrace
				mu.Unlock()
				if gone {
					break
				}
				select {
				case <-ctx.Done():
				case <-time.After(20 * time.Millisecond):
				}
			}
			if err != nil {
				err = fmt.Errorf("telemetry of %s (%s): %w (no daemon answered for %v)", node, path, err, RestartGrace)
				cancel()
			}
			errs <- err
		}()
	}
	var first error
	for range t.Sockets {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	return first
}

// RestartGrace is how long a telemetry stream that ended may take to come
// back (a daemon restarted) before the run fails.
const RestartGrace = 5 * time.Second
