// Command mrc-ping measures the round-trip time over one exact uSID path:
// mrc-nicd sends an OAM echo request along the path of an EV to HOST
// (plane and T1 chosen by --ev or --path) through its AF_XDP port, HOST's
// NIC answers along its own path back on the same plane and T1, and the
// local NIC timestamps both ends. With --hop K the probe instead loops
// back to this host at the K-th switch of the path; with --back T1 HOST's
// NIC reflects it along a return path through T1 index T1 that this host
// names (docs/operations.md).
//
//	mrc-ping [-d SOCKET] [--ev N | --path PLANE,T1] [--hop K | --back T1] [-c COUNT] [-i INTERVAL] [-W TIMEOUT] HOST
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"strings"
	"time"

	"github.com/softmrc/softmrc/nic/oamflag"
	"github.com/softmrc/softmrc/nic/vproto"
)

func main() {
	err := run(os.Args[1:], os.Stdout)
	if errors.Is(err, flag.ErrHelp) {
		return // the usage is printed
	}
	var lost errAllLost
	if errors.As(err, &lost) {
		os.Exit(1)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "mrc-ping:", err)
		os.Exit(2)
	}
}

type errAllLost struct{}

func (errAllLost) Error() string { return "no probe answered" }

const usage = `usage: mrc-ping [-d SOCKET] [--ev N | --path PLANE,T1] [--hop K | --back T1] [-c COUNT] [-i INTERVAL] [-W TIMEOUT] HOST

Sends OAM echo requests along one exact uSID path to HOST (a name of the
NIC's path template, e.g. h3, or one of its addresses) through mrc-nicd's
AF_XDP port, and prints the round-trip time of each, then min/avg/max/mdev
and the loss, as ping does. HOST's NIC answers along its own path on the
same plane and T1. With --hop K the probe loops back at the K-th switch
instead; with --back T1 HOST's NIC reflects it unanswered along the
return path this host chose (same plane, through T1 index T1), so both
halves of the round trip are exact. Exit status 0 when at least one probe
was answered, 1 when none, 2 on errors.

`

func run(args []string, out io.Writer) error {
	fs := flag.NewFlagSet("mrc-ping", flag.ContinueOnError)
	of := oamflag.Register(fs, false, time.Second)
	hop := fs.Int("hop", 0, "loop back to this host at the K-th switch of the path instead of echoing at HOST (1 = the local T0)")
	back := fs.Int("back", -1, "reflect at HOST and come back through T1 index `T1` of the same plane (a round trip whose both halves this host names); -1: HOST's NIC echoes over its own path")
	count := fs.Int("c", 5, "probes to send (1..100000)")
	interval := fs.Duration("i", time.Second, "interval between probes (at least 1ms)")
	ev, host, err := of.Parse(fs, usage, args)
	if err != nil {
		return err
	}
	if *count < 1 || *count > 100000 {
		return fmt.Errorf("-c %d: want 1..100000", *count)
	}
	if *interval < time.Millisecond {
		return fmt.Errorf("-i %v: at least 1ms", *interval)
	}
	reflect := *back >= 0
	if reflect && *hop != 0 {
		return errors.New("--back and --hop: a reflected probe goes to HOST and back, it is not cut at a hop")
	}
	if *back < -1 || *back > 255 {
		return fmt.Errorf("--back %d: want a T1 index (0..255)", *back)
	}
	wait := &of.Wait
	d, hops, err := of.Open(host, ev, reflect, *back)
	if err != nil {
		return err
	}
	defer d.Close()
	h := hops[len(hops)-1]
	if *hop != 0 {
		if *hop < 1 || *hop > len(hops) {
			return fmt.Errorf("--hop %d: the path to %s has hops 1..%d", *hop, host, len(hops))
		}
		h = hops[*hop-1]
	}
	what := "echo at " + h.Name
	via := strings.Join(h.Via, " ")
	switch {
	case h.Kind == "loop":
		what = fmt.Sprintf("loop back at hop %d, %s", h.Hop, h.Name)
	case reflect:
		what = fmt.Sprintf("reflected at %s, back through T1 %d", h.Name, *back)
		via += " | back " + strings.Join(h.Back, " ")
	}
	fmt.Fprintf(out, "MRC-PING %s: EV %v (plane %d, T1 %d), %s, uSIDs %s\n", host, ev, h.Plane, h.T1, what, via)
	var rtts []float64
	start := time.Now()
	for seq := 1; seq <= *count; seq++ {
		t0 := time.Now()
		var r vproto.OAMResult
		if err := d.Ctl(vproto.CtlRequest{Cmd: vproto.CtlOAMProbe, Peer: host, EV: uint32(ev), Hop: *hop, QPN: uint32(seq),
			Reflect: reflect, Back: *back, TimeoutMS: int(wait.Milliseconds())}, &r); err != nil {
			return err
		}
		if r.OK {
			rtts = append(rtts, r.RTTus/1e3)
			fmt.Fprintf(out, "from %s: seq=%d time=%.3f ms\n", h.Name, seq, r.RTTus/1e3)
		} else {
			fmt.Fprintf(out, "seq=%d no answer within %v\n", seq, *wait)
		}
		if seq < *count {
			time.Sleep(max(0, *interval-time.Since(t0)))
		}
	}
	elapsed := time.Since(start)
	loss := 100 * float64(*count-len(rtts)) / float64(*count)
	fmt.Fprintf(out, "\n--- %s mrc-ping statistics ---\n", host)
	fmt.Fprintf(out, "%d probes transmitted, %d received, %.4g%% probe loss, time %dms\n", *count, len(rtts), loss, elapsed.Milliseconds())
	if len(rtts) == 0 {
		return errAllLost{}
	}
	mn, mx, sum, sq := math.Inf(1), 0.0, 0.0, 0.0
	for _, v := range rtts {
		mn, mx, sum, sq = min(mn, v), max(mx, v), sum+v, sq+v*v
	}
	avg := sum / float64(len(rtts))
	mdev := math.Sqrt(max(0, sq/float64(len(rtts))-avg*avg))
	fmt.Fprintf(out, "rtt min/avg/max/mdev = %.3f/%.3f/%.3f/%.3f ms\n", mn, avg, mx, mdev)
	return nil
}
