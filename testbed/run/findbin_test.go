package run

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// FindBin looks in --bin, then beside the running executable (bin/mrc-testbed
// finds bin/mrc-switchd without flags), then $MRC_BIN, then PATH.
func TestFindBinOrder(t *testing.T) {
	root := t.TempDir()
	mk := func(dir string, exe bool) string {
		d := filepath.Join(root, dir)
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		mode := os.FileMode(0o644)
		if exe {
			mode = 0o755
		}
		if err := os.WriteFile(filepath.Join(d, "mrc-switchd"), []byte("#!/bin/sh\n"), mode); err != nil {
			t.Fatal(err)
		}
		return d
	}
	flag, beside, env, path := mk("flag", true), mk("beside", true), mk("env", true), mk("path", true)
	notExe := mk("notexe", false)
	empty := filepath.Join(root, "empty")
	if err := os.MkdirAll(empty, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name                  string
		dir, exeDir, env, pth string
		want                  string
	}{
		{"--bin wins", flag, beside, env, path, flag},
		{"beside the executable", "", beside, env, path, beside},
		{"then $MRC_BIN", "", empty, env, path, env},
		{"then PATH", "", empty, "", path, path},
		{"not executable is skipped", notExe, empty, "", path, path},
		{"nowhere", "", empty, "", empty, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			old := executable
			executable = func() (string, error) { return filepath.Join(tc.exeDir, "mrc-testbed"), nil }
			t.Cleanup(func() { executable = old })
			t.Setenv("MRC_BIN", tc.env)
			t.Setenv("PATH", tc.pth)
			want := ""
			if tc.want != "" {
				want = filepath.Join(tc.want, "mrc-switchd")
			}
			if got := FindBin(tc.dir, "mrc-switchd"); got != want {
				t.Fatalf("FindBin = %q, want %q", got, want)
			}
		})
	}
}

// TestCopyLogs: each process's log is copied once (a restarted switch's
// two records share one), a log never written is skipped, and the
// folder is made.
func TestCopyLogs(t *testing.T) {
	src, dst := t.TempDir(), filepath.Join(t.TempDir(), "out", "logs")
	for name, body := range map[string]string{"h0.log": "h0 said\n", "t1.log": "first life\nsecond life\n"} {
		if err := os.WriteFile(filepath.Join(src, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	procs := []Proc{
		{Name: "h0", Log: filepath.Join(src, "h0.log")},
		{Name: "t1", Log: filepath.Join(src, "t1.log")},
		{Name: "t1", Log: filepath.Join(src, "t1.log")},
		{Name: "h1", Log: filepath.Join(src, "h1.log")}, // never started
	}
	if err := copyLogs(procs, dst); err != nil {
		t.Fatal(err)
	}
	ents, _ := os.ReadDir(dst)
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	if got := strings.Join(names, " "); got != "h0.log t1.log" {
		t.Fatalf("kept %q, want h0.log t1.log", got)
	}
	if b, _ := os.ReadFile(filepath.Join(dst, "t1.log")); string(b) != "first life\nsecond life\n" {
		t.Errorf("t1.log kept as %q", b)
	}
}

// TestDownWithoutRun: down on a folder that holds no run (a second down,
// or a run that never came up) removes nothing and succeeds, as
// docs/testbed.md's "safe to repeat" promises; it used to fail with "no
// run in DIR", so `mrc-testbed down` twice exited 1.
func TestDownWithoutRun(t *testing.T) {
	var log strings.Builder
	dir := filepath.Join(t.TempDir(), "gone")
	if err := DownWith(dir, DownOptions{Log: slog.New(slog.NewTextHandler(&log, nil))}); err != nil {
		t.Fatalf("down on a missing run folder: %v, want nothing to do", err)
	}
	if !strings.Contains(log.String(), "nothing to remove") {
		t.Errorf("log %q does not say there was nothing to remove", log.String())
	}
}

// TestWaitStoppableKeepsExitStatus: a command stopped because its context
// ended reports its own exit status. exec's Wait reported the context's
// error even for a command that caught SIGTERM and exited 0, so
// `mrc-testbed exec h0 -- mrc-write-bw …` interrupted with Ctrl-C said
// "context canceled" and exited 1 after the tool had printed its results.
func TestWaitStoppableKeepsExitStatus(t *testing.T) {
	for _, c := range []struct {
		name, script string
		wantCode     int // -1: no error
	}{
		{"caught, exit 0", `trap 'exit 0' TERM; echo up; while :; do sleep 0.01; done`, -1},
		{"caught, exit 3", `trap 'exit 3' TERM; echo up; while :; do sleep 0.01; done`, 3},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			cmd := stoppable(ctx, []string{"sh", "-c", c.script})
			out, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			// The trap is set once "up" is printed; then end the context.
			if _, err := io.ReadFull(out, make([]byte, 3)); err != nil {
				t.Fatal(err)
			}
			cancel()
			err = waitStoppable(ctx, cmd)
			var ee *exec.ExitError
			switch {
			case c.wantCode < 0 && err != nil:
				t.Errorf("err %v, want none: the command exited 0", err)
			case c.wantCode >= 0 && (!errors.As(err, &ee) || ee.ExitCode() != c.wantCode):
				t.Errorf("err %v, want exit status %d", err, c.wantCode)
			}
		})
	}
}
