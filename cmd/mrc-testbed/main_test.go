package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
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
	if err := do(append([]string{"up"}, common...)...); err != nil {
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
