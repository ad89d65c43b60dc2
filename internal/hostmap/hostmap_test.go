package hostmap

import (
	"net/netip"
	"testing"
)

func TestFormatParse(t *testing.T) {
	m := map[string]netip.Addr{
		"h1": netip.MustParseAddr("fd00:12:ffff::2"),
		"h0": netip.MustParseAddr("fd00:12:ffff::1"),
	}
	s := Format(m)
	if want := "h0=fd00:12:ffff::1,h1=fd00:12:ffff::2"; s != want {
		t.Fatalf("Format = %q, want %q", s, want)
	}
	got, err := Parse(s)
	if err != nil || len(got) != 2 || got["h1"] != m["h1"] || got["h0"] != m["h0"] {
		t.Fatalf("Parse(%q) = %v, %v", s, got, err)
	}
	for _, bad := range []string{"h0", "=fd00::1", "h0=fd00::1,h1=nope", "h0=fd00::1,"} {
		if _, err := Parse(bad); err == nil {
			t.Errorf("Parse(%q) accepted", bad)
		}
	}
}

func TestResolve(t *testing.T) {
	env := "h0=fd00:12:ffff::1,h3=fd00:12:ffff::4"
	for _, c := range []struct{ env, in, want string }{
		{env, "h3", "fd00:12:ffff::4"},
		{env, "h3:18515", "[fd00:12:ffff::4]:18515"},
		{env, "[h3]:7", "[fd00:12:ffff::4]:7"},
		{env, "h9", "h9"},
		{env, "fd00:12:ffff::4", "fd00:12:ffff::4"},
		{env, "[fd00::9]:18515", "[fd00::9]:18515"},
		{"", "h3", "h3"},
	} {
		got, err := Resolve(c.env, c.in)
		if err != nil || got != c.want {
			t.Errorf("Resolve(%q, %q) = %q, %v; want %q", c.env, c.in, got, err, c.want)
		}
	}
	if _, err := Resolve("h0", "h0"); err == nil {
		t.Error("a malformed map resolved")
	}
	if n := Names(env); len(n) != 2 || n[0] != "h0" || n[1] != "h3" {
		t.Errorf("Names = %v", n)
	}
}
