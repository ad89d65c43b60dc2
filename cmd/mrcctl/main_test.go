package main

import (
	"bytes"
	"os/exec"
	"strings"
	"testing"

	"github.com/softmrc/softmrc/nic/daemon/daemontest"
)

// TestParseNum: 0x is hex, a bare number decimal, and a bare number with hex
// letters is refused. Until 2026-12-05 "ff" read as 0xff and "102" as 102,
// so a QPN copied without its 0x could name another QP.
func TestParseNum(t *testing.T) {
	for in, want := range map[string]uint32{"0x101": 0x101, "257": 257, "0X10": 16, "102": 102, "0x0102": 0x102, "0x0000002a": 42} {
		if got, err := parseNum(in, "x"); err != nil || got != want {
			t.Errorf("parseNum(%q) = %#x, %v; want %#x", in, got, err, want)
		}
	}
	for in, want := range map[string]string{
		"zz":          `QPN "zz": want a number`,
		"ff":          `QPN "ff": hex needs its 0x (0xff)`,
		"0x":          `QPN "0x": want a 32-bit hex number`,
		"0xzz":        `QPN "0xzz": want a 32-bit hex number`,
		"-1":          `QPN "-1": want a number`,
		"0x1ffffffff": `want a 32-bit hex number`,
	} {
		if _, err := parseNum(in, "QPN"); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("parseNum(%q): %v, want %q", in, err, want)
		}
	}
}

func TestCommands(t *testing.T) {
	nics := daemontest.Start(t, 2)
	sock := nics.Sock[0]
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"ports"}, "p1"},
		{[]string{"qps"}, "QPN"},
		{[]string{"counters"}, "engine.RxFrames"},
		{[]string{"sessions"}, "mrcctl"},
		{[]string{"-json", "ports"}, `"plane": 1`},
		{[]string{"deny", "plane", "1"}, "ok"},
		{[]string{"deny", "ev", "0x10000001"}, "ok"},
		{[]string{"deny", "ev", "0x10000001"}, "already in the denylist"},
		{[]string{"deny", "list"}, "plane 1"},
		{[]string{"-json", "deny", "list"}, `"entry": "ev 0x10000001"`},
		{[]string{"allow", "ev", "0x10000001"}, "ok"},
		{[]string{"allow", "plane", "1"}, "ok"},
		{[]string{"counters"}, "engine.TxCtrlByPlane.plane1"},
		{[]string{"watch", "--interval", "1ms", "--count", "3"}, `"kind":"nicport"`},
	} {
		var out bytes.Buffer
		if err := run(append([]string{"-d", sock}, tc.args...), &out); err != nil {
			t.Fatalf("mrcctl %v: %v", tc.args, err)
		}
		if !strings.Contains(out.String(), tc.want) {
			t.Errorf("mrcctl %v: output lacks %q:\n%s", tc.args, tc.want, out.String())
		}
	}
	for _, bad := range [][]string{{"evs", "0x999"}, {"deny", "plane", "7"}, {"nope"}, {"deny", "x", "1"},
		{"allow", "plane", "1"}, {"deny", "path", "0"}, {"deny", "link", "h1--p0-t0-0"}, {"deny", "link", "a--b", "0x10"},
		{"watch", "--interval", "100us"}, {"watch", "--count", "-1"}, {"watch", "extra"}} {
		if err := run(append([]string{"-d", sock}, bad...), &bytes.Buffer{}); err == nil {
			t.Errorf("mrcctl %v succeeded", bad)
		}
	}
}

// mrcctl is a client: it links the protocol and the client library, never
// the daemon (its AF_XDP ports, engine, service).
func TestLinksNoDaemonCode(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("skipping: no go command in PATH to list mrcctl's dependencies")
	}
	out, err := exec.Command(goBin, "list", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	for _, pkg := range strings.Fields(string(out)) {
		for _, banned := range []string{"/nic/xsk", "/nic/daemon", "/nic/service", "/nic/regions", "/internal/mrc"} {
			if strings.HasSuffix(pkg, banned) {
				t.Errorf("mrcctl links %s", pkg)
			}
		}
	}
}
