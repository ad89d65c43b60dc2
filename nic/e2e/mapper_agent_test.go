package e2e

import (
	"encoding/json"
	"fmt"
	"image/color"
	"image/png"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/softmrc/softmrc/nic/config"
	"github.com/softmrc/softmrc/nic/fabricpic"
	"github.com/softmrc/softmrc/nic/pathprobe"
)

// TestTestbedMapperAgents: the collector on one host gathers every host's
// loops over the management network from a `mrc-mapper agent` in each
// host's namespace (not through device sockets): a blackholed T0–T1 link
// it was not told about is named alone, and watch --deny through the
// agents puts it into a far host's denylist.
func TestTestbedMapperAgents(t *testing.T) {
	requireNetns(t)
	hosts := []string{"h0", "h1", "h2", "h3"}
	tb := upTestbedWith(t, "clos-2p", func(c *config.Config) { c.PathProbes = 5 * time.Millisecond }, nil, hosts...)
	testbed := filepath.Join(tb.bin, "mrc-testbed")
	var agents []string
	token := filepath.Join(tb.dir, "mapper.token")
	if err := os.WriteFile(token, []byte("e2e-shared-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, h := range hosts {
		// No --listen: the agent binds its management address (mgmt0's)
		// at port 9470 by itself, and only that.
		addr := net.JoinHostPort(planField(t, tb.plan, h, "mgmt_addr"), "9470")
		var log lockedBuffer
		c := exec.Command(testbed, "exec", "--dir", tb.dir, h, "--",
			filepath.Join(tb.bin, "mrc-mapper"), "agent", "-d", tb.hosts[h].cfg.DeviceSocket, "--deny", "--token-file", token)
		c.Stdout, c.Stderr = &log, &log
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			c.Process.Signal(syscall.SIGTERM)
			c.Wait()
			t.Logf("agent on %s:\n%s", h, log.String())
		})
		agents = append(agents, "--agent", addr)
	}
	// The collector runs in h0's namespace: only the management network
	// reaches the other hosts' agents from there.
	collector := func(args ...string) *exec.Cmd {
		return exec.Command(testbed, append([]string{"exec", "--dir", tb.dir, "h0", "--", filepath.Join(tb.bin, "mrc-mapper")}, append(args, agents...)...)...)
	}
	bad := func() ([]pathprobe.Link, error) {
		out, err := collector("map", "--bad", "--json").Output()
		if err != nil {
			return nil, err
		}
		var ls []pathprobe.Link
		return ls, json.Unmarshal(out, &ls)
	}
	// Agents start in the background: wait until the map is whole and clean.
	deadline := time.Now().Add(10 * time.Second)
	for {
		ls, err := bad()
		if err == nil && len(ls) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("map over the agents: %v, bad %v", err, ls)
		}
		time.Sleep(100 * time.Millisecond)
	}
	out, err := collector("map").CombinedOutput()
	if err != nil || strings.Count(string(out), " good ") != 16 {
		t.Fatalf("map over 4 agents: %v, want 16 good links:\n%s", err, out)
	}
	// From h0, have h1's NIC (through its agent) probe a round trip
	// through h2 and back over the other T1.
	h1Agent := net.JoinHostPort(planField(t, tb.plan, "h1", "mgmt_addr"), "9470")
	out, err = exec.Command(testbed, "exec", "--dir", tb.dir, "h0", "--", filepath.Join(tb.bin, "mrc-mapper"), "roundtrip",
		"--agent", h1Agent, "--via", "h2", "--path", "1,0", "--back", "1", "-c", "5", "-i", "5ms").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "5 probes sent, 5 received") || !strings.Contains(string(out), "out T1 0, back T1 1") {
		t.Fatalf("roundtrip through h1's agent via h2: %v\n%s", err, out)
	}
	t.Logf("roundtrip through h1's agent:\n%s", out)
	const link = "p1-t0-1--p1-t1-0"
	tb.fault(t, link, "blackhole")
	defer tb.fault(t, link, "clear")
	start := time.Now()
	for {
		ls, err := bad()
		if err == nil && len(ls) == 1 && ls[0].Name == link {
			t.Logf("named over the management network in %v: %+v", time.Since(start).Round(10*time.Millisecond), ls[0])
			break
		}
		// 3 s, not the 2 s (TestTestbedMapper asserts that): each
		// poll here starts a collector through `mrc-testbed exec`, which
		// alone took up to 0.5 s on the shared 2-core VM.
		if time.Since(start) > 3*time.Second {
			t.Fatalf("after 3 s the map over the agents shows %+v (%v)", ls, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// The picture of the same map: the dead link drawn red.
	pic := filepath.Join(tb.dir, "map.png")
	if out, err := collector("map", "--png", pic).CombinedOutput(); err != nil {
		t.Fatalf("map --png: %v\n%s", err, out)
	}
	f, err := os.Open(pic)
	if err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(f)
	f.Close()
	if err != nil {
		t.Fatalf("map --png wrote no PNG: %v", err)
	}
	red, orange := 0, 0
	for y := img.Bounds().Min.Y; y < img.Bounds().Max.Y; y++ {
		for x := img.Bounds().Min.X; x < img.Bounds().Max.X; x++ {
			switch c := color.RGBAModel.Convert(img.At(x, y)).(color.RGBA); c {
			case fabricpic.Dead:
				red++
			case fabricpic.Lossy:
				orange++
			}
		}
	}
	if red+orange < 50 {
		t.Fatalf("map --png %s: %d red and %d orange pixels, want the bad link drawn", pic, red, orange)
	}
	// A collector without the agents' token changes nothing: every
	// agent refuses its deny (HTTP 401) and the NICs' denylists stay
	// empty.
	w, err := collector("watch", "--deny", "--token", "not-the-token", "--interval", "50ms", "--duration", "300ms").CombinedOutput()
	if err != nil || !strings.Contains(string(w), "deny link "+link+" on 0 NICs") || !strings.Contains(string(w), "token") {
		t.Fatalf("watch --deny over the agents with a wrong token: %v, want every agent to refuse it\n%s", err, w)
	}
	for _, h := range hosts {
		if rows := denyRows(t, tb, h); len(rows) != 0 {
			t.Fatalf("%s's denylist after a deny without the token: %+v, want empty", h, rows)
		}
	}
	w, err = collector("watch", "--deny", "--token-file", token, "--interval", "50ms", "--duration", "1s", "--hold", "10s").CombinedOutput()
	if err != nil || !strings.Contains(string(w), "deny link "+link+" on 4 NICs") {
		t.Fatalf("watch --deny over the agents: %v\n%s", err, w)
	}
	if rows := denyRows(t, tb, "h3"); len(rows) != 1 || rows[0].Entry != "link "+link {
		t.Fatalf("h3's denylist after watch --deny over the agents: %+v", rows)
	}
	t.Logf("watch --deny over the agents:\n%s", w)
}

// TestTestbedMapperDenySwitch: watch --deny with a whole T1 blackholed
// (every port) denies both of its T0–T1 links on the NICs, although the
// map names the switch and hides its links, and withdraws them after the
// repair.
func TestTestbedMapperDenySwitch(t *testing.T) {
	requireNetns(t)
	hosts := []string{"h0", "h3"}
	tb := upTestbedWith(t, "clos-2p", func(c *config.Config) { c.PathProbes = 5 * time.Millisecond }, nil, hosts...)
	wout := startDenyWatch(t, tb, "300ms")
	entries := func(h string) []string {
		var e []string
		for _, r := range denyRows(t, tb, h) {
			e = append(e, r.Entry)
		}
		slices.Sort(e)
		return e
	}
	waitFor := func(what string, limit time.Duration, cond func() bool) time.Duration {
		t.Helper()
		return waitUntil(t, what, limit, cond, func() string { return fmt.Sprintf("h0 %v, h3 %v", entries("h0"), entries("h3")) })
	}
	// The watch must have seen the switch's links good first.
	waitFor("a whole map of the clean fabric", 5*time.Second, func() bool { return mapSeen(tb) })
	time.Sleep(200 * time.Millisecond) // the watch (50 ms interval) has mapped it too
	const sw = "p0-t1-1"
	want := []string{"link p0-t0-0--p0-t1-1", "link p0-t0-1--p0-t1-1"}
	tb.fault(t, sw, "blackhole")
	took := waitFor("both links of "+sw+" denied on h0 and h3", 3*time.Second, func() bool {
		return slices.Equal(entries("h0"), want) && slices.Equal(entries("h3"), want)
	})
	t.Logf("%s blackholed: its links denied on both NICs %v after the fault", sw, took.Round(10*time.Millisecond))
	tb.fault(t, sw, "clear")
	took = waitFor("entries withdrawn after the repair", 5*time.Second, func() bool {
		return len(entries("h0")) == 0 && len(entries("h3")) == 0
	})
	t.Logf("entries withdrawn %v after the repair (hold 300ms)", took.Round(10*time.Millisecond))
	if !strings.Contains(wout.String(), sw+" good -> ") || !strings.Contains(wout.String(), " -> good\n") {
		t.Errorf("the watch did not report %s as a switch going bad and back", sw)
	}
}

// mapSeen: every host's loops are judged (a map of the clean fabric is
// whole), so a watch started before has seen every link.
func mapSeen(tb *testbed) bool {
	out, err := exec.Command(filepath.Join(tb.bin, "mrc-mapper"), "map", "--dir", tb.dir).CombinedOutput()
	return err == nil && strings.Count(string(out), " good ") >= 8
}
