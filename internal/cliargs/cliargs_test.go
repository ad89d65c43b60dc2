package cliargs

import (
	"flag"
	"io"
	"slices"
	"testing"
)

func TestParse(t *testing.T) {
	for _, c := range []struct {
		args []string
		path string
		c    int
		ops  []string
	}{
		{[]string{"h3"}, "", 5, []string{"h3"}},
		{[]string{"--path", "0,1", "h3"}, "0,1", 5, []string{"h3"}},
		{[]string{"h3", "--path", "0,1", "-c", "2"}, "0,1", 2, []string{"h3"}},
		{[]string{"-c", "2", "h3", "--path=0,1", "h4"}, "0,1", 2, []string{"h3", "h4"}},
		{[]string{"h3", "--", "-c", "9"}, "", 5, []string{"h3", "-c", "9"}},
		{[]string{"--", "h3"}, "", 5, []string{"h3"}},
		{nil, "", 5, nil},
	} {
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		path := fs.String("path", "", "")
		n := fs.Int("c", 5, "")
		ops, err := Parse(fs, c.args)
		if err != nil || *path != c.path || *n != c.c || !slices.Equal(ops, c.ops) {
			t.Errorf("%q: path %q c %d operands %q err %v; want %q %d %q", c.args, *path, *n, ops, err, c.path, c.c, c.ops)
		}
	}
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	if _, err := Parse(fs, []string{"h3", "--nope"}); err == nil {
		t.Error("an unknown flag after an operand was accepted")
	}
}
