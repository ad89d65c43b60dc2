package lab

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/softmrc/softmrc/switchd/ctl"
	"github.com/softmrc/softmrc/testbed/lab/series"
	"github.com/softmrc/softmrc/testbed/plan"
)

// Sampler streams telemetry samples to fn until ctx ends.
type Sampler interface {
	Run(ctx context.Context, fn func(series.Sample)) error
}

// Monotonic is CLOCK_MONOTONIC in ns: the clock every sample and fault
// time of a run is on (the daemons' telemetry uses it too).
func Monotonic() int64 {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return ts.Nano()
}

// SwitchPoller samples switch ports through mrc-switchd's control socket
// (the stats command) every Interval, one persistent connection per switch.
// Each sample is stamped with the midpoint of its request.
type SwitchPoller struct {
	Switches []*plan.Switch
	Interval time.Duration
}

// Run implements Sampler.
func (sp SwitchPoller) Run(ctx context.Context, fn func(series.Sample)) error {
	var mu sync.Mutex
	emit := func(s series.Sample) {
		mu.Lock()
		fn(s)
		mu.Unlock()
	}
	var wg sync.WaitGroup
	errs := make([]error, len(sp.Switches))
	for i, sw := range sp.Switches {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = pollSwitch(ctx, sw, sp.Interval, emit)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

func pollSwitch(ctx context.Context, sw *plan.Switch, every time.Duration, emit func(series.Sample)) error {
	c, err := ctl.Dial(ctx, sw.CtlSock)
	if err != nil {
		return err
	}
	defer c.Close()
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		t0 := Monotonic()
		rctx, cancel := context.WithTimeout(ctx, time.Second)
		st, err := c.Stats(rctx)
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("sample %s: %w", sw.Name, err)
		}
		t := t0 + (Monotonic()-t0)/2
		for _, p := range st.Ports {
			k := p.Counters
			emit(series.Sample{T: t, Source: sw.Name, Kind: "swport", ID: sw.Name + ":" + p.Name, Values: map[string]float64{
				"tx_bytes": float64(k.TxBytes), "rx_bytes": float64(k.RxBytes), "tx_packets": float64(k.TxPackets),
				"drops": float64(k.Drops.Total()), "ecn_marked": float64(k.ECNMarked), "trimmed": float64(k.Trimmed),
			}})
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}
