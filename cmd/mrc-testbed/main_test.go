package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/softmrc/softmrc/testbed/netns"
	"github.com/softmrc/softmrc/testbed/run"
)

// TestCLI drives the commands in-process on the pair preset with the kernel
// dataplane (no daemons needed): up, up again, status, fault, exec, down.
func TestCLI(t *testing.T) {
	if err := netns.Supported(); err != nil {
		if os.Getenv("MRC_TEST_REQUIRE_PRIV") == "1" {
			t.Fatal(err)
		}
		t.Skipf("skipping: %v", err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	dir := filepath.Join(t.TempDir(), "run")
	ctx := context.Background()
	do := func(args ...string) error { return dispatch(ctx, args[0], args[1:], log) }
	t.Cleanup(func() { do("down", "--dir", dir) })
	prefix := fmt.Sprintf("cli%d", os.Getpid()%10000)
	common := []string{"--preset", "pair", "--prefix", prefix, "--dir", dir, "--dataplane", "kernel"}
	err := do(append([]string{"up"}, common...)...)
	if errors.Is(err, netns.ErrNoSRv6) {
		// The commands are under test here, not the switches' routes: on a
		// kernel without seg6local, ecmp mode's plain routes do.
		t.Logf("%v: ecmp mode instead", err)
		if err := do("down", "--dir", dir); err != nil {
			t.Fatal(err)
		}
		common = append(common, "--mode", "ecmp")
		err = do(append([]string{"up"}, common...)...)
	}
	if err != nil {
		t.Fatal(err)
	}
	if err := do(append([]string{"up"}, common...)...); err != nil {
		t.Fatalf("second up: %v", err)
	}
	if err := do("fault", "--dir", dir, "h1--p0-t0-0", "down"); err != nil {
		t.Fatal(err)
	}
	s, err := run.GetStatus(dir)
	if err != nil || len(s.Faults) != 1 || s.Faults[0].Target != "h1--p0-t0-0" {
		t.Fatalf("status after fault: %+v %v", s, err)
	}
	if err := do("status", "--dir", dir, "--json"); err != nil {
		t.Fatal(err)
	}
	if err := do("fault", "--dir", dir, "h1--p0-t0-0", "sideways"); err == nil {
		t.Error("unknown fault op accepted")
	}
	if err := do("exec", "--dir", dir, "h0", "--", "true"); err != nil {
		t.Fatal(err)
	}
	if err := do("exec", "--dir", dir, "h0", "--", "false"); err == nil {
		t.Error("exec of false succeeded")
	}
	// A group: every member at once, in its own namespace, with its rank.
	var out, errOut bytes.Buffer
	script := `echo rank=$MRC_RANK n=$MRC_NRANKS rdv=$MRC_RENDEZVOUS dev=$MRC_DEVICE ns=$(ip netns identify)`
	if err := run.ExecGroup(ctx, dir, "h1,h0", []string{"sh", "-c", script}, &out, &errOut); err != nil {
		t.Fatalf("exec group: %v\n%s", err, errOut.String())
	}
	p, err := run.LoadPlan(dir)
	if err != nil {
		t.Fatal(err)
	}
	rdv := p.Host("h1").MgmtAddr.Addr().String()
	for i, h := range []string{"h1", "h0"} {
		want := fmt.Sprintf("%s: rank=%d n=2 rdv=%s dev=%s ns=%s\n", h, i, rdv, run.NICSocket(p.Host(h)), p.Host(h).NS)
		if !strings.Contains(out.String(), want) {
			t.Errorf("exec group output lacks %q:\n%s", want, out.String())
		}
	}
	err = run.ExecGroup(ctx, dir, "hosts", []string{"sh", "-c", "exit $MRC_RANK"}, io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "h1: exit status 1") || strings.Contains(err.Error(), "h0:") {
		t.Errorf("exec group with h1 failing: %v", err)
	}
	if err := run.ExecGroup(ctx, dir, "h0,h9", []string{"true"}, io.Discard, io.Discard); err == nil {
		t.Error("group with an unknown host accepted")
	}
	if err := do("plan", "--preset", "nope"); err == nil || !strings.Contains(err.Error(), "clos-2p") {
		t.Errorf("bad preset: %v", err)
	}
	if err := do("up", "--preset", "pair", "somefile.yaml"); err == nil {
		t.Error("FILE and --preset together accepted")
	}
	if err := do("down", "--dir", dir); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); err == nil {
		t.Error("run directory left after down")
	}
	if left, _ := netns.List(prefix + "-"); len(left) > 0 {
		t.Errorf("namespaces left: %v", left)
	}
}

// TestExitCodeNamesGroupFailures: a group's failure ("h1: exit status 3")
// is printed, as docs/testbed.md says; a single command's exit is silent.
// Before, both exited with the status and printed nothing.
func TestExitCodeNamesGroupFailures(t *testing.T) {
	err := exec.Command("sh", "-c", "exit 3").Run()
	var buf bytes.Buffer
	if c := exitCode("exec", err, &buf); c != 3 || buf.Len() != 0 {
		t.Errorf("single: code %d, printed %q", c, buf.String())
	}
	if c := exitCode("exec", fmt.Errorf("h1: %w", err), &buf); c != 3 || !strings.Contains(buf.String(), "mrc-testbed exec: h1: exit status 3") {
		t.Errorf("group: code %d, printed %q", c, buf.String())
	}
	buf.Reset()
	if c := exitCode("down", errors.New("no run"), &buf); c != 1 || !strings.Contains(buf.String(), "no run") {
		t.Errorf("other: code %d, printed %q", c, buf.String())
	}
}

// TestTopologyFlags: up's flags override the topology: --nics starts the
// NICs a preset leaves out, --nic-threads sets their threads, and without
// them the preset's values stay.
func TestTopologyFlags(t *testing.T) {
	for _, tc := range []struct {
		args    []string
		nics    bool
		threads int
	}{
		{[]string{"--preset", "clos-2p"}, false, 0},
		{[]string{"--preset", "clos-2p", "--nics"}, true, 0},
		{[]string{"--nics", "--preset", "pair", "--nic-threads", "3"}, true, 3},
	} {
		f := newFlags("up")
		pos, _, err := f.parse(tc.args)
		if err != nil {
			t.Fatal(err)
		}
		top, err := f.topology(pos)
		if err != nil {
			t.Fatalf("%v: %v", tc.args, err)
		}
		if top.NICs != tc.nics || top.NICThreads != tc.threads {
			t.Errorf("%v: nics %v, nic_threads %d; want %v, %d", tc.args, top.NICs, top.NICThreads, tc.nics, tc.threads)
		}
	}
}
