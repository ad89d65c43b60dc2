package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/softmrc/softmrc/switchd/ctl"
	"github.com/softmrc/softmrc/testbed/plan"
)

// linkCounters sums, over both ends of a testbed link, the frames the XDP
// switches sent out of its ports and the frames they dropped for a fault.
func (tb *testbed) linkCounters(t *testing.T, link string) (tx, faultDrops uint64) {
	t.Helper()
	b, err := os.ReadFile(tb.plan)
	if err != nil {
		t.Fatal(err)
	}
	var p plan.Plan
	if err := yaml.Unmarshal(b, &p); err != nil {
		t.Fatal(err)
	}
	found := 0
	for _, s := range p.Switches {
		for _, pt := range s.Ports {
			if pt.Link != link {
				continue
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			c, err := ctl.Dial(ctx, s.CtlSock)
			if err != nil {
				cancel()
				t.Fatal(err)
			}
			st, err := c.Stats(ctx)
			c.Close()
			cancel()
			if err != nil {
				t.Fatal(err)
			}
			for _, ps := range st.Ports {
				if ps.Interface == pt.Ifname || ps.Name == pt.Ifname {
					tx += ps.Counters.TxPackets
					faultDrops += ps.Counters.Drops.Fault
					found++
				}
			}
		}
	}
	if found != 2 {
		t.Fatalf("link %s: found %d switch ports, want 2", link, found)
	}
	return tx, faultDrops
}

// TestTestbedDenyLink: on clos-2p with real daemons and XDP switches, a
// link entry put in by mrcctl on both ends keeps every frame of a verified
// h0 -> h3 run (data one way, SACKs and probes the other) off that T0–T1
// link, even blackholed: its switch ports send nothing and drop nothing.
// The same run before the entry does use the link (the check can fail).
func TestTestbedDenyLink(t *testing.T) {
	requireNetns(t)
	tb := upTestbed(t, "clos-2p", "h0", "h3")
	const link = "p0-t0-0--p0-t1-0"
	tx0, _ := tb.linkCounters(t, link)
	out, err := tb.run(t, "mrc-write-bw", "h0", "h3", "-s", "65536", "-D", "1", "--verify")
	if err != nil {
		t.Fatalf("run before the entry: %v\n%s", err, out)
	}
	tx1, _ := tb.linkCounters(t, link)
	if tx1 == tx0 {
		t.Fatalf("the run sent nothing over %s before it was denied: the check below could not fail", link)
	}
	for _, hn := range []string{"h0", "h3"} {
		h := tb.hosts[hn]
		out, err := exec.Command(filepath.Join(tb.bin, "mrcctl"), "-d", h.cfg.DeviceSocket, "deny", "link", link).CombinedOutput()
		if err != nil || !strings.Contains(string(out), "ok") {
			t.Fatalf("mrcctl deny link on %s: %v: %s", hn, err, out)
		}
	}
	tb.fault(t, link, "blackhole")
	defer tb.fault(t, link, "clear")
	tx2, drop2 := tb.linkCounters(t, link)
	out, err = tb.run(t, "mrc-write-bw", "h0", "h3", "-s", "65536", "-D", "1", "--verify")
	if err != nil {
		t.Fatalf("run with %s denied and blackholed: %v\n%s", link, err, out)
	}
	tx3, drop3 := tb.linkCounters(t, link)
	if tx3 != tx2 || drop3 != drop2 {
		t.Fatalf("denied link %s: its switch ports sent %d and dropped %d frames during the run, want 0 and 0", link, tx3-tx2, drop3-drop2)
	}
	if m := bwRow.FindStringSubmatch(out); m != nil {
		t.Logf("with %s denied and blackholed: %s MiB/s, verified; before: %d frames over it", link, m[4], tx1-tx0)
	}
	list, err := exec.Command(filepath.Join(tb.bin, "mrcctl"), "-d", tb.hosts["h0"].cfg.DeviceSocket, "deny", "list").CombinedOutput()
	if err != nil || !strings.Contains(string(list), "link "+link) {
		t.Fatalf("mrcctl deny list: %v: %s", err, list)
	}
}
