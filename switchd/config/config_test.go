package config

import (
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/softmrc/softmrc/internal/wire"
)

const good = `name: sw1
usid_block: 5f00:1::/32
usids: [0x0100]
ports:
  - name: a
    interface: veth-a
    neighbour_mac: 02:00:00:00:00:01
    role: host
  - name: b
    interface: veth-b
    neighbour_mac: 02:00:00:00:00:02
    role: fabric
fib:
  - prefix: 5f00:1:200::/48
    port: b
`

func TestLoadExample(t *testing.T) {
	c, err := Load("testdata/t0.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if c.Name != "t0-p0-0" || c.BlockLen() != 32 || len(c.USIDs) != 1 || c.USIDs[0] != 0x4000 {
		t.Errorf("identity: got %s", c)
	}
	if got, want := c.UNPrefix(c.USIDs[0]), netip.MustParsePrefix("5f00:1:4000::/48"); got != want {
		t.Errorf("UNPrefix = %s, want %s", got, want)
	}
	m := c.Ports[1].Model
	if m == nil || m.CapacityBps != 10e9 || m.ECNThreshold != 30000 || m.TrimThreshold != 64<<10 || m.Buffer != 256<<10 {
		t.Errorf("model of up0 = %+v", m)
	}
	if c.FIB[3].Group != "uplinks" || c.FIB[3].Prefix != netip.MustParsePrefix("5f00:1::/32") {
		t.Errorf("fib[3] = %+v", c.FIB[3])
	}
	if c.Metrics != "127.0.0.1:0" {
		t.Errorf("metrics = %q", c.Metrics)
	}
}

func TestDefaults(t *testing.T) {
	c, err := Parse("x.yaml", []byte(good))
	if err != nil {
		t.Fatal(err)
	}
	if c.Mode != ModeSRv6 || c.PinDir != "/sys/fs/bpf/softmrc/sw1" || c.Control != "/run/softmrc/sw1.sock" || c.Metrics != "" {
		t.Errorf("defaults: mode %q pin %q ctl %q metrics %q", c.Mode, c.PinDir, c.Control, c.Metrics)
	}
}

func TestUNPrefixBlockLengths(t *testing.T) {
	for _, tc := range []struct {
		block string
		u     wire.USID
		want  string
	}{
		{"5f00::/16", 0x0102, "5f00:102::/32"},
		{"5f00:1::/32", 0x0102, "5f00:1:102::/48"},
		{"5f00:1:2::/48", 0xc001, "5f00:1:2:c001::/64"},
	} {
		c := Config{Block: netip.MustParsePrefix(tc.block)}
		if got := c.UNPrefix(tc.u); got.String() != tc.want {
			t.Errorf("block %s uSID %04x: got %s, want %s", tc.block, tc.u, got, tc.want)
		}
	}
}

// Each case replaces one line of the good config (or appends to it) and
// expects an error naming the file, line and field.
func TestParseErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		old  string // line of good to replace ("" = append new)
		new  string
		want []string // substrings of the error
	}{
		{"syntax", "usids: [0x0100]", "usids: [0x0100", []string{"x.yaml", "line"}},
		{"unknown top key", "", "colour: blue", []string{"x.yaml:16: colour: unknown key \"colour\": allowed here are name, usid_block"}},
		{"unknown port key", "    role: host", "    rol: host", []string{"x.yaml:8: ports[0].rol: unknown key"}},
		{"missing name", "name: sw1", "", []string{"x.yaml", "name: missing"}},
		{"bad name", "name: sw1", "name: 'a b'", []string{"x.yaml:1: name: \"a b\" is not a valid switch name"}},
		{"block not prefix", "usid_block: 5f00:1::/32", "usid_block: 5f00:1::1", []string{"x.yaml:2: usid_block: \"5f00:1::1\" is not an IPv6 prefix"}},
		{"block length", "usid_block: 5f00:1::/32", "usid_block: 5f00:1::/40", []string{"x.yaml:2: usid_block: block length /40 is not allowed: want /16, /32 or /48"}},
		{"block host bits", "usid_block: 5f00:1::/32", "usid_block: 5f00:1:2::/32", []string{"x.yaml:2: usid_block: 5f00:1:2::/32 has bits set", "did you mean 5f00:1::/32"}},
		{"block outside 5f00::/16", "usid_block: 5f00:1::/32", "usid_block: fc00:1::/32", []string{"x.yaml:2: usid_block: fc00:1::/32 is outside 5f00::/16"}},
		{"block ipv4", "usid_block: 5f00:1::/32", "usid_block: 10.0.0.0/16", []string{"x.yaml:2: usid_block: 10.0.0.0/16 is not an IPv6 prefix"}},
		{"usid zero", "usids: [0x0100]", "usids: [0x0000]", []string{"x.yaml:3: usids[0]: uSID 0 is reserved"}},
		{"usid too big", "usids: [0x0100]", "usids: [0x10000]", []string{"x.yaml:3: usids[0]: \"0x10000\" is not a 16-bit uSID"}},
		{"usid dup", "usids: [0x0100]", "usids: [0x0100, 0x100]", []string{"x.yaml:3: usids[1]: uSID 0x0100 is listed twice"}},
		{"usid decimal", "usids: [0x0100]", "usids: [0x0100, 256]", []string{"x.yaml:3: usids[1]: \"256\" is not a 16-bit uSID: want hex such as 0x0140"}},
		{"usids missing in srv6", "usids: [0x0100]", "", []string{"x.yaml", "usids: missing: a switch in srv6 mode needs at least one own uN uSID"}},
		{"usids not a list", "usids: [0x0100]", "usids: {a: 1}", []string{"x.yaml:3: usids: is a mapping: want a list"}},
		{"bad mode", "", "mode: mpls", []string{"x.yaml:16: mode: \"mpls\" is not a forwarding mode: want srv6 or ecmp"}},
		{"bad mac", "    neighbour_mac: 02:00:00:00:00:01", "    neighbour_mac: 02:00:00:00:01", []string{"x.yaml:7: ports[0].neighbour_mac: \"02:00:00:00:01\" is not an Ethernet MAC address"}},
		{"multicast mac", "    neighbour_mac: 02:00:00:00:00:01", "    neighbour_mac: 01:00:5e:00:00:01", []string{"x.yaml:7: ports[0].neighbour_mac: 01:00:5e:00:00:01 is a multicast address"}},
		{"bad role", "    role: host", "    role: spine", []string{"x.yaml:8: ports[0].role: \"spine\" is not a port role: want host"}},
		{"missing interface", "    interface: veth-a", "", []string{"x.yaml:5: ports[0].interface: missing"}},
		{"long interface", "    interface: veth-a", "    interface: a-very-long-ifname", []string{"x.yaml:6: ports[0].interface: \"a-very-long-ifname\" is not a Linux interface name: at most 15"}},
		{"dup interface", "    interface: veth-b", "    interface: veth-a", []string{"x.yaml:10: ports[1].interface: interface \"veth-a\" is used by two ports (also ports[0])"}},
		{"dup port name", "  - name: b", "  - name: a", []string{"x.yaml:9: ports[1].name: port name \"a\" is used twice"}},
		{"ports not list", "", "ports: 3", []string{"key \"ports\" appears twice"}},
		{"route unknown port", "    port: b", "    port: c", []string{"x.yaml:15: fib[0].port: no port is named \"c\": want one of a, b"}},
		{"route both", "    port: b", "    port: b\n    group: g", []string{"x.yaml:14: fib[0]: has both port and group"}},
		{"route host bits", "  - prefix: 5f00:1:200::/48", "  - prefix: 5f00:1:200::1/48", []string{"x.yaml:14: fib[0].prefix: 5f00:1:200::1/48 has bits set after the prefix length: did you mean 5f00:1:200::/48?"}},
		{"route own uN", "  - prefix: 5f00:1:200::/48", "  - prefix: 5f00:1:100::/48", []string{"x.yaml:14: fib[0].prefix: 5f00:1:100::/48 is this switch's own uN prefix (usids[0])"}},
		{"route garbage", "  - prefix: 5f00:1:200::/48", "  - prefix: [1]", []string{"x.yaml:14: fib[0].prefix: is a list: want an IPv6 prefix"}},
		{"model missing buffer", "    role: fabric", "    role: fabric\n    model: {capacity_bps: 1G}", []string{"x.yaml:13: ports[1].model.buffer: missing"}},
		{"model bad rate", "    role: fabric", "    role: fabric\n    model: {capacity_bps: fast, buffer: 1000}", []string{"x.yaml:13: ports[1].model.capacity_bps: \"fast\" is not a rate in bit/s"}},
		{"model thresholds", "    role: fabric", "    role: fabric\n    model:\n      capacity_bps: 1G\n      ecn_threshold: 5000\n      trim_threshold: 4000\n      buffer: 3000", []string{
			"x.yaml:15: ports[1].model.ecn_threshold: 5000 is not below buffer 3000",
			"x.yaml:15: ports[1].model.ecn_threshold: 5000 is above trim_threshold 4000",
			"x.yaml:16: ports[1].model.trim_threshold: 4000 is not below buffer 3000"}},
		{"model unknown key", "    role: fabric", "    role: fabric\n    model: {capacity_bps: 1G, buffer: 1000, latency: 5}", []string{"x.yaml:13: ports[1].model.latency: unknown key \"latency\": allowed here are capacity_bps, ecn_threshold, ecn_max, ecn_pmax, trim_threshold, buffer, host_ecn"}},
		{"host_ecn on a fabric port", "    role: fabric", "    role: fabric\n    model: {capacity_bps: 1G, buffer: 1000, ecn_threshold: 100, host_ecn: true}", []string{"x.yaml:13: ports[1].model.host_ecn: set on a fabric port"}},
		{"host_ecn without threshold", "    role: host", "    role: host\n    model: {capacity_bps: 1G, buffer: 1000, host_ecn: true}", []string{"ports[0].model.host_ecn: set without ecn_threshold"}},
		{"ecn_pmax alone", "    role: fabric", "    role: fabric\n    model: {capacity_bps: 1G, buffer: 1000, ecn_threshold: 100, ecn_pmax: 1%}", []string{"ports[1].model.ecn_pmax: set without ecn_max"}},
		{"ecn_max alone", "    role: fabric", "    role: fabric\n    model: {capacity_bps: 1G, buffer: 1000, ecn_threshold: 100, ecn_max: 500}", []string{"ports[1].model.ecn_max: set without ecn_pmax"}},
		{"ecn_max below threshold", "    role: fabric", "    role: fabric\n    model: {capacity_bps: 1G, buffer: 1000, ecn_threshold: 100, ecn_max: 100, ecn_pmax: 0.01}", []string{"ports[1].model.ecn_max: 100 is not above ecn_threshold 100"}},
		{"ecn_max above buffer", "    role: fabric", "    role: fabric\n    model: {capacity_bps: 1G, buffer: 1000, ecn_threshold: 100, ecn_max: 2000, ecn_pmax: 0.01}", []string{"ports[1].model.ecn_max: 2000 is above buffer 1000"}},
		{"ecn_pmax not a probability", "    role: fabric", "    role: fabric\n    model: {capacity_bps: 1G, buffer: 1000, ecn_threshold: 100, ecn_max: 500, ecn_pmax: 150%}", []string{"ports[1].model.ecn_pmax: is \"150%\": want a probability such as 0.01 or 1%, above 0 and at most 1"}},
		{"host_ecn not bool", "    role: host", "    role: host\n    model: {capacity_bps: 1G, buffer: 1000, ecn_threshold: 100, host_ecn: often}", []string{"ports[0].model.host_ecn: is \"often\": want true or false"}},
		{"group unknown port", "", "ecmp_groups:\n  - name: g\n    ports: [a, zz, a]", []string{"x.yaml:18: ecmp_groups[0].ports[1]: no port is named \"zz\"", "x.yaml:18: ecmp_groups[0].ports[2]: port \"a\" is listed twice"}},
		{"group empty", "", "ecmp_groups:\n  - name: g\n    ports: []", []string{"x.yaml:18: ecmp_groups[0].ports: missing"}},
		{"relative pin dir", "", "pin_dir: pins", []string{"x.yaml:16: pin_dir: \"pins\" is not an absolute path"}},
		{"long socket", "", "control_socket: /" + strings.Repeat("x", 120), []string{"x.yaml:16: control_socket: path is 121 bytes long"}},
		{"bad metrics", "", "metrics: localhost", []string{"x.yaml:16: metrics: \"localhost\" is neither host:port nor an absolute unix socket path"}},
		{"bad metrics port", "", "metrics: 127.0.0.1:99999", []string{"x.yaml:16: metrics: port \"99999\""}},
		{"not a mapping", "name: sw1", "- name: sw1", []string{"x.yaml"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := good
			if tc.old == "" {
				src += tc.new + "\n"
			} else {
				if !strings.Contains(src, tc.old+"\n") {
					t.Fatalf("test bug: %q not in config", tc.old)
				}
				repl := tc.new + "\n"
				if tc.new == "" {
					repl = ""
				}
				src = strings.Replace(src, tc.old+"\n", repl, 1)
			}
			c, err := Parse("x.yaml", []byte(src))
			if err == nil {
				t.Fatalf("no error for\n%s\nconfig: %s", src, c)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error does not contain %q:\n%v", w, err)
				}
			}
		})
	}
}

func TestParseEmpty(t *testing.T) {
	for _, src := range []string{"", "# nothing\n", "---\n"} {
		_, err := Parse("e.yaml", []byte(src))
		if err == nil || !strings.Contains(err.Error(), "e.yaml") {
			t.Errorf("%q: got %v, want an error naming the file", src, err)
		}
	}
}

func TestErrorsAreTyped(t *testing.T) {
	_, err := Parse("x.yaml", []byte(strings.Replace(good, "role: host", "role: spine", 1)))
	var ce *Error
	if !errors.As(err, &ce) {
		t.Fatalf("error %v is not a *config.Error", err)
	}
	if ce.File != "x.yaml" || ce.Line != 8 || ce.Field != "ports[0].role" {
		t.Errorf("got %+v", ce)
	}
}

func sample() *Config {
	return &Config{
		Name:  "t1-p1-3",
		Block: netip.MustParsePrefix("5f00:7::/32"),
		USIDs: []wire.USID{0x0401, 0x0501},
		Mode:  ModeSRv6,
		Ports: []Port{
			{Name: "d0", Interface: "t1d0", NeighbourMAC: wire.MAC{2, 0, 0, 0, 0, 1}, Role: RoleFabric,
				Model: &PortModel{CapacityBps: 25e9, ECNThreshold: 10000, TrimThreshold: 20000, Buffer: 40000}},
			{Name: "d1", Interface: "t1d1", NeighbourMAC: wire.MAC{2, 0, 0, 0, 0, 2}, Role: RoleFabric},
			{Name: "h", Interface: "t1h", NeighbourMAC: wire.MAC{2, 0, 0, 0, 0, 3}, Role: RoleHost,
				Model: &PortModel{CapacityBps: 1e9, ECNThreshold: 10000, ECNMax: 30000, ECNPMax: 0.01, Buffer: 40000, HostECN: true}},
		},
		FIB: []Route{
			{Prefix: netip.MustParsePrefix("5f00:7:4001::/48"), Port: "d0"},
			{Prefix: netip.MustParsePrefix("5f00:7:4101::/48"), Group: "down"},
			{Prefix: netip.MustParsePrefix("fd00:1:1::/64"), Port: "h"},
		},
		ECMPGroups: []ECMPGroup{{Name: "down", Ports: []string{"d0", "d1"}}},
		PinDir:     "/sys/fs/bpf/softmrc/t1-p1-3",
		Control:    "/run/softmrc/t1-p1-3.sock",
		Metrics:    "/run/softmrc/t1-p1-3.metrics",
	}
}

func TestMarshalRoundTrip(t *testing.T) {
	in := sample()
	if err := Validate(in); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "t1.yaml")
	if err := Write(path, in); err != nil {
		t.Fatal(err)
	}
	out, err := Load(path)
	if err != nil {
		b, _ := os.ReadFile(path)
		t.Fatalf("%v\n%s", err, b)
	}
	if !reflect.DeepEqual(in, out) {
		b, _ := os.ReadFile(path)
		t.Errorf("round trip differs:\nin  %+v\nout %+v\nfile:\n%s", in, out, b)
	}
}

func TestWriteRejectsInvalid(t *testing.T) {
	c := sample()
	c.Ports[0].Role = "leaf"
	err := Write(filepath.Join(t.TempDir(), "bad.yaml"), c)
	if err == nil || !strings.Contains(err.Error(), "ports[0].role") {
		t.Fatalf("got %v, want a ports[0].role error", err)
	}
}

func TestValidateECMPModeWithoutUSIDs(t *testing.T) {
	c := sample()
	c.Mode, c.USIDs, c.Block = ModeECMP, nil, netip.Prefix{}
	if err := Validate(c); err != nil {
		t.Fatal(err)
	}
}

func FuzzParse(f *testing.F) {
	b, err := os.ReadFile("testdata/t0.yaml")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b)
	f.Add([]byte(good))
	f.Add([]byte("name: [\n"))
	f.Add([]byte("ports: [{model: {capacity_bps: 99999999999999999999G}}]"))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Parse("fuzz.yaml", data)
		if err != nil {
			if c != nil {
				t.Fatal("config returned with an error")
			}
			return
		}
		// Whatever parses must validate and survive a round trip.
		if err := Validate(c); err != nil {
			t.Fatalf("parsed config does not validate: %v", err)
		}
		out, err := Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		c2, err := Parse("again.yaml", out)
		if err != nil {
			t.Fatalf("re-parse: %v\n%s", err, out)
		}
		if !reflect.DeepEqual(c, c2) {
			t.Fatalf("round trip differs:\n%+v\n%+v", c, c2)
		}
	})
}
