package ctl

import (
	"context"
	"fmt"
	"time"

	"github.com/softmrc/softmrc/internal/telemetry"
)

// Watch subscribes to the switch's telemetry at interval (0: 10 ms; 1 ms to
// 10 s) and calls fn with every sample (one per port per interval,
// docs/telemetry.md) until ctx ends, which returns nil, or the daemon goes
// away, which returns why. The connection carries nothing else afterwards:
// use a Client only for one Watch.
func (c *Client) Watch(ctx context.Context, interval time.Duration, fn func(telemetry.Sample)) error {
	sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	_, err := c.Do(sctx, Request{Cmd: CmdWatch, IntervalNS: int64(interval)})
	cancel()
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("watch %s: %w", c.path, err)
	}
	c.conn.SetDeadline(time.Time{})
	stop := context.AfterFunc(ctx, func() { c.conn.SetReadDeadline(time.Unix(1, 0)) })
	defer stop()
	var s telemetry.Sample
	for {
		line, err := readLine(c.r)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("watch %s: the switch closed the stream: %w", c.path, err)
		}
		if err := telemetry.Unmarshal(line, &s); err != nil {
			return fmt.Errorf("watch %s: %w", c.path, err)
		}
		fn(s)
		if ctx.Err() != nil {
			return nil
		}
	}
}
