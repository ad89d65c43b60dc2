package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/softmrc/softmrc/nic/daemon/daemontest"
	"github.com/softmrc/softmrc/nic/pathprobe"
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

func TestWriteProm(t *testing.T) {
	var b bytes.Buffer
	writeProm(&b, []pathprobe.Link{{Name: "p0-t0-0--p0-t1-1", Kind: "t0-t1", State: pathprobe.Dead, Loss: 1},
		{Name: "h0--p0-t0-0", Kind: "nic-t0", State: pathprobe.Good}})
	for _, want := range []string{
		`mrc_link_loss{link="p0-t0-0--p0-t1-1",kind="t0-t1"} 1`,
		`mrc_link_state{link="p0-t0-0--p0-t1-1",kind="t0-t1"} 2`,
		`mrc_link_state{link="h0--p0-t0-0",kind="nic-t0"} 0`,
		"# TYPE mrc_link_state gauge",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("exposition lacks %q:\n%s", want, b.String())
		}
	}
	// Prometheus' own parser reads it.
	p := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(b.String()))
	if err != nil || len(fams) != 2 || len(fams["mrc_link_state"].GetMetric()) != 2 {
		t.Fatalf("expfmt: %v, %d families", err, len(fams))
	}
}
