package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/softmrc/softmrc/testbed/scenarios"
)

func TestCommands(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(bad, []byte("name: x\nspines: 3\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	nomark := filepath.Join(t.TempDir(), "README.md")
	if err := os.WriteFile(nomark, []byte("# no markers\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		args      []string
		code      int
		out, errs string
	}{
		{[]string{"--help"}, 0, "mrc-lab run [options] FILE|NAME|all...", ""},
		{nil, 2, "usage:", ""},
		{[]string{"list"}, 0, "s02-nic-links", ""},
		{[]string{"check", "s01-bandwidth"}, 0, "s01-bandwidth: ok", ""},
		{[]string{"check", bad}, 1, "", bad + `:2: spines: unknown field "spines"`},
		{[]string{"check", "no-such"}, 1, "", "no-such: no such file and no shipped scenario of that name"},
		{[]string{"check"}, 2, "", "name at least one scenario"}, // was exit 1, silent
		{[]string{"check", "all"}, 0, "s12-chaos: ok", ""},       // as run all; was "all: no such file"
		{[]string{"run"}, 2, "", "name at least one scenario"},
		{[]string{"run", "no-such"}, 2, "", "no such file"},
		{[]string{"run", "--variants", "mrc-2qp", "s07-collectives"}, 2, "", `s07-collectives has no variant "mrc-2qp" (mrc-1qp, mrc-1qp-loss`},
		{[]string{"run", "--variants", "mrc-1qp", "s01-bandwidth"}, 2, "", "s01-bandwidth has no variants"},
		{[]string{"run", "--readme", nomark, "s01-bandwidth"}, 2, "", "--readme " + nomark + ": no \"<!-- reproduce:begin"},
		{[]string{"frobnicate"}, 2, "", `unknown command "frobnicate"`},
	}
	for _, c := range cases {
		var out, errs strings.Builder
		code := run(context.Background(), c.args, &out, &errs)
		if code != c.code || !strings.Contains(out.String(), c.out) || !strings.Contains(errs.String(), c.errs) {
			t.Errorf("mrc-lab %q: exit %d, stdout %q, stderr %q; want exit %d, %q, %q", c.args, code, out.String(), errs.String(), c.code, c.out, c.errs)
		}
	}
	// Every shipped scenario parses.
	for _, n := range scenarios.Names() {
		if _, ok, err := scenarios.Load(n); !ok || err != nil {
			t.Errorf("%s: %v", n, err)
		}
	}
}
