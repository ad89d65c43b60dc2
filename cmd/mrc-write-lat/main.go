// Command mrc-write-lat is perftest's ib_write_lat for the softmrc soft NIC:
// run it without an address on one host (the server) and with the server's
// address on another (the client). Flags, out-of-band exchange (TCP 18515)
// and the result table follow perftest; see docs/nic.md.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"syscall"

	"github.com/softmrc/softmrc/nic/perf"
)

func main() {
	if os.Getenv("GOMAXPROCS") == "" {
		// One P, like perftest's one thread: with a second P every
		// completion also wakes an idle OS thread to look for work (a futex
		// wake, an IPI in a VM). On the 2-vCPU test VM this halved the
		// tool's CPU per iteration (docs/nic.md, Measurements).
		runtime.GOMAXPROCS(1)
	}
	p, err := perf.Parse(perf.Lat, os.Args[1:], os.Stderr)
	if err != nil {
		if !errors.Is(err, perf.ErrUsage) || err.Error() != "usage: flag: help requested" {
			fmt.Fprintln(os.Stderr, "mrc-write-lat:", err)
		}
		os.Exit(2)
	}
	// SIGINT/SIGTERM end the run: the current round stops, what completed
	// is reported, both sides exit.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := perf.Run(ctx, p, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "mrc-write-lat:", err)
		os.Exit(1)
	}
}
