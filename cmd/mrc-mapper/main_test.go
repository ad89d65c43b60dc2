package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/softmrc/softmrc/nic/daemon/daemontest"
)

// TestArgsAndErrors: bad commands and bounds are refused; a NIC without
// the path-probe agent says how to turn it on; a folder that is not a run
// says so.
func TestArgsAndErrors(t *testing.T) {
	p := daemontest.Start(t, 1)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{}, "map or watch"},
		{[]string{"mapp"}, "map or watch"},
		{[]string{"map"}, "no hosts"},
		{[]string{"map", "--dir", t.TempDir()}, "mrc-testbed run folder"},
		{[]string{"map", "-d", p.Sock[0]}, "path_probes"},
		{[]string{"watch", "-d", p.Sock[0], "--interval", "1ms"}, "--interval"},
		{[]string{"watch", "-d", p.Sock[0], "--duration", "48h"}, "--duration"},
	} {
		err := run(c.args, &bytes.Buffer{})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("mrc-mapper %v: %v, want an error mentioning %q", c.args, err, c.want)
		}
	}
}
