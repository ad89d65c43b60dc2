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
	"strconv"
	"strings"
	"time"

	"github.com/softmrc/softmrc/internal/wire"
	"github.com/softmrc/softmrc/nic/verbs"
	"github.com/softmrc/softmrc/nic/vproto"
)

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
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
	dev := os.Getenv("MRC_DEVICE")
	if dev == "" {
		dev = "/run/mrc/nic.sock"
	}
	fs.StringVar(&dev, "d", dev, "mrc-nicd's device socket (env MRC_DEVICE)")
	evFlag := fs.String("ev", "", "the EV whose path to trace (required unless --path)")
	pathFlag := fs.String("path", "", "PLANE,T1: trace the path of plane PLANE through T1 index T1")
	q := fs.Int("q", 3, "probes per hop (1..10)")
	wait := fs.Duration("W", 500*time.Millisecond, "time to wait for each probe (at most 10s)")
	fs.Usage = func() { fmt.Fprint(fs.Output(), usage); fs.PrintDefaults() }
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return errors.New("want exactly one HOST")
	}
	if *q < 1 || *q > 10 {
		return fmt.Errorf("-q %d: want 1..10", *q)
	}
	if *wait <= 0 || *wait > 10*time.Second {
		return fmt.Errorf("-W %v: want (0, 10s]", *wait)
	}
	var ev wire.EV
	switch {
	case (*evFlag == "") == (*pathFlag == ""):
		return errors.New("give --ev N or --path PLANE,T1")
	case *evFlag != "":
		v, err := strconv.ParseUint(*evFlag, 0, 32)
		if err != nil {
			return fmt.Errorf("--ev %q: want an EV number (hex with 0x)", *evFlag)
		}
		ev = wire.EV(v)
	default:
		p, t, ok := strings.Cut(*pathFlag, ",")
		pl, err1 := strconv.ParseUint(p, 0, 4)
		t1, err2 := strconv.ParseUint(t, 0, 8)
		if !ok || err1 != nil || err2 != nil {
			return fmt.Errorf("--path %q: want PLANE,T1 (e.g. 0,1)", *pathFlag)
		}
		ev = wire.MakeEV(wire.Plane(pl), uint8(t1), 0)
	}
	host := fs.Arg(0)
	d, err := verbs.Open(dev)
	if err != nil {
		return err
	}
	defer d.Close()
	var hops []vproto.OAMHop
	if err := d.Ctl(vproto.CtlRequest{Cmd: vproto.CtlOAMTrace, Peer: host, EV: uint32(ev)}, &hops); err != nil {
		return err
	}
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
