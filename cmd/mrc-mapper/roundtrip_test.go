package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/softmrc/softmrc/internal/wire"
	"github.com/softmrc/softmrc/nic/daemon/daemontest"
)

// TestRoundTripArgs: bounds and source choice are checked before anything
// is sent; a NIC without a path template says so, directly and through an
// agent (which checks the bounds again).
func TestRoundTripArgs(t *testing.T) {
	p := daemontest.Start(t, 1) // ECMP mode: no template
	addr := make(chan string, 1)
	done := make(chan error, 1)
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		done <- runAgent(ctx, []string{"--listen", "127.0.0.1:0", "-d", p.Sock[0]}, func(a string) { addr <- a })
	}()
	var a string
	select {
	case a = <-addr:
	case err := <-done:
		t.Fatalf("agent: %v", err)
	}
	defer func() { cancel(); <-done }()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--via", "h3"}, "-d SOCKET or --agent"},
		{[]string{"-d", p.Sock[0], "--agent", a, "--via", "h3"}, "-d SOCKET or --agent"},
		{[]string{"-d", p.Sock[0]}, "--via HOST"},
		{[]string{"-d", p.Sock[0], "--via", "h3", "-c", "0"}, "-c 0"},
		{[]string{"-d", p.Sock[0], "--via", "h3", "-c", "1001"}, "-c 1001"},
		{[]string{"-d", p.Sock[0], "--via", "h3", "-i", "100us"}, "-i"},
		{[]string{"-d", p.Sock[0], "--via", "h3", "-W", "11s"}, "-W"},
		{[]string{"-d", p.Sock[0], "--via", "h3", "-c", "1000", "-i", "1s"}, "at most 1m0s"},
		{[]string{"-d", p.Sock[0], "--via", "h3", "--path", "0"}, "PLANE,T1"},
		{[]string{"-d", p.Sock[0], "--via", "h3", "-c", "1"}, "srv6"},
		{[]string{"--agent", a, "--via", "h3", "-c", "1"}, "srv6"},
	} {
		err := run(append([]string{"roundtrip"}, c.args...), &bytes.Buffer{})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("mrc-mapper roundtrip %v: %v, want an error mentioning %q", c.args, err, c.want)
		}
	}
	// The agent refuses what the collector would: bounds are its own.
	bad := rtAsk{Via: "h3", Count: 5000, Interval: time.Millisecond, Wait: time.Millisecond}
	if _, err := agentRoundTrip(a, bad); err == nil || !strings.Contains(err.Error(), "-c 5000") {
		t.Errorf("agent took a round trip of 5000 probes: %v", err)
	}
}

func TestRoundTripQuery(t *testing.T) {
	want := rtAsk{Via: "h3", EV: wire.MakeEV(1, 2, 0), Back: 3, Count: 7, Interval: 5 * time.Millisecond, Wait: 200 * time.Millisecond}
	q, err := parseQueryString(want.query())
	if err != nil || q != want {
		t.Fatalf("query round trip: %+v, %v; want %+v", q, err, want)
	}
	if _, err := parseQueryString("via=h3&count=x"); err == nil {
		t.Fatal("a query without its numbers parsed")
	}
}
