package run

import (
	"os"
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
