package run

import (
	"strings"
	"testing"

	"github.com/softmrc/softmrc/testbed/plan"
	"github.com/softmrc/softmrc/testbed/topo"
)

// TestValidateFault: the rule a fault follows (misfit), checked without a
// testbed, as mrc-lab check uses it. Each refusal is one applyFault would
// return at run time.
func TestValidateFault(t *testing.T) {
	build := func(dp topo.Dataplane) *plan.Plan {
		tp, err := topo.Preset("clos-2p")
		if err != nil {
			t.Fatal(err)
		}
		tp.Dataplane = dp
		pl, err := plan.Build(tp, plan.Options{RunDir: "/run/softmrc/check"})
		if err != nil {
			t.Fatal(err)
		}
		return pl
	}
	xdp, kernel := build(topo.DataplaneXDP), build(topo.DataplaneKernel)
	for _, c := range []struct {
		pl         *plan.Plan
		target, op string
		want       string // "" = allowed
	}{
		{xdp, "h0--p0-t0-0", "loss=5%", ""},
		{xdp, "p0-t0-0:u1", "blackhole", ""},
		{xdp, "p0-t1-1", "hang", ""},
		{xdp, "p0-t1-1", "restart", ""},
		{xdp, "h0:p0", "down", ""},
		{xdp, "h0:p0", "loss=5%", "a NIC port takes down|up|clear only"},
		{xdp, "h0:p0", "flap=50ms/50ms", "a NIC port takes down|up|clear only"},
		{xdp, "h0--p0-t0-0", "hang", "hang applies to a switch"},
		{xdp, "h0--p0-t0-0", "restart", "restart applies to a switch"},
		{xdp, "nosuch", "down", "unknown fault target"},
		{kernel, "p0-t0-0--p0-t1-1", "down", ""},
		{kernel, "p0-t0-0--p0-t1-1", "blackhole", "needs the xdp dataplane"},
		{kernel, "p0-t1-1", "hang", "needs the xdp dataplane"},
		{kernel, "p0-t1-1", "restart", "restart applies to a switch run by mrc-switchd"},
	} {
		op, err := ParseOp(c.op)
		if err != nil {
			t.Fatalf("%s: %v", c.op, err)
		}
		err = ValidateFault(c.pl, c.target, op)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s %s on %s: %v, want allowed", c.target, c.op, c.pl.Dataplane, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s %s on %s: %v, want %q", c.target, c.op, c.pl.Dataplane, err, c.want)
		}
	}
}
