package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/softmrc/softmrc/internal/telemetry"
	"github.com/softmrc/softmrc/internal/telemetry/watch"
)

// watchCmd streams the NIC's telemetry as JSON Lines.
func watchCmd(dev string, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("mrcctl watch", flag.ContinueOnError)
	o := watch.Options{Stream: watch.NIC}
	fs.DurationVar(&o.Interval, "interval", telemetry.DefaultInterval, "sampling interval (1ms to 10s)")
	fs.IntVar(&o.Count, "count", 0, "stop after this many samples (0: no limit)")
	fs.DurationVar(&o.Duration, "duration", 10*time.Second, "stop after this long (0: no limit; with --count 0, run until Ctrl-C)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return fmt.Errorf("watch takes no arguments, got %q", fs.Args())
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	n, err := watch.Print(ctx, out, dev, o)
	if err != nil {
		return err
	}
	if n == 0 && !errors.Is(ctx.Err(), context.Canceled) {
		return fmt.Errorf("watch: no sample from %s within %v", dev, o.Duration)
	}
	return nil
}
