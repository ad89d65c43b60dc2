package main

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/softmrc/softmrc/nic/daemon/daemontest"
	"github.com/softmrc/softmrc/nic/pathprobe"
	"github.com/softmrc/softmrc/nic/vproto"
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
		{[]string{}, "map, watch, agent or roundtrip"},
		{[]string{"mapp"}, "map, watch, agent or roundtrip"},
		{[]string{"map"}, "no hosts"},
		{[]string{"agent", "-d", p.Sock[0], "--mgmt-if", "nosuch0"}, `management interface "nosuch0"`},
		{[]string{"agent", "-d", p.Sock[0], "--listen", "[::]:9470"}, "binds every interface"},
		{[]string{"agent", "-d", p.Sock[0], "--listen", ":9470"}, "binds every interface"},
		{[]string{"agent", "-d", p.Sock[0], "--listen", "0.0.0.0:9470"}, "binds every interface"},
		{[]string{"agent", "-d", p.Sock[0], "--listen", "127.0.0.1:0", "--deny"}, "--token-file"},
		{[]string{"agent", "-d", p.Sock[0], "--listen", "127.0.0.1:0", "--token-file", "/nonexistent/tok"}, "--token-file"},
		{[]string{"agent", "--listen", "127.0.0.1:0"}, "-d SOCKET"},
		{[]string{"watch", "--agent", "127.0.0.1:1", "--deny"}, "shared token"},
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

// TestAgent: the collector reaches a NIC through a mrc-mapper agent over
// HTTP: the NIC's answer (here: path probes off) comes back whole; deny
// is refused unless the agent was started with --deny, and then unless
// the request carries the shared token (HTTP 401, and the NIC never sees
// it); with the token the NIC's own answer comes back.
func TestAgent(t *testing.T) {
	p := daemontest.Start(t, 1)
	tokFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokFile, []byte("s3cret-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name  string
		deny  bool
		token string // what the request carries ("": no header)
		want  int
	}{
		{"without --deny", false, "s3cret-token", http.StatusForbidden},
		{"no token", true, "", http.StatusUnauthorized},
		{"wrong token", true, "guess", http.StatusUnauthorized},
		{"token prefix", true, "s3cret", http.StatusUnauthorized},
		// The NIC refuses the link (daemontest's NIC has no path
		// template): 400 with its reason, so the request reached it.
		{"token", true, "s3cret-token", http.StatusBadRequest},
	} {
		t.Run(c.name, func(t *testing.T) {
			args := []string{"--listen", "127.0.0.1:0", "-d", p.Sock[0]}
			if c.deny {
				args = append(args, "--deny", "--token-file", tokFile)
			}
			addr := make(chan string, 1)
			done := make(chan error, 1)
			ctx, cancel := context.WithCancel(context.Background())
			go func() { done <- runAgent(ctx, args, func(a string) { addr <- a }) }()
			var a string
			select {
			case a = <-addr:
			case err := <-done:
				t.Fatalf("agent: %v", err)
			}
			err := run([]string{"map", "--agent", a}, &bytes.Buffer{})
			if err == nil || !strings.Contains(err.Error(), "path_probes") || !strings.Contains(err.Error(), a) {
				t.Errorf("map --agent %s: %v, want the NIC's path_probes error naming the agent", a, err)
			}
			err = newAgentSource(a, c.token).ctl(vproto.CtlDeny, "p0-t0-0--p0-t1-1")
			req, _ := http.NewRequest(http.MethodPost, "http://"+a+"/allow", strings.NewReader(url.Values{"link": {"p0-t0-0--p0-t1-1"}}.Encode()))
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			if c.token != "" {
				req.Header.Set("Authorization", "Bearer "+c.token)
			}
			r, herr := http.DefaultClient.Do(req)
			if herr != nil {
				t.Fatal(herr)
			}
			r.Body.Close()
			if r.StatusCode != c.want {
				t.Errorf("allow via agent: HTTP %d, want %d", r.StatusCode, c.want)
			}
			if err == nil {
				t.Errorf("deny via agent: no error, want HTTP %d's", c.want)
			} else if c.want == http.StatusUnauthorized && !strings.Contains(err.Error(), "token") {
				t.Errorf("deny via agent without the token: %v, want an error saying to send the token", err)
			}
			if err := newAgentSource("127.0.0.1:1", "").ctl(vproto.CtlDeny, "x"); err == nil {
				t.Error("an agent address with nobody listening gave no error")
			}
			cancel() // as SIGTERM does
			if err := <-done; err != nil {
				t.Fatalf("agent stopped with %v", err)
			}
		})
	}
}

// TestTokenFile: a token file others can read, an empty one, or both
// flags are refused; the token is the file's content without the newline.
func TestTokenFile(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string, mode os.FileMode) string {
		f := filepath.Join(dir, name)
		if err := os.WriteFile(f, []byte(content), mode); err != nil {
			t.Fatal(err)
		}
		os.Chmod(f, mode)
		return f
	}
	for _, c := range []struct {
		flags   tokenFlags
		want    string
		wantErr string
	}{
		{tokenFlags{file: write("ok", "abc\n", 0o600)}, "abc", ""},
		{tokenFlags{file: write("open", "abc", 0o644)}, "", "chmod 600"},
		{tokenFlags{file: write("empty", "\n", 0o600)}, "", "empty"},
		{tokenFlags{file: "x", value: "y"}, "", "not both"},
		{tokenFlags{value: "y"}, "y", ""},
		{tokenFlags{}, "", ""},
	} {
		got, err := c.flags.load()
		if got != c.want || (err == nil) != (c.wantErr == "") || (err != nil && !strings.Contains(err.Error(), c.wantErr)) {
			t.Errorf("load(%+v) = %q, %v; want %q, error with %q", c.flags, got, err, c.want, c.wantErr)
		}
	}
}

// fakeSource is a host whose loops are given.
type fakeSource []pathprobe.Stats

func (f fakeSource) String() string                           { return "fake" }
func (f fakeSource) stats() ([]pathprobe.Stats, error)        { return f, nil }
func (f fakeSource) ctl(cmd vproto.CtlCmd, link string) error { return nil }

// TestWatchMetrics: watch --metrics serves the map it just made over HTTP,
// in a form Prometheus' parser reads: a blackholed T0–T1 link seen by
// both hosts under its T0 is state 2.
func TestWatchMetrics(t *testing.T) {
	var srcs []source
	for _, h := range []string{"h0", "h1"} {
		var st fakeSource
		for j := -1; j < 2; j++ {
			lost := 0
			if j == 1 {
				lost = 64
			}
			s := pathprobe.Stats{Target: pathprobe.Target{Host: h, Plane: 0, T0: "p0-t0-0", T1: j}, WinSent: 64, WinLost: lost, Loss: float64(lost) / 64,
				LongSent: 256, LongLost: 4 * lost, LongLoss: float64(lost) / 64}
			if j >= 0 {
				s.T1Sw = "p0-t1-" + string(rune('0'+j))
			}
			st = append(st, s)
		}
		srcs = append(srcs, st)
	}
	pub, err := serveMetrics("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer pub.close()
	var out bytes.Buffer
	if err := watchLoop(srcs, &out, false, time.Second, 10*time.Millisecond, 30*time.Millisecond, pub); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "p0-t0-0--p0-t1-1 good -> dead") {
		t.Errorf("watch printed %q", out.String())
	}
	r, err := http.Get("http://" + pub.addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Body.Close()
	parser := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := parser.TextToMetricFamilies(r.Body)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, m := range fams["mrc_link_state"].GetMetric() {
		got[m.GetLabel()[0].GetValue()] = m.GetGauge().GetValue()
	}
	want := map[string]float64{"p0-t0-0--p0-t1-1": 2, "p0-t0-0--p0-t1-0": 0, "h0--p0-t0-0": 0, "h1--p0-t0-0": 0}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("/metrics mrc_link_state %v, want %v", got, want)
	}
}

// phasedHost is a host whose loops through T1 1 die for map rounds 3 to
// 5 (a whole T1 down, then repaired); it records the denylist calls.
type phasedHost struct {
	host, t0 string
	round    *int
	mu       *sync.Mutex
	calls    *[]string
}

func (h phasedHost) String() string { return h.host }
func (h phasedHost) stats() ([]pathprobe.Stats, error) {
	h.mu.Lock()
	r := *h.round
	if h.host == "h2" {
		*h.round++ // h2 is asked last in every round
	}
	h.mu.Unlock()
	var st []pathprobe.Stats
	for j := -1; j < 2; j++ {
		lost := 0
		if j == 1 && r >= 3 && r <= 5 {
			lost = 64
		}
		s := pathprobe.Stats{Target: pathprobe.Target{Host: h.host, Plane: 0, T0: h.t0, T1: j}, WinSent: 64, WinLost: lost, Loss: float64(lost) / 64,
			LongSent: 256, LongLost: 4 * lost, LongLoss: float64(lost) / 64}
		if j >= 0 {
			s.T1Sw = fmt.Sprintf("p0-t1-%d", j)
		}
		st = append(st, s)
	}
	return st, nil
}
func (h phasedHost) ctl(cmd vproto.CtlCmd, link string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	*h.calls = append(*h.calls, fmt.Sprintf("%s %s %s", h.host, cmd, link))
	return nil
}

// TestWatchDenySwitch: watch --deny with a whole T1 bad denies every link
// of it on every NIC (the map shows the switch, not its links), and
// allows them again once they are back and good for --hold.
func TestWatchDenySwitch(t *testing.T) {
	var round int
	var mu sync.Mutex
	var calls []string
	srcs := []source{phasedHost{"h0", "p0-t0-0", &round, &mu, &calls}, phasedHost{"h2", "p0-t0-1", &round, &mu, &calls}}
	var out bytes.Buffer
	// 1 s holds ~90 rounds of 10 ms; the phases need 7.
	if err := watchLoop(srcs, &out, true, 0, 10*time.Millisecond, time.Second, nil); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if round < 7 {
		t.Fatalf("only %d map rounds in 1 s, want at least 7 to see the repair", round)
	}
	var want []string
	for _, op := range []vproto.CtlCmd{vproto.CtlDeny, vproto.CtlAllow} {
		for _, l := range []string{"p0-t0-0--p0-t1-1", "p0-t0-1--p0-t1-1"} {
			for _, h := range []string{"h0", "h2"} {
				want = append(want, fmt.Sprintf("%s %s %s", h, op, l))
			}
		}
	}
	if !slices.Equal(calls, want) {
		t.Fatalf("denylist calls\n%s\nwant\n%s\nwatch printed:\n%s", strings.Join(calls, "\n"), strings.Join(want, "\n"), out.String())
	}
	if !strings.Contains(out.String(), "p0-t1-1 good -> dead") || !strings.Contains(out.String(), "p0-t1-1 dead -> good") {
		t.Errorf("watch did not report the switch going bad and coming back:\n%s", out.String())
	}
}
