package main

import (
	"bytes"
	"flag"
	"strings"
	"testing"

	"github.com/softmrc/softmrc/nic/daemon/daemontest"
)

// TestArgsAndErrors: bad arguments are refused before anything is sent;
// a NIC without a path template says why it cannot ping.
func TestArgsAndErrors(t *testing.T) {
	p := daemontest.Start(t, 1) // ECMP mode: no template
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-c", "0", "h1"}, "-c 0"},
		{[]string{"-i", "10us", "h1"}, "at least 1ms"},
		{[]string{"-W", "1m", "h1"}, "-W"},
		{[]string{}, "one HOST"},
		{[]string{"-d", p.Sock[0], "h1"}, "srv6"},
		{[]string{"-d", p.Sock[0], "--back", "0", "h1"}, "srv6"},
		{[]string{"--back", "0", "--hop", "1", "h1"}, "--back and --hop"},
		{[]string{"--back", "256", "h1"}, "--back 256"},
		{[]string{"--ev", "1", "--path", "0,0", "h1"}, "not both"},
		{[]string{"-d", "/nonexistent.sock", "h1"}, "is mrc-nicd running"},
	} {
		err := run(c.args, &bytes.Buffer{})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("mrc-ping %v: %v, want an error mentioning %q", c.args, err, c.want)
		}
	}
	// --help lists every flag the command has.
	if err := run([]string{"-h"}, &bytes.Buffer{}); err != flag.ErrHelp {
		t.Fatalf("-h: %v", err)
	}
	for _, f := range []string{"-ev", "-path", "-hop", "-back", "-c", "-i", "-W", "-d"} {
		if !strings.Contains(usage, strings.TrimPrefix(f, "-")) {
			t.Errorf("usage does not mention %s", f)
		}
	}
}
