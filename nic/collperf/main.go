package collperf

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

// Main is the whole of mrc-allreduce-perf and mrc-alltoall-perf: parse the
// flags for kind, run until done or SIGINT/SIGTERM (the other ranks notice
// and stop too), and exit 0, 1 (run failed) or 2 (bad flags).
func Main(kind Kind, name string) {
	p, err := Parse(kind, os.Args[1:], os.Stderr)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		fmt.Fprintln(os.Stderr, name+":", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := Run(ctx, p, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintf(os.Stderr, "%s: rank %d: %v\n", name, p.Rank, err)
		stop()
		os.Exit(1)
	}
}
