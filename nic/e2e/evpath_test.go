package e2e

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/softmrc/softmrc/nic/config"
)

// TestTestbedEVPathsAndPathMetrics (issue 13 item 5): during a transfer
// h0 -> h3 across a T1 on clos-2p, `mrcctl evs` names every EV's
// physical path, switch by switch, as the EV's plane and T1 field say
// (h0 is under T0 0, h3 under T0 1), and the daemon's /metrics has the
// per-EV telemetry as one series per (peer, plane, T1), not per EV.
func TestTestbedEVPathsAndPathMetrics(t *testing.T) {
	requireNetns(t)
	tb := upTestbedWith(t, "clos-2p", func(c *config.Config) { c.Metrics = "[::1]:9478" }, nil, "h0", "h3")
	var evsOut, metrics string
	var werr error
	done := make(chan struct{})
	go func() {
		defer close(done)
		deadline := time.Now().Add(20 * time.Second)
		for time.Now().Before(deadline) {
			time.Sleep(100 * time.Millisecond)
			qpn, err := tb.senderQP("h0")
			if err != nil {
				werr = err
				continue
			}
			out, err := exec.Command(filepath.Join(tb.bin, "mrcctl"), "-d", tb.hosts["h0"].cfg.DeviceSocket, "evs", qpn).CombinedOutput()
			if err != nil {
				werr = fmt.Errorf("mrcctl evs %s: %v: %s", qpn, err, out)
				continue
			}
			m, err := exec.Command(filepath.Join(tb.bin, "mrc-testbed"), "exec", "--dir", tb.dir, "h0", "--",
				"curl", "-sf", "http://[::1]:9478/metrics").CombinedOutput()
			if err != nil {
				werr = fmt.Errorf("curl /metrics in h0: %v: %s", err, m)
				continue
			}
			evsOut, metrics, werr = string(out), string(m), nil
			return
		}
	}()
	out, err := tb.run(t, "mrc-write-bw", "h0", "h3", "-s", "65536", "-D", "3", "--verify")
	<-done
	if err != nil {
		t.Fatalf("transfer: %v\n%s", err, out)
	}
	if evsOut == "" {
		t.Fatalf("no EV table during the transfer: %v", werr)
	}
	t.Logf("mrcctl evs on h0 (first rows):\n%s", firstLines(evsOut, 6))
	row := regexp.MustCompile(`(?m)^(0x[0-9a-f]{8})\s+(\d)\s+(\d)\s+((?:[0-9a-f]{4} ?)+?)\s+(p\S+ p\S+ p\S+ h3)\s+(\S+)\s`)
	rows := row.FindAllStringSubmatch(evsOut, -1)
	if len(rows) < 8 || len(rows) != strings.Count(evsOut, "\n")-1 {
		t.Fatalf("%d EV rows with a 4-node physical path, of %d lines:\n%s", len(rows), strings.Count(evsOut, "\n")-1, evsOut)
	}
	planesT1 := map[string]int{}
	for _, r := range rows {
		plane, t1 := r[2], r[3]
		want := fmt.Sprintf("p%s-t0-0 p%s-t1-%s p%s-t0-1 h3", plane, plane, t1, plane)
		if r[5] != want {
			t.Errorf("EV %s (plane %s, T1 %s): switches %q, want %q", r[1], plane, t1, r[5], want)
		}
		planesT1[plane+","+t1]++
	}
	series := regexp.MustCompile(`(?m)^mrc_path_sent_packets_total\{peer="h3",plane="(\d)",t1="(\d)"\} (\d+)`).FindAllStringSubmatch(metrics, -1)
	if len(series) != len(planesT1) {
		t.Fatalf("%d mrc_path_sent_packets_total series for %d EVs on %d (plane, T1) paths, want one per path:\n%s",
			len(series), len(rows), len(planesT1), grepLines(metrics, "mrc_path_"))
	}
	var sent int
	for _, s := range series {
		if planesT1[s[1]+","+s[2]] == 0 {
			t.Errorf("series for plane %s T1 %s, which no EV has", s[1], s[2])
		}
		var n int
		fmt.Sscan(s[3], &n)
		sent += n
	}
	if sent == 0 {
		t.Fatalf("the per-path series count no packets:\n%s", grepLines(metrics, "mrc_path_"))
	}
	// The gauge of the path, in whatever state its EVs are by now: under
	// load (CI runs packages side by side) a stalled loop's timeouts can
	// leave a plane's EVs ASSUMED_BAD when the metrics are read, as the
	// CI run at 71ab47e3 had plane 0's 72 EVs.
	if !regexp.MustCompile(`(?m)^mrc_path_evs\{peer="h3",plane="0",state="[A-Z_]+",t1="0"\} [1-9]`).MatchString(metrics) {
		t.Errorf("no mrc_path_evs state gauge for plane 0, T1 0:\n%s", grepLines(metrics, "mrc_path_evs"))
	}
	t.Logf("%d EVs on %d paths -> %d series per counter; %d packets counted\n%s", len(rows), len(planesT1), len(series), sent, grepLines(metrics, "mrc_path_sent"))
}

func firstLines(s string, n int) string {
	l := strings.SplitN(s, "\n", n+1)
	return strings.Join(l[:min(n, len(l))], "\n")
}
