package oamflag

import (
	"flag"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/softmrc/softmrc/internal/wire"
)

func TestParseEV(t *testing.T) {
	for _, c := range []struct {
		ev, path string
		want     wire.EV
		bad      string
	}{
		{"", "", wire.MakeEV(0, 0, 0), ""},
		{"0x10200003", "", 0x10200003, ""},
		{"", "1,1", wire.MakeEV(1, 1, 0), ""},
		{"1", "1,1", 0, "not both"},
		{"zz", "", 0, "EV number"},
		{"", "1", 0, "PLANE,T1"},
		{"", "16,0", 0, "PLANE,T1"},
	} {
		got, err := ParseEV(c.ev, c.path)
		if (err != nil) != (c.bad != "") || (err != nil && !strings.Contains(err.Error(), c.bad)) || (err == nil && got != c.want) {
			t.Errorf("ParseEV(%q, %q) = %v, %v; want %v or an error with %q", c.ev, c.path, got, err, c.want, c.bad)
		}
	}
}

func TestCheck(t *testing.T) {
	for _, c := range []struct {
		needed bool
		args   []string
		want   wire.EV
		bad    string
	}{
		{false, []string{"h3"}, wire.MakeEV(0, 0, 0), ""},
		{true, []string{"h3"}, 0, "--ev N or --path"},
		{true, []string{"--path", "1,1", "h3"}, wire.MakeEV(1, 1, 0), ""},
		// Flags after the host, as README writes `mrc-ping h3 --path 0,1`
		// (it failed with "want exactly one HOST").
		{true, []string{"h3", "--path", "1,1"}, wire.MakeEV(1, 1, 0), ""},
		{false, []string{"h3", "--ev", "0x10200003", "-W", "2s"}, 0x10200003, ""},
		{false, []string{"-W", "11s", "h3"}, 0, "-W"},
		{false, []string{"-W", "0s", "h3"}, 0, "-W"},
		{false, []string{}, 0, "one HOST"},
		{false, []string{"h1", "h3"}, 0, "one HOST"},
	} {
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		f := Register(fs, c.needed, time.Second)
		ev, host, err := f.Parse(fs, "usage", c.args)
		if (err != nil) != (c.bad != "") || (err != nil && !strings.Contains(err.Error(), c.bad)) || (err == nil && (ev != c.want || host != "h3")) {
			t.Errorf("%v (path needed %v): %v %q, %v; want %v or an error with %q", c.args, c.needed, ev, host, err, c.want, c.bad)
		}
	}
}
