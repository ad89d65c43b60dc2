// Command mrc-traceroute shows each switch of an EV's uSID path to HOST
// with its uSID and the round-trip time to it, measured by OAM probes that
// mrc-nicd sends through its AF_XDP port along the path and that loop back
// to this host at that switch (the path up to the switch, then the same
// switches back); the last hop is HOST itself, answering an echo request.
// Where probes stop arriving, the path is cut (docs/operations.md).
//
//	mrc-traceroute [-d SOCKET] --ev N | --path PLANE,T1 [-q PROBES] [-W TIMEOUT] HOST
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/softmrc/softmrc/nic/oamflag"
	"github.com/softmrc/softmrc/nic/vproto"
)

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil && !errors.Is(err, flag.ErrHelp) {
		fmt.Fprintln(os.Stderr, "mrc-traceroute:", err)
		os.Exit(1)
	}
}

const usage = `usage: mrc-traceroute [-d SOCKET] --ev N | --path PLANE,T1 [-q PROBES] [-W TIMEOUT] HOST

Prints each switch of the EV's uSID path to HOST (a name of the NIC's path
template, e.g. h3, or one of its addresses) with its uSID and the RTT of
PROBES loop-back probes cut at that switch; the last line is HOST itself
(an echo). '*' is a probe not answered within TIMEOUT. The last line says
where the probes stop. Exit status 0 when HOST answered, 1 otherwise.

`

func run(args []string, out io.Writer) error {
	fs := flag.NewFlagSet("mrc-traceroute", flag.ContinueOnError)
	of := oamflag.Register(fs, true, 500*time.Millisecond)
	q := fs.Int("q", 3, "probes per hop (1..10)")
	ev, host, err := of.Parse(fs, usage, args)
	if err != nil {
		return err
	}
	if *q < 1 || *q > 10 {
		return fmt.Errorf("-q %d: want 1..10", *q)
	}
	wait := &of.Wait
	d, hops, err := of.Open(host, ev, false, -1)
	if err != nil {
		return err
	}
	defer d.Close()
	fmt.Fprintf(out, "mrc-traceroute to %s over EV %v (plane %d, T1 %d), %d hops, %d probes each\n",
		host, ev, hops[0].Plane, hops[0].T1, len(hops), *q)
	lastOK := 0
	for _, h := range hops {
		fmt.Fprintf(out, "%2d  %s (uSID %s)", h.Hop, h.Name, h.USID)
		got := 0
		for i := 0; i < *q; i++ {
			var r vproto.OAMResult
			if err := d.Ctl(vproto.CtlRequest{Cmd: vproto.CtlOAMProbe, Peer: host, EV: uint32(ev), Hop: h.Hop, QPN: uint32(i + 1),
				TimeoutMS: int(wait.Milliseconds())}, &r); err != nil {
				return err
			}
			if r.OK {
				got++
				fmt.Fprintf(out, "  %.3f ms", r.RTTus/1e3)
			} else {
				fmt.Fprint(out, "  *")
			}
		}
		fmt.Fprintln(out)
		if got > 0 && lastOK == h.Hop-1 {
			lastOK = h.Hop
		}
	}
	switch {
	case lastOK == len(hops):
		fmt.Fprintf(out, "%s reached\n", host)
		return nil
	case lastOK == 0:
		fmt.Fprintf(out, "probes stop at hop 1: the cut is between this host and %s (its NIC–T0 link or the T0)\n", hops[0].Name)
	default:
		fmt.Fprintf(out, "probes stop after hop %d (%s): the cut is between %s and %s\n", lastOK, hops[lastOK-1].Name, hops[lastOK-1].Name, hops[lastOK].Name)
	}
	return fmt.Errorf("%s not reached", host)
}
