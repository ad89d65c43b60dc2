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
			err := watch.Stream(ctx, path, t.Interval, func(s telemetry.Sample) {
				s.Source = node
				mu.Lock()
				defer mu.Unlock()
				fn(s)
			})
			if err != nil {
				err = fmt.Errorf("telemetry of %s (%s): %w", node, path, err)
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
