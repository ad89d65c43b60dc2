package config

import (
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/softmrc/softmrc/internal/wire"
	"gopkg.in/yaml.v3"
)

const good = `version: 1
host: h0
mode: srv6
template: h0.tmpl.yaml
evs: 16
cc: {algorithm: default, initial_window: 65536, max_window: 1048576}
device_socket: /tmp/h0.sock
metrics: "[::1]:9470"
ports:
  - name: p0
    interface: eth0
    plane: 0
    mac: 02:00:00:00:01:00
    neighbor_mac: 02:00:00:00:10:00
    address: fd00:1:0::1
    locator: 5f00:1:c000::/48
  - interface: eth1
    plane: 1
    mac: 02:00:00:00:01:01
    neighbor_mac: 02:00:00:00:10:01
    address: fd00:1:1::1
    locator: 5f00:1:c001::/48
    pacing_bps: 1000000000
    delay: 5ms
`

func TestParseGood(t *testing.T) {
	c, err := Parse([]byte(good), "good")
	if err != nil {
		t.Fatal(err)
	}
	if c.MTU != DefaultMTU || c.EVs != 16 || c.Attach != "auto" || c.Mode != ModeSRv6 {
		t.Errorf("defaults/values: %+v", c)
	}
	if got := c.Ports[1].PortName(); got != "eth1" {
		t.Errorf("PortName = %q, want eth1", got)
	}
	if c.Ports[0].MAC != (wire.MAC{2, 0, 0, 0, 1, 0}) {
		t.Errorf("mac = %v", c.Ports[0].MAC)
	}
	if c.Ports[1].Locator != netip.MustParsePrefix("5f00:1:c001::/48") || c.Ports[1].PacingBps != 1e9 || c.Ports[1].Delay != 5*time.Millisecond || c.Ports[0].Delay != 0 {
		t.Errorf("port 1 = %+v", c.Ports[1])
	}
	if p, ok := c.Port(1); !ok || p.Interface != "eth1" {
		t.Errorf("Port(1) = %+v, %v", p, ok)
	}
	if c.QP.RetryTimeout != DefaultRetryTimeout {
		t.Errorf("qp.retry_timeout = %v, want the default %v", c.QP.RetryTimeout, DefaultRetryTimeout)
	}
}

func TestRoundTripAndLoad(t *testing.T) {
	c, err := Parse([]byte(good), "good")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "nic.yaml")
	if err := c.Write(path); err != nil {
		t.Fatal(err)
	}
	c2, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if c2.Template != filepath.Join(dir, "h0.tmpl.yaml") {
		t.Errorf("template not resolved against the file's folder: %q", c2.Template)
	}
	c2.Template = c.Template
	b1, _ := c.Marshal()
	b2, _ := c2.Marshal()
	if string(b1) != string(b2) {
		t.Errorf("round trip differs:\n%s\n---\n%s", b1, b2)
	}
}

func TestParseBad(t *testing.T) {
	for _, tc := range []struct {
		name, from, to, want string
	}{
		{"mode", "mode: srv6", "mode: ospf", `mode "ospf"`},
		{"no template", "template: h0.tmpl.yaml", "", "needs template"},
		{"mtu", "evs: 16", "evs: 16\nmtu: 1500", "mtu 1500"},
		{"evs", "evs: 16", "evs: 5000", "evs 5000"},
		{"plane twice", "plane: 1", "plane: 0", "plane 0 has two ports"},
		{"plane range", "plane: 1", "plane: 16", "plane 16"},
		{"mac", "mac: 02:00:00:00:01:01", "mac: zz", "MAC \"zz\""},
		{"no neighbor", "    neighbor_mac: 02:00:00:00:10:01\n", "", "neighbor_mac is missing"},
		{"address", "address: fd00:1:1::1", "address: 10.0.0.1", "address 10.0.0.1"},
		{"no locator", "    locator: 5f00:1:c001::/48\n", "", "needs locator"},
		{"unknown field", "evs: 16", "evz: 16", "evz"},
		{"version", "version: 1", "version: 9", "version 9"},
		{"window", "initial_window: 65536", "initial_window: 9999999", "initial_window"},
		{"attach", "evs: 16", "evs: 16\nattach: hw", `attach "hw"`},
		{"busy poll", "evs: 16", "evs: 16\nbusy_poll: -5us", "busy_poll -5"},
		{"loop nice too low", "evs: 16", "evs: 16\nloop_nice: -21", "loop_nice -21: want -20"},
		{"loop nice too high", "evs: 16", "evs: 16\nloop_nice: 20", "loop_nice 20"},
		{"negative delay", "delay: 5ms", "delay: -1ms", "delay -1ms"},
		{"delay too long", "delay: 5ms", "delay: 1h", "delay 1h0m0s"},
		{"delay frames", "delay: 5ms", "delay: 5ms\n    delay_frames: -3", "delay_frames -3"},
		{"retry timeout", "evs: 16", "evs: 16\nqp: {ack_timeout: 20ms, retry_timeout: 5ms}", "retry_timeout 5ms"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := strings.Replace(good, tc.from, tc.to, 1)
			if src == good {
				t.Fatalf("test case did not change the input")
			}
			_, err := Parse([]byte(src), "bad")
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want it to mention %q", err, tc.want)
			}
		})
	}
}

func TestECMPNeedsNoTemplate(t *testing.T) {
	src := strings.NewReplacer("mode: srv6", "mode: ecmp", "template: h0.tmpl.yaml\n", "").Replace(good)
	if _, err := Parse([]byte(src), "ecmp"); err != nil {
		t.Fatal(err)
	}
}

func TestLoadMissing(t *testing.T) {
	_, err := Load(filepath.Join(t.TempDir(), "nope.yaml"))
	if err == nil || !os.IsNotExist(errorsUnwrapAll(err)) {
		t.Fatalf("err = %v, want not-exist", err)
	}
}

func errorsUnwrapAll(err error) error {
	for {
		u, ok := err.(interface{ Unwrap() error })
		if !ok || u.Unwrap() == nil {
			return err
		}
		err = u.Unwrap()
	}
}

// busy_poll left out is DefaultBusyPoll, an explicit 0 is off, and both
// survive being written back (mrc-testbed writes the hosts' files).
func TestBusyPoll(t *testing.T) {
	for _, tc := range []struct {
		name, line string
		want       time.Duration
	}{
		{"left out", "", DefaultBusyPoll},
		{"off", "busy_poll: 0s", 0},
		{"50us", "busy_poll: 50us", 50 * time.Microsecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, again := parseWritten(t, tc.line)
			if c.BusyPollFor() != tc.want {
				t.Fatalf("busy_poll = %v, want %v", c.BusyPollFor(), tc.want)
			}
			if again.BusyPollFor() != tc.want {
				t.Fatalf("written back and read again: busy_poll = %v, want %v", again.BusyPollFor(), tc.want)
			}
		})
	}
	// "busy_poll: 0" is how a user writes "off"; yaml.v3 wants a unit,
	// and the error says so.
	_, err := Parse([]byte(strings.Replace(good, "evs: 16", "evs: 16\nbusy_poll: 0", 1)), "busy")
	if err == nil || !strings.Contains(err.Error(), "needs its unit: 0s") {
		t.Fatalf("busy_poll: 0: got %v, want an error that names the unit (0s)", err)
	}
	if got := (&Config{}).BusyPollFor(); got != DefaultBusyPoll {
		t.Fatalf("a Config built in code without SetDefaults: busy_poll %v, want %v", got, DefaultBusyPoll)
	}
}

// The EV set size defaults to 128 and must be what the engine's CreateQP
// accepts (1..256), checked when the file is loaded rather than at the
// first CreateQP.
func TestEVSetSize(t *testing.T) {
	for _, tc := range []struct {
		line string
		want int    // the loaded value when valid
		err  string // else part of the error
	}{
		{"", 128, ""},
		{"evs: 1", 1, ""},
		{"evs: 256", 256, ""},
		{"evs: 257", 0, "evs 257: want 1..256"},
		{"evs: 4096", 0, "evs 4096: want 1..256"},
		{"evs: -3", 0, "evs -3: want 1..256"},
	} {
		t.Run(tc.line, func(t *testing.T) {
			src := strings.Replace(good, "evs: 16\n", tc.line+"\n", 1)
			c, err := Parse([]byte(src), "evs")
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want it to contain %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.EVs != tc.want {
				t.Fatalf("evs = %d, want %d", c.EVs, tc.want)
			}
		})
	}
}

// threads: left out is one thread, 1..MaxThreads parse and survive being
// written back, anything else is refused naming the range.
func TestThreads(t *testing.T) {
	for _, tc := range []struct {
		line string
		want int
	}{{"", 1}, {"threads: 1", 1}, {"threads: 4", 4}, {"threads: 16", 16}} {
		c, again := parseWritten(t, tc.line)
		if c.ThreadCount() != tc.want || again.ThreadCount() != tc.want {
			t.Errorf("%q: threads %d, written back %d; want %d", tc.line, c.ThreadCount(), again.ThreadCount(), tc.want)
		}
	}
	for _, line := range []string{"threads: 17", "threads: -1"} {
		_, err := Parse([]byte(strings.Replace(good, "evs: 16", "evs: 16\n"+line, 1)), "threads")
		if err == nil || !strings.Contains(err.Error(), "want 1..16 engine threads") {
			t.Errorf("%q: got %v, want an error naming 1..16", line, err)
		}
	}
}

// parseWritten parses the good config with line added, writes it back
// (as mrc-testbed writes the hosts' files) and parses that again.
func parseWritten(t *testing.T, line string) (first, again *Config) {
	t.Helper()
	c, err := Parse([]byte(strings.Replace(good, "evs: 16", "evs: 16\n"+line, 1)), "with "+line)
	if err != nil {
		t.Fatalf("%q: %v", line, err)
	}
	b, err := yaml.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	again, err = Parse(b, "written back")
	if err != nil {
		t.Fatalf("%q written back: %v\n%s", line, err, b)
	}
	return c, again
}
