// Command mrc-allreduce-perf is nccl-tests' all_reduce_perf for the softmrc soft NIC:
// start one process per host (rank), e.g. with
// `mrc-testbed exec h0,h1,h2,h3 -- mrc-allreduce-perf -b 8 -e 64M -f 2`;
// rank 0 prints nccl-tests' table. See docs/collectives.md.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/softmrc/softmrc/nic/collperf"
)

func main() {
	p, err := collperf.Parse(collperf.AllReduce, os.Args[1:], os.Stderr)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		fmt.Fprintln(os.Stderr, "mrc-allreduce-perf:", err)
		os.Exit(2)
	}
	// SIGINT/SIGTERM end the run; the other ranks notice and stop too.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := collperf.Run(ctx, p, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintf(os.Stderr, "mrc-allreduce-perf: rank %d: %v\n", p.Rank, err)
		os.Exit(1)
	}
}
