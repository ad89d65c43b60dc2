// Command mrc-write-bw is perftest's ib_write_bw for the softmrc soft NIC:
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
	"syscall"

	"github.com/softmrc/softmrc/nic/perf"
)

func main() {
	p, err := perf.Parse(perf.BW, os.Args[1:], os.Stderr)
	if err != nil {
		if !errors.Is(err, perf.ErrUsage) || err.Error() != "usage: flag: help requested" {
			fmt.Fprintln(os.Stderr, "mrc-write-bw:", err)
		}
		os.Exit(2)
	}
	// SIGINT/SIGTERM end the run: the current round stops, what completed
	// is reported, both sides exit.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := perf.Run(ctx, p, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "mrc-write-bw:", err)
		os.Exit(1)
	}
}
