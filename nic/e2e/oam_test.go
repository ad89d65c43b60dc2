package e2e

import (
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/softmrc/softmrc/nic/vproto"
)

// TestTestbedOAM: on clos-2p with real daemons and XDP switches, mrc-ping
// measures an exact cross-T1 path h0 -> h3 (an echo) and loops cut at each
// switch, mrc-traceroute walks every hop of it; with the T1–T0 link of the
// far side blackholed, traceroute shows the cut between that T1 and T0 and
// ping of h3 gets no answer.
func TestTestbedOAM(t *testing.T) {
	requireNetns(t)
	tb := upTestbed(t, "clos-2p", "h0", "h3")
	sock := tb.hosts["h0"].cfg.DeviceSocket
	tool := func(name string, args ...string) (string, error) {
		out, err := exec.Command(filepath.Join(tb.bin, name), append([]string{"-d", sock}, args...)...).CombinedOutput()
		return string(out), err
	}
	stats := regexp.MustCompile(`(\d+) probes transmitted, (\d+) received`)
	for _, hop := range []string{"0", "1", "2", "3"} {
		out, err := tool("mrc-ping", "-c", "3", "-i", "10ms", "--path", "0,1", "--hop", hop, "h3")
		m := stats.FindStringSubmatch(out)
		if err != nil || m == nil || m[2] != "3" || !strings.Contains(out, "rtt min/avg/max/mdev") {
			for _, hn := range []string{"h0", "h3"} {
				c, _ := exec.Command(filepath.Join(tb.bin, "mrcctl"), "-d", tb.hosts[hn].cfg.DeviceSocket, "counters").CombinedOutput()
				t.Logf("%s counters:\n%s", hn, grepLines(string(c), "oam", "Rx", "port.p0"))
			}
			for _, sw := range []string{"p0-t0-0", "p0-t1-1", "p0-t0-1"} {
				st, _ := exec.Command(filepath.Join(tb.bin, "mrc-switchd"), "stats", "--ctl", filepath.Join(tb.dir, "switch", sw+".sock")).CombinedOutput()
				t.Logf("%s:\n%s", sw, st)
			}
			t.Fatalf("mrc-ping --hop %s: %v\n%s", hop, err, out)
		}
		t.Logf("mrc-ping --hop %s:\n%s", hop, out)
	}
	out, err := tool("mrc-traceroute", "--path", "0,1", "-q", "2", "h3")
	if err != nil || !strings.Contains(out, "h3 reached") {
		t.Fatalf("mrc-traceroute: %v\n%s", err, out)
	}
	for _, want := range []string{" 1  p0-t0-0 (uSID 4000)", " 2  p0-t1-1 (uSID 0200)", " 3  p0-t0-1 (uSID 4100)", " 4  h3 "} {
		if !strings.Contains(out, want) {
			t.Errorf("traceroute lacks %q:\n%s", want, out)
		}
	}
	t.Logf("mrc-traceroute:\n%s", out)

	tb.fault(t, "p0-t0-1--p0-t1-1", "blackhole")
	defer tb.fault(t, "p0-t0-1--p0-t1-1", "clear")
	out, err = tool("mrc-traceroute", "--path", "0,1", "-q", "2", "-W", "200ms", "h3")
	if err == nil || !strings.Contains(out, "probes stop after hop 2 (p0-t1-1): the cut is between p0-t1-1 and p0-t0-1") {
		t.Fatalf("traceroute over the blackholed link: %v\n%s", err, out)
	}
	t.Logf("mrc-traceroute, p0-t0-1--p0-t1-1 blackholed:\n%s", out)
	out, err = tool("mrc-ping", "-c", "2", "-i", "10ms", "-W", "200ms", "--path", "0,1", "h3")
	if m := stats.FindStringSubmatch(out); err == nil || m == nil || m[2] != "0" {
		t.Fatalf("mrc-ping over the blackholed link: %v\n%s", err, out)
	}
	// The other T1 of the plane still works.
	out, err = tool("mrc-ping", "-c", "2", "-i", "10ms", "--path", "0,0", "h3")
	if m := stats.FindStringSubmatch(out); err != nil || m == nil || m[2] != "2" {
		t.Fatalf("mrc-ping over T1 0: %v\n%s", err, out)
	}
}

func grepLines(s string, keys ...string) string {
	var b strings.Builder
	for _, l := range strings.Split(s, "\n") {
		for _, k := range keys {
			if strings.Contains(l, k) {
				b.WriteString(l + "\n")
				break
			}
		}
	}
	return b.String()
}

// TestTestbedOAMReflect: mrc-ping --back probes an exact round trip
// h0 → T1 1 → h3 → T1 j → h0 on clos-2p, h3's NIC reflecting it along the
// return container h0 chose. With the return-only link p0-t0-0--p0-t1-0
// blackholed, the round trip back through T1 0 loses every probe while
// the one back through T1 1 and h3's own echo (which returns through T1
// 1 too) still answer: the return half is the one h0 named, not h3's.
func TestTestbedOAMReflect(t *testing.T) {
	requireNetns(t)
	tb := upTestbed(t, "clos-2p", "h0", "h3")
	sock := tb.hosts["h0"].cfg.DeviceSocket
	ping := func(args ...string) (string, int) {
		out, _ := exec.Command(filepath.Join(tb.bin, "mrc-ping"), append([]string{"-d", sock, "-i", "5ms", "-W", "300ms"}, args...)...).CombinedOutput()
		m := regexp.MustCompile(`(\d+) probes transmitted, (\d+) received`).FindStringSubmatch(string(out))
		if m == nil {
			t.Fatalf("mrc-ping %v:\n%s", args, out)
		}
		n, _ := strconv.Atoi(m[2])
		return string(out), n
	}
	reflected := func() uint64 {
		var c vproto.Counters
		if err := ctlJSON(tb.hosts["h3"].cfg.DeviceSocket, vproto.CtlRequest{Cmd: vproto.CtlCounters}, &c); err != nil {
			t.Fatal(err)
		}
		return c.Daemon["oam_reflected"]
	}
	r0 := reflected()
	for _, back := range []string{"0", "1"} {
		out, got := ping("-c", "5", "--path", "0,1", "--back", back, "h3")
		if got != 5 || !strings.Contains(out, "reflected at h3, back through T1 "+back) {
			t.Fatalf("mrc-ping --back %s on a clean fabric: %d of 5 answered\n%s", back, got, out)
		}
		t.Logf("mrc-ping --back %s:\n%s", back, out)
	}
	if out, _ := ping("-c", "1", "--path", "0,1", "--back", "0", "h3"); !strings.Contains(out, "uSIDs 4000 0200 4100 c100 | back 4100 0100 4000 c000") {
		t.Errorf("the round trip's uSIDs are not h0's path to h3 and back through T1 0:\n%s", out)
	}
	if n := reflected() - r0; n < 10 {
		t.Fatalf("h3's NIC reflected %d probes, want the 10 answered ones at least", n)
	}

	const link = "p0-t0-0--p0-t1-0" // on the way back through T1 0 only
	tb.fault(t, link, "blackhole")
	defer tb.fault(t, link, "clear")
	r1 := reflected()
	if out, got := ping("-c", "5", "--path", "0,1", "--back", "0", "h3"); got != 0 {
		t.Fatalf("mrc-ping --back 0 with %s blackholed: %d of 5 answered\n%s", link, got, out)
	}
	if n := reflected() - r1; n < 5 {
		t.Fatalf("h3 reflected %d of the 5 probes back through T1 0: the forward half broke, not the return", n)
	}
	for _, args := range [][]string{{"--back", "1"}, {}} {
		if out, got := ping(append([]string{"-c", "5", "--path", "0,1"}, append(args, "h3")...)...); got != 5 {
			t.Fatalf("mrc-ping %v with %s blackholed: %d of 5 answered\n%s", args, link, got, out)
		}
	}
	// The same through mrc-mapper roundtrip (what a collector asks a NIC).
	for _, c := range []struct {
		back, want string
		ok         bool
	}{{"0", "5 probes sent, 0 received", false}, {"1", "5 probes sent, 5 received", true}} {
		out, err := exec.Command(filepath.Join(tb.bin, "mrc-mapper"), "roundtrip", "-d", sock, "--via", "h3", "--path", "0,1",
			"--back", c.back, "-c", "5", "-i", "5ms", "-W", "300ms").CombinedOutput()
		if (err == nil) != c.ok || !strings.Contains(string(out), c.want) {
			t.Fatalf("mrc-mapper roundtrip --back %s with %s blackholed: %v, want %q\n%s", c.back, link, err, c.want, out)
		}
		t.Logf("mrc-mapper roundtrip --back %s:\n%s", c.back, out)
	}
}
