package topo

import (
	"errors"
	"strings"
	"testing"
	"time"
)

const good = `# a full file
prefix: lab1
run_id: 7
mode: ecmp
dataplane: kernel
usid_block: 5f00:2::/32
planes: 2
t0_per_plane: 2
t1_per_plane: 3
hosts_per_t0: 2
mtu: 3000
nics: true
links:
  fabric: {capacity: 10Gbit, delay: 50us, ecn_threshold: 64KiB, trim_threshold: 128KiB, buffer: 256KiB}
  host:
    capacity: 25000000
    buffer: 1MB
`

func TestParseGood(t *testing.T) {
	top, err := Parse("good.yaml", []byte(good))
	if err != nil {
		t.Fatal(err)
	}
	if top.Prefix != "lab1" || top.RunID != 7 || top.Mode != ModeECMP || top.Dataplane != DataplaneKernel ||
		top.Block.String() != "5f00:2::/32" || top.Planes != 2 || top.T0PerPlane != 2 || top.T1PerPlane != 3 ||
		top.HostsPerT0 != 2 || top.MTU != 3000 || !top.NICs || top.Hosts() != 4 {
		t.Errorf("parsed %+v", top)
	}
	want := LinkSpec{CapacityBps: 10e9, Delay: 50 * time.Microsecond, ECNThreshold: 64 << 10, TrimThreshold: 128 << 10, Buffer: 256 << 10}
	if top.Fabric != want {
		t.Errorf("fabric %+v, want %+v", top.Fabric, want)
	}
	if top.Host != (LinkSpec{CapacityBps: 25e6, Buffer: 1e6}) {
		t.Errorf("host %+v", top.Host)
	}
}

func TestPresets(t *testing.T) {
	want := map[string][4]int{"pair": {1, 1, 0, 2}, "clos-2p": {2, 2, 2, 4}, "clos-4p": {4, 2, 4, 4}, "clos-8p": {8, 4, 4, 16}}
	for _, name := range Presets() {
		top, err := Preset(name)
		if err != nil {
			t.Fatal(err)
		}
		if err := top.Validate(); err != nil {
			t.Errorf("%s: %v", name, err)
		}
		got := [4]int{top.Planes, top.T0PerPlane, top.T1PerPlane, top.Hosts()}
		if got != want[name] {
			t.Errorf("%s: planes,t0,t1,hosts = %v, want %v", name, got, want[name])
		}
	}
	if _, err := Preset("nope"); err == nil || !strings.Contains(err.Error(), "clos-2p") {
		t.Errorf("unknown preset error %v should list the allowed names", err)
	}
}

// TestParseErrors is the documented error table of docs/testbed.md: every
// malformed file names the line, the field and what is allowed.
func TestParseErrors(t *testing.T) {
	base := "planes: 2\nt0_per_plane: 2\nt1_per_plane: 2\nhosts_per_t0: 1\n"
	for _, tc := range []struct {
		name, file string
		line       int
		field      string
		msg        string // substring of the message
		allowed    string // substring of Allowed
	}{
		{"empty", "", 0, "", "empty topology file", "planes"},
		{"not a mapping", "- 1\n- 2\n", 1, "", "must be a YAML mapping", "planes"},
		{"syntax", "planes: 2\n  t0: [\n", 2, "", "YAML syntax", ""},
		{"unknown field", base + "spines: 4\n", 5, "spines", `unknown field "spines"`, "t1_per_plane"},
		{"duplicate field", base + "planes: 3\n", 5, "planes", "given twice", ""},
		{"planes not int", "planes: two\n", 1, "planes", `"two" is not an integer`, "1 to 16"},
		{"planes too many", "planes: 17\n", 1, "planes", "17 is out of range", "1 to 16"},
		{"planes list", "planes: [1]\n", 1, "planes", "expected an integer, found a list", "1 to 16"},
		{"t0 too many", "t0_per_plane: 129\n", 1, "t0_per_plane", "out of range", "1 to 128"},
		{"t1 too many", "t1_per_plane: 64\n", 1, "t1_per_plane", "out of range", "0 to 63"},
		{"hosts too many", "hosts_per_t0: 64\n", 1, "hosts_per_t0", "out of range", "1 to 63"},
		{"bad mode", base + "mode: ospf\n", 5, "mode", `unknown value "ospf"`, "srv6 | ecmp"},
		{"bad dataplane", base + "dataplane: dpdk\n", 5, "dataplane", `unknown value "dpdk"`, "xdp | kernel"},
		{"block not /32", base + "usid_block: 5f00:1::/48\n", 5, "usid_block", "bad uSID block", "/32 inside 5f00::/16"},
		{"block outside 5f00", base + "usid_block: fc00:1::/32\n", 5, "usid_block", "bad uSID block", "5f00::/16"},
		{"mtu too big", base + "mtu: 9001\n", 5, "mtu", "out of range", "1280 to 9000"},
		{"roce_mtu not a RoCE MTU", base + "roce_mtu: 3000\n", 5, "roce_mtu", `unknown value "3000"`, "1024 | 2048 | 4096"},
		{"mtu too small for roce_mtu", base + "roce_mtu: 4096\nmtu: 3500\n", 6, "mtu", "cannot carry", "at least 4228 for roce_mtu 4096"},
		{"mtu too small for roce_mtu, either order", base + "mtu: 2048\nroce_mtu: 4096\n", 5, "mtu", "cannot carry", "at least 4228"},
		{"mtu too small for the default roce_mtu", base + "mtu: 2000\n", 5, "mtu", "cannot carry", "at least 2180 for roce_mtu 2048"},
		{"nics not bool", base + "nics: maybe\n", 5, "nics", "not a boolean", "true | false"},
		{"nic_threads zero", base + "nic_threads: 0\n", 5, "nic_threads", "out of range", "1 to 16"},
		{"nic_threads too many", base + "nic_threads: 17\n", 5, "nic_threads", "out of range", "1 to 16"},
		{"nic_path_probes not a duration", base + "nic_path_probes: often\n", 5, "nic_path_probes", `bad nic_path_probes "often"`, "1ms to 10s"},
		{"nic_path_probes too short", base + "nic_path_probes: 500us\n", 5, "nic_path_probes", "bad nic_path_probes", "1ms to 10s"},
		{"nic_path_probes in ecmp mode", base + "mode: ecmp\nnic_path_probes: 5ms\n", 6, "nic_path_probes", "path probes in ecmp mode", "mode: srv6"},
		{"run_id zero", base + "run_id: 0\n", 5, "run_id", "out of range", "1 to 65535"},
		{"bad prefix", base + "prefix: Lab-1\n", 5, "prefix", `bad prefix "Lab-1"`, "[a-z0-9]"},
		{"prefix too long", base + "prefix: abcdefghi\n", 5, "prefix", "bad prefix", "1-8 characters"},
		{"missing planes", "t0_per_plane: 2\nt1_per_plane: 1\nhosts_per_t0: 1\n", 0, "planes", "missing", "1 to 16"},
		{"no T1 with 2 T0", "planes: 1\nt0_per_plane: 2\nt1_per_plane: 0\nhosts_per_t0: 1\n", 3, "t1_per_plane", "need at least one T1", "t0_per_plane > 1"},
		{"one host", "planes: 1\nt0_per_plane: 1\nhosts_per_t0: 1\n", 3, "hosts_per_t0", "nobody to talk to", "at least 2 hosts"},
		{"links unknown class", base + "links:\n  spine: {}\n", 6, "links.spine", "unknown field", "fabric, host"},
		{"link unknown field", base + "links:\n  fabric:\n    speed: 1G\n", 7, "links.fabric.speed", "unknown field", "capacity"},
		{"bad capacity", base + "links:\n  fabric: {capacity: fast}\n", 6, "links.fabric.capacity", `bad value "fast"`, "10Gbit"},
		{"bad delay", base + "links:\n  host: {delay: 5}\n", 6, "links.host.delay", "bad delay", "Go duration"},
		{"negative delay", base + "links:\n  host: {delay: -1ms}\n", 6, "links.host.delay", "bad delay", "0 to 10s"},
		{"bad size", base + "links:\n  fabric: {capacity: 1Gbit, buffer: lots}\n", 6, "links.fabric.buffer", `bad value "lots"`, "64KiB"},
		{"thresholds order", base + "links:\n  fabric:\n    capacity: 1Gbit\n    buffer: 1MiB\n    ecn_threshold: 64KiB\n    trim_threshold: 32KiB\n", 10, "links.fabric.trim_threshold", "must increase", "greater than ecn_threshold"},
		{"queue without capacity", base + "links:\n  host:\n    buffer: 64KiB\n", 0, "links.host.capacity", "need a capacity", "rate"},
		{"capacity without buffer", base + "links:\n  fabric: {capacity: 1Gbit}\n", 0, "links.fabric.buffer", "needs a buffer", "256KiB"},
		{"buffer too big", base + "links:\n  fabric: {capacity: 1Gbit, buffer: 8GiB}\n", 6, "links.fabric.buffer", "32-bit", "4GiB"},
		{"host_ecn on fabric", base + "links:\n  fabric: {capacity: 1Gbit, buffer: 1MiB, ecn_threshold: 64KiB, host_ecn: true}\n", 6, "links.fabric.host_ecn", "always mark", "only under links.host"},
		{"host_ecn without threshold", base + "links:\n  host: {capacity: 1Gbit, buffer: 1MiB, host_ecn: true}\n", 6, "links.host.host_ecn", "not set", "ecn_threshold"},
		{"host_ecn not bool", base + "links:\n  host: {capacity: 1Gbit, buffer: 1MiB, host_ecn: yes}\n", 6, "links.host.host_ecn", "bad host_ecn", "true or false"},
		{"ecn_pmax not a probability", base + "links:\n  fabric: {capacity: 1Gbit, buffer: 1MiB, ecn_threshold: 16KiB, ecn_max: 512KiB, ecn_pmax: 2}\n", 6, "links.fabric.ecn_pmax", "bad ecn_pmax", "at most 1"},
		{"ecn_max without ecn_pmax", base + "links:\n  fabric: {capacity: 1Gbit, buffer: 1MiB, ecn_threshold: 16KiB, ecn_max: 512KiB}\n", 6, "links.fabric.ecn_max", "needs the marking probability", "1%"},
		{"ecn_pmax without ecn_max", base + "links:\n  host: {capacity: 1Gbit, buffer: 1MiB, ecn_threshold: 16KiB, ecn_pmax: 1%}\n", 6, "links.host.ecn_pmax", "not set", "512KiB"},
		{"ecn_max not above ecn_threshold", base + "links:\n  fabric: {capacity: 1Gbit, buffer: 1MiB, ecn_threshold: 16KiB, ecn_max: 16KiB, ecn_pmax: 1%}\n", 6, "links.fabric.ecn_max", "rises from ecn_threshold", "greater than ecn_threshold"},
		{"ecn_max above buffer", base + "links:\n  fabric: {capacity: 1Gbit, buffer: 1MiB, ecn_threshold: 16KiB, ecn_max: 2MiB, ecn_pmax: 1%}\n", 6, "links.fabric.ecn_max", "above the buffer", "at most buffer"},
		{"link not mapping", base + "links:\n  fabric: 10G\n", 6, "links.fabric", "expected a mapping", "capacity"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("bad.yaml", []byte(tc.file))
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("error %v (%T), want *topo.Error", err, err)
			}
			if e.File != "bad.yaml" || e.Line != tc.line || e.Field != tc.field ||
				!strings.Contains(e.Msg, tc.msg) || !strings.Contains(e.Allowed, tc.allowed) {
				t.Errorf("got  file=%q line=%d field=%q msg=%q allowed=%q\nwant line=%d field=%q msg~%q allowed~%q",
					e.File, e.Line, e.Field, e.Msg, e.Allowed, tc.line, tc.field, tc.msg, tc.allowed)
			}
			if !strings.HasPrefix(e.Error(), "bad.yaml") {
				t.Errorf("message %q does not start with the file", e.Error())
			}
		})
	}
}

// TestRoCEMTU: roce_mtu 4096 on a file or a preset raises a defaulted link
// MTU to what its frames need and keeps an explicit one.
func TestRoCEMTU(t *testing.T) {
	base := "planes: 2\nt0_per_plane: 2\nt1_per_plane: 2\nhosts_per_t0: 1\n"
	for _, tc := range []struct {
		name          string
		file          string
		wantMTU, roce int
	}{
		{"default", base, DefaultMTU, 2048},
		{"4096 derives the link MTU", base + "roce_mtu: 4096\n", 4228, 4096},
		{"4096 keeps a larger explicit mtu", base + "roce_mtu: 4096\nmtu: 9000\n", 9000, 4096},
		{"1024 keeps the default link MTU", base + "roce_mtu: 1024\n", DefaultMTU, 1024},
		{"ecmp 4096 needs no outer header, still derives the srv6 size", base + "mode: ecmp\nroce_mtu: 4096\n", 4228, 4096},
	} {
		t.Run(tc.name, func(t *testing.T) {
			top, err := Parse("t.yaml", []byte(tc.file))
			if err != nil {
				t.Fatal(err)
			}
			if top.MTU != tc.wantMTU || top.RoCEMTU != tc.roce {
				t.Errorf("mtu %d roce_mtu %d, want %d %d", top.MTU, top.RoCEMTU, tc.wantMTU, tc.roce)
			}
		})
	}
	for _, name := range Presets() {
		top, err := Preset(name)
		if err != nil {
			t.Fatal(err)
		}
		top.SetRoCEMTU(4096)
		if err := top.Validate(); err != nil || top.MTU != 4228 {
			t.Errorf("preset %s with RoCE MTU 4096: mtu %d, %v", name, top.MTU, err)
		}
	}
}

func TestParseUnits(t *testing.T) {
	for _, tc := range []struct {
		in   string
		rate bool
		want uint64
		ok   bool
	}{
		{"10Gbit", true, 10e9, true}, {"2.5Gbit", true, 25e8, true}, {"100", true, 100, true},
		{"1kbit", true, 1000, true}, {"0", true, 0, true}, {"-1Gbit", true, 0, false}, {"Gbit", true, 0, false},
		{"64KiB", false, 65536, true}, {"1MiB", false, 1 << 20, true}, {"9000", false, 9000, true},
		{"1.5KB", false, 1500, true}, {"1e30", false, 0, false}, {"x", false, 0, false},
	} {
		f := ParseBytes
		if tc.rate {
			f = ParseRate
		}
		got, err := f(tc.in)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("%q: %d, %v; want %d ok=%v", tc.in, got, err, tc.want, tc.ok)
		}
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(good))
	f.Add([]byte("planes: 1\nt0_per_plane: 1\nhosts_per_t0: 2\n"))
	f.Add([]byte("links: {fabric: {capacity: 1Gbit}}"))
	f.Fuzz(func(t *testing.T, b []byte) {
		top, err := Parse("fuzz.yaml", b)
		if err == nil {
			if verr := top.Validate(); verr != nil {
				t.Fatalf("Parse accepted a topology Validate rejects: %v", verr)
			}
		} else if _, ok := err.(*Error); !ok {
			t.Fatalf("error %T is not *topo.Error: %v", err, err)
		}
	})
}

// nic_threads reaches the topology (and from there the plan, the NIC
// configs and the host links' queues).
func TestNICThreads(t *testing.T) {
	base := "planes: 2\nt0_per_plane: 2\nt1_per_plane: 2\nhosts_per_t0: 1\n"
	for _, tc := range []struct {
		line string
		want int
	}{{"", 0}, {"nic_threads: 1\n", 1}, {"nic_threads: 4\n", 4}} {
		top, err := Parse("t.yaml", []byte(base+tc.line))
		if err != nil {
			t.Fatal(err)
		}
		if top.NICThreads != tc.want {
			t.Errorf("%q: NICThreads %d, want %d", tc.line, top.NICThreads, tc.want)
		}
	}
}
