package daemon

import (
	"bytes"
	"strings"
	"testing"
)

// TestAppendLines: telemetry bodies never exceed the message size, split
// only at line ends, and lose or reorder nothing.
func TestAppendLines(t *testing.T) {
	for _, c := range []struct {
		name   string
		body   string
		lines  []string
		max    int
		bodies int // messages sent plus the body kept
	}{
		{"fits", "a\n", []string{"bb\n", "cc\n"}, 100, 1},
		{"splits", "a\n", []string{"bbbb\n", "cccc\n", "dddd\n"}, 8, 3},
		{"empty body, split", "", []string{"bbbb\n", "cccc\n", "dddd\n"}, 10, 2},
		{"a line longer than max goes alone", "a\n", []string{"0123456789\n", "x\n"}, 5, 3},
	} {
		t.Run(c.name, func(t *testing.T) {
			var lines []byte
			var ends []int
			for _, l := range c.lines {
				lines = append(lines, l...)
				ends = append(ends, len(lines))
			}
			var sent [][]byte
			kept := appendLines([]byte(c.body), lines, ends, c.max, func(b []byte) { sent = append(sent, b) })
			all := append(sent, kept)
			if len(all) != c.bodies {
				t.Errorf("%d bodies, want %d: %q", len(all), c.bodies, all)
			}
			var joined []byte
			for _, b := range all {
				if len(b) > c.max && bytes.Count(b, []byte("\n")) > 1 {
					t.Errorf("body %q longer than %d with more than one line", b, c.max)
				}
				if len(b) > 0 && b[len(b)-1] != '\n' {
					t.Errorf("body %q does not end at a line end", b)
				}
				joined = append(joined, b...)
			}
			if want := c.body + strings.Join(c.lines, ""); string(joined) != want {
				t.Errorf("joined %q, want %q", joined, want)
			}
		})
	}
}
