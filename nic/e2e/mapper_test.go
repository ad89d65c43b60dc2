package e2e

import (
	"encoding/json"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/softmrc/softmrc/nic/config"
	"github.com/softmrc/softmrc/nic/pathprobe"
)

// TestTestbedMapper: on clos-2p with every NIC's path-probe agent on
// (5 ms), each NIC–T0 and T0–T1 link in turn is blackholed without telling
// the mapper; within 2 s mrc-mapper names that exact link, and no other,
// as not good; after the fault is cleared the map is all good again.
func TestTestbedMapper(t *testing.T) {
	requireNetns(t)
	tb := upTestbedWith(t, "clos-2p", func(c *config.Config) { c.PathProbes = 5 * time.Millisecond }, nil, "h0", "h1", "h2", "h3")
	mapper := func() []pathprobe.Link {
		out, err := exec.Command(filepath.Join(tb.bin, "mrc-mapper"), "map", "--dir", tb.dir, "--bad", "--json").CombinedOutput()
		if err != nil {
			t.Fatalf("mrc-mapper: %v\n%s", err, out)
		}
		var ls []pathprobe.Link
		if err := json.Unmarshal(out, &ls); err != nil {
			t.Fatalf("mrc-mapper --json: %v\n%s", err, out)
		}
		return ls
	}
	names := func(ls []pathprobe.Link) []string {
		var n []string
		for _, l := range ls {
			n = append(n, l.Name+" "+l.State)
		}
		return n
	}
	waitClean := func(what string) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for {
			ls := mapper()
			if len(ls) == 0 {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: the map still shows %v", what, names(ls))
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	waitClean("fault-free fabric")
	var links []string
	for _, h := range []string{"h0", "h1", "h2", "h3"} {
		for p := 0; p < 2; p++ {
			t0 := "0"
			if h == "h2" || h == "h3" {
				t0 = "1"
			}
			links = append(links, h+"--p"+string(rune('0'+p))+"-t0-"+t0)
		}
	}
	for p := 0; p < 2; p++ {
		for k := 0; k < 2; k++ {
			for j := 0; j < 2; j++ {
				links = append(links, "p"+string(rune('0'+p))+"-t0-"+string(rune('0'+k))+"--p"+string(rune('0'+p))+"-t1-"+string(rune('0'+j)))
			}
		}
	}
	for _, link := range links {
		tb.fault(t, link, "blackhole")
		start := time.Now()
		var got []pathprobe.Link
		for {
			got = mapper()
			if len(got) == 1 && got[0].Name == link {
				break
			}
			if time.Since(start) > 2*time.Second {
				tb.fault(t, link, "clear")
				t.Fatalf("%s blackholed: after 2 s the map shows %v", link, names(got))
			}
			time.Sleep(50 * time.Millisecond)
		}
		took := time.Since(start)
		t.Logf("%-20s named %s in %v (%s)", link, got[0].State, took.Round(10*time.Millisecond), got[0].Evidence)
		tb.fault(t, link, "clear")
		waitClean(link + " cleared")
	}
	if !slices.Contains(links, "p1-t0-1--p1-t1-1") || len(links) != 16 {
		t.Fatalf("links %v: want the 16 of clos-2p", links)
	}
}
