package lab

import (
	"testing"

	"github.com/softmrc/softmrc/testbed/plan"
	"github.com/softmrc/softmrc/testbed/topo"
)

// TestBuildPlanRunID: two runs (two prefixes) given one run id get the same
// addresses, so ECMP hashes a QP the same way in both (runVariants); without
// one each derives its own from its prefix; a topology's run_id wins.
func TestBuildPlanRunID(t *testing.T) {
	tp, err := topo.Preset("clos-2p")
	if err != nil {
		t.Fatal(err)
	}
	fixed := *tp
	fixed.RunID = 7
	for _, c := range []struct {
		name  string
		tp    *topo.Topology
		runID uint16
		want  func(prefix string) uint16
	}{
		{"shared", tp, 0x5a5a, func(string) uint16 { return 0x5a5a }},
		{"none", tp, 0, plan.RunIDFor},
		{"topology's own", &fixed, 0x5a5a, func(string) uint16 { return 7 }},
	} {
		t.Run(c.name, func(t *testing.T) {
			var addrs []string
			for _, prefix := range []string{"lbaaaaaa", "lbbbbbbb"} {
				pl, err := buildPlan(c.tp, prefix, t.TempDir(), c.runID)
				if err != nil {
					t.Fatal(err)
				}
				if pl.Prefix != prefix || pl.RunID != c.want(prefix) {
					t.Fatalf("prefix %s: plan %s with run id %#x, want run id %#x", prefix, pl.Prefix, pl.RunID, c.want(prefix))
				}
				addrs = append(addrs, plan.HostAddr(pl.RunID, 0, 0).String())
			}
			if same := addrs[0] == addrs[1]; same != (c.runID != 0 || c.tp.RunID != 0) {
				t.Errorf("h0's plane-0 addresses %v: the same = %v", addrs, same)
			}
		})
	}
	if tp.RunID != 0 {
		t.Errorf("buildPlan changed the caller's topology: run id %#x", tp.RunID)
	}
}
