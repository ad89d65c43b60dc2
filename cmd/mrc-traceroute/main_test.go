package main

import (
	"bytes"
	"flag"
	"strings"
	"testing"

	"github.com/softmrc/softmrc/nic/daemon/daemontest"
)

func TestArgsAndErrors(t *testing.T) {
	p := daemontest.Start(t, 1) // ECMP mode: no template
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"h1"}, "--ev N or --path"},
		{[]string{"--ev", "1", "--path", "0,0", "h1"}, "--ev N or --path"},
		{[]string{"--ev", "x", "h1"}, "--ev"},
		{[]string{"--path", "0", "h1"}, "PLANE,T1"},
		{[]string{"-q", "0", "--ev", "1", "h1"}, "-q 0"},
		{[]string{"--ev", "1"}, "one HOST"},
		{[]string{"-d", p.Sock[0], "--ev", "1", "h1"}, "srv6"},
	} {
		err := run(c.args, &bytes.Buffer{})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("mrc-traceroute %v: %v, want an error mentioning %q", c.args, err, c.want)
		}
	}
	if err := run([]string{"-h"}, &bytes.Buffer{}); err != flag.ErrHelp {
		t.Fatalf("-h: %v", err)
	}
}
