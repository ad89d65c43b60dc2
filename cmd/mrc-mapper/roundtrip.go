package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/softmrc/softmrc/internal/wire"
	"github.com/softmrc/softmrc/nic/oamflag"
	"github.com/softmrc/softmrc/nic/verbs"
	"github.com/softmrc/softmrc/nic/vproto"
)

// Round trips through another host, when asked: the collector (or an
// operator) has one host's NIC send reflect probes out along an exact
// path to another host and back along an exact return path (docs/
// operations.md), through the NIC's device socket or the host's agent.

// rtAsk is one round-trip request: Count probes, Interval apart, each
// waited for at most Wait.
type rtAsk struct {
	Via      string
	EV       wire.EV
	Back     int
	Count    int
	Interval time.Duration
	Wait     time.Duration
}

// rtResult is what came back.
type rtResult struct {
	Via   string    `json:"via"`
	Out   []string  `json:"out"`  // uSIDs to Via
	Back  []string  `json:"back"` // uSIDs from Via back
	Sent  int       `json:"sent"`
	RTTus []float64 `json:"rtt_us"` // of the answered probes
}

// Bounds of a round-trip request (the agent enforces them too).
const (
	rtMaxCount    = 1000
	rtMinInterval = time.Millisecond
	rtMaxDuration = time.Minute
)

func (a rtAsk) check() error {
	if a.Via == "" {
		return errors.New("want --via HOST: the host to reflect at")
	}
	if a.Count < 1 || a.Count > rtMaxCount {
		return fmt.Errorf("-c %d: want 1..%d", a.Count, rtMaxCount)
	}
	if a.Interval < rtMinInterval || a.Interval > 10*time.Second {
		return fmt.Errorf("-i %v: want 1ms..10s", a.Interval)
	}
	if a.Wait <= 0 || a.Wait > oamflag.MaxWait {
		return fmt.Errorf("-W %v: want (0, 10s]", a.Wait)
	}
	if a.Back < 0 || a.Back > 255 {
		return fmt.Errorf("--back %d: want a T1 index", a.Back)
	}
	if d := time.Duration(a.Count) * (a.Interval + a.Wait); d > rtMaxDuration {
		return fmt.Errorf("-c %d × (-i %v + -W %v) may take %v, at most %v", a.Count, a.Interval, a.Wait, d, rtMaxDuration)
	}
	return nil
}

// sockRoundTrip runs a on the NIC of device socket sock.
func sockRoundTrip(sock string, a rtAsk) (rtResult, error) {
	if err := a.check(); err != nil {
		return rtResult{}, err
	}
	d, err := verbs.OpenControl(sock)
	if err != nil {
		return rtResult{}, err
	}
	defer d.Close()
	req := vproto.CtlRequest{Cmd: vproto.CtlOAMTrace, Peer: a.Via, EV: uint32(a.EV), Reflect: true, Back: a.Back}
	var hops []vproto.OAMHop
	if err := d.Ctl(req, &hops); err != nil {
		return rtResult{}, err
	}
	last := hops[len(hops)-1]
	res := rtResult{Via: a.Via, Out: last.Via, Back: last.Back}
	req.Cmd, req.TimeoutMS = vproto.CtlOAMProbe, int(a.Wait.Milliseconds())
	for i := 1; i <= a.Count; i++ {
		t0 := time.Now()
		req.QPN = uint32(i)
		var r vproto.OAMResult
		if err := d.Ctl(req, &r); err != nil {
			return res, err
		}
		res.Sent++
		if r.OK {
			res.RTTus = append(res.RTTus, r.RTTus)
		}
		if i < a.Count {
			time.Sleep(max(0, a.Interval-time.Since(t0)))
		}
	}
	return res, nil
}

// query and parseQuery carry an rtAsk over HTTP (GET /roundtrip).
func (a rtAsk) query() string {
	return url.Values{"via": {a.Via}, "ev": {fmt.Sprintf("%#x", uint32(a.EV))}, "back": {strconv.Itoa(a.Back)},
		"count": {strconv.Itoa(a.Count)}, "interval": {a.Interval.String()}, "wait": {a.Wait.String()}}.Encode()
}

func parseQuery(q url.Values) (rtAsk, error) {
	var a rtAsk
	var errs []error
	num := func(k string) int {
		v, err := strconv.ParseInt(q.Get(k), 0, 64)
		errs = append(errs, err)
		return int(v)
	}
	dur := func(k string) time.Duration {
		v, err := time.ParseDuration(q.Get(k))
		errs = append(errs, err)
		return v
	}
	a.Via, a.EV, a.Back, a.Count = q.Get("via"), wire.EV(num("ev")), num("back"), num("count")
	a.Interval, a.Wait = dur("interval"), dur("wait")
	if err := errors.Join(errs...); err != nil {
		return a, fmt.Errorf("want via, ev, back, count, interval and wait: %w", err)
	}
	return a, a.check()
}

func agentRoundTrip(addr string, a rtAsk) (rtResult, error) {
	c := &http.Client{Timeout: time.Duration(a.Count)*(a.Interval+a.Wait) + 5*time.Second}
	r, err := c.Get("http://" + addr + "/roundtrip?" + a.query())
	if err != nil {
		return rtResult{}, fmt.Errorf("agent %s: %w", addr, err)
	}
	defer r.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if r.StatusCode != http.StatusOK {
		return rtResult{}, fmt.Errorf("agent %s: %s", addr, strings.TrimSpace(string(b)))
	}
	var res rtResult
	if err := json.Unmarshal(b, &res); err != nil {
		return rtResult{}, fmt.Errorf("agent %s: /roundtrip: %w", addr, err)
	}
	return res, nil
}

const roundTripUsage = `usage: mrc-mapper roundtrip (-d SOCKET | --agent ADDR) --via HOST [--ev N | --path PLANE,T1] [--back T1] [-c COUNT] [-i INTERVAL] [-W TIMEOUT]

Has one host's NIC (its device socket -d, or its mrc-mapper agent) probe
host → … → HOST → back over an exact round trip: out along the EV's path
to HOST, reflected by HOST's NIC, back through T1 index --back of the same
plane (default: the EV's own T1). Prints the uSIDs of both halves, then
sent, received, loss and rtt min/avg/max. Exit status 1 when no probe came
back.

`

func runRoundTrip(args []string, out io.Writer) error {
	fs := flag.NewFlagSet("mrc-mapper roundtrip", flag.ContinueOnError)
	sock := fs.String("d", "", "the asking host's mrc-nicd device `socket`")
	agent := fs.String("agent", "", "the asking host's mrc-mapper agent, `host:port`")
	via := fs.String("via", "", "the `host` to reflect at (a name of the NIC's path template, or an address)")
	evFlag := fs.String("ev", "", "the EV whose path to follow out (plane, T1); default plane 0, T1 0")
	pathFlag := fs.String("path", "", "PLANE,T1: the path out")
	back := fs.Int("back", -1, "the T1 index of the way back (default: the way out's)")
	count := fs.Int("c", 10, "probes (1..1000)")
	interval := fs.Duration("i", 10*time.Millisecond, "interval between probes (1ms..10s)")
	wait := fs.Duration("W", 500*time.Millisecond, "time to wait for each (at most 10s)")
	fs.Usage = func() { fmt.Fprint(fs.Output(), roundTripUsage); fs.PrintDefaults() }
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	if (*sock == "") == (*agent == "") {
		return errors.New("roundtrip: give the asking host's -d SOCKET or --agent ADDR (one)")
	}
	ev, err := oamflag.ParseEV(*evFlag, *pathFlag)
	if err != nil {
		return err
	}
	a := rtAsk{Via: *via, EV: ev, Back: *back, Count: *count, Interval: *interval, Wait: *wait}
	if a.Back < 0 {
		a.Back = int(ev.T1())
	}
	if err := a.check(); err != nil {
		return err
	}
	var res rtResult
	if *sock != "" {
		res, err = sockRoundTrip(*sock, a)
	} else {
		res, err = agentRoundTrip(*agent, a)
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "round trip to %s over plane %d: out T1 %d, back T1 %d, uSIDs %s | back %s\n",
		res.Via, ev.Plane(), ev.T1(), a.Back, strings.Join(res.Out, " "), strings.Join(res.Back, " "))
	n := len(res.RTTus)
	fmt.Fprintf(out, "%d probes sent, %d received, %.4g%% loss", res.Sent, n, 100*float64(res.Sent-n)/float64(max(res.Sent, 1)))
	if n == 0 {
		fmt.Fprintln(out)
		return fmt.Errorf("no probe came back from %s", res.Via)
	}
	mn, mx, sum := math.Inf(1), 0.0, 0.0
	for _, v := range res.RTTus {
		mn, mx, sum = min(mn, v), max(mx, v), sum+v
	}
	fmt.Fprintf(out, ", rtt min/avg/max = %.3f/%.3f/%.3f ms\n", mn/1e3, sum/float64(n)/1e3, mx/1e3)
	return nil
}

func parseQueryString(s string) (rtAsk, error) {
	q, err := url.ParseQuery(s)
	if err != nil {
		return rtAsk{}, err
	}
	return parseQuery(q)
}
