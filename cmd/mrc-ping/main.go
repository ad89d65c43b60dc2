// Command mrc-ping measures the round-trip time over one exact uSID path:
// mrc-nicd sends an OAM echo request along the path of an EV to HOST
// (plane and T1 chosen by --ev or --path) through its AF_XDP port, HOST's
// NIC answers along its own path back on the same plane and T1, and the
// local NIC timestamps both ends. With --hop K the probe instead loops
// back to this host at the K-th switch of the path (docs/operations.md).
//
//	mrc-ping [-d SOCKET] [--ev N | --path PLANE,T1] [--hop K] [-c COUNT] [-i INTERVAL] [-W TIMEOUT] HOST
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/softmrc/softmrc/internal/wire"
	"github.com/softmrc/softmrc/nic/verbs"
	"github.com/softmrc/softmrc/nic/vproto"
)

func main() {
	err := run(os.Args[1:], os.Stdout)
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

const usage = `usage: mrc-ping [-d SOCKET] [--ev N | --path PLANE,T1] [--hop K] [-c COUNT] [-i INTERVAL] [-W TIMEOUT] HOST

Sends OAM echo requests along one exact uSID path to HOST (a name of the
NIC's path template, e.g. h3, or one of its addresses) through mrc-nicd's
AF_XDP port, and prints the round-trip time of each, then min/avg/max/mdev
and the loss, as ping does. Exit status 0 when at least one probe was
answered, 1 when none, 2 on errors.

`

// ParseEV reads --ev or --path into an EV (the path's EV has entropy 0).
func parseEV(ev, path string) (wire.EV, error) {
	switch {
	case ev != "" && path != "":
		return 0, errors.New("give --ev or --path, not both")
	case ev != "":
		v, err := strconv.ParseUint(ev, 0, 32)
		if err != nil {
			return 0, fmt.Errorf("--ev %q: want an EV number (hex with 0x)", ev)
		}
		return wire.EV(v), nil
	case path != "":
		p, t, ok := strings.Cut(path, ",")
		pl, err1 := strconv.ParseUint(p, 0, 4)
		t1, err2 := strconv.ParseUint(t, 0, 8)
		if !ok || err1 != nil || err2 != nil {
			return 0, fmt.Errorf("--path %q: want PLANE,T1 (e.g. 0,1)", path)
		}
		return wire.MakeEV(wire.Plane(pl), uint8(t1), 0), nil
	}
	return wire.MakeEV(0, 0, 0), nil
}

func run(args []string, out io.Writer) error {
	fs := flag.NewFlagSet("mrc-ping", flag.ContinueOnError)
	dev := os.Getenv("MRC_DEVICE")
	if dev == "" {
		dev = "/run/mrc/nic.sock"
	}
	fs.StringVar(&dev, "d", dev, "mrc-nicd's device socket (env MRC_DEVICE)")
	evFlag := fs.String("ev", "", "the EV whose path to follow (its plane and T1 index); default plane 0, T1 0")
	pathFlag := fs.String("path", "", "PLANE,T1: the path of plane PLANE through T1 index T1")
	hop := fs.Int("hop", 0, "loop back to this host at the K-th switch of the path instead of echoing at HOST (1 = the local T0)")
	count := fs.Int("c", 5, "probes to send (1..100000)")
	interval := fs.Duration("i", time.Second, "interval between probes (at least 1ms)")
	wait := fs.Duration("W", time.Second, "time to wait for each answer (at most 10s)")
	fs.Usage = func() { fmt.Fprint(fs.Output(), usage); fs.PrintDefaults() }
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return errors.New("want exactly one HOST")
	}
	host := fs.Arg(0)
	if *count < 1 || *count > 100000 {
		return fmt.Errorf("-c %d: want 1..100000", *count)
	}
	if *interval < time.Millisecond {
		return fmt.Errorf("-i %v: at least 1ms", *interval)
	}
	if *wait <= 0 || *wait > 10*time.Second {
		return fmt.Errorf("-W %v: want (0, 10s]", *wait)
	}
	ev, err := parseEV(*evFlag, *pathFlag)
	if err != nil {
		return err
	}
	d, err := verbs.Open(dev)
	if err != nil {
		return err
	}
	defer d.Close()
	var hops []vproto.OAMHop
	if err := d.Ctl(vproto.CtlRequest{Cmd: vproto.CtlOAMTrace, Peer: host, EV: uint32(ev)}, &hops); err != nil {
		return err
	}
	h := hops[len(hops)-1]
	if *hop != 0 {
		if *hop < 1 || *hop > len(hops) {
			return fmt.Errorf("--hop %d: the path to %s has hops 1..%d", *hop, host, len(hops))
		}
		h = hops[*hop-1]
	}
	what := "echo at " + h.Name
	if h.Kind == "loop" {
		what = fmt.Sprintf("loop back at hop %d, %s", h.Hop, h.Name)
	}
	fmt.Fprintf(out, "MRC-PING %s: EV %v (plane %d, T1 %d), %s, uSIDs %s\n", host, ev, h.Plane, h.T1, what, strings.Join(h.Via, " "))
	var rtts []float64
	start := time.Now()
	for seq := 1; seq <= *count; seq++ {
		t0 := time.Now()
		var r vproto.OAMResult
		if err := d.Ctl(vproto.CtlRequest{Cmd: vproto.CtlOAMProbe, Peer: host, EV: uint32(ev), Hop: *hop, QPN: uint32(seq),
			TimeoutMS: int(wait.Milliseconds())}, &r); err != nil {
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
