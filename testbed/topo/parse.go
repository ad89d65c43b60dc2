package topo

import (
	"fmt"
	"math"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/softmrc/softmrc/internal/probability"
	nicconfig "github.com/softmrc/softmrc/nic/config"
	"github.com/softmrc/softmrc/testbed/yamlfields"
)

// Error is a problem in a topology file: where it is, which field, what is
// wrong and what is allowed (yamlfields.Error, shared with mrc-lab's
// scenario files).
type Error = yamlfields.Error

// Load reads and validates a topology file.
func Load(path string) (*Topology, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read topology: %w", err)
	}
	return Parse(path, b)
}

// Parse decodes and validates a topology from YAML; file names the source in
// errors. Unset fields take the defaults documented in docs/testbed.md.
func Parse(file string, data []byte) (*Topology, error) {
	root, err := yamlfields.Root(file, data, "topology", topFields)
	if err != nil {
		return nil, err
	}
	t := defaults()
	t.Source = file
	p := parser{Parser: yamlfields.Parser{File: file}}
	if err := p.top(t, root); err != nil {
		return nil, err
	}
	if p.roce != 0 {
		t.SetRoCEMTU(p.roce) // after mtu, whichever order the file has
	}
	if err := t.validate(p.Lines); err != nil {
		return nil, err
	}
	return t, nil
}

var topFields = []string{"prefix", "run_id", "mode", "dataplane", "usid_block", "planes", "t0_per_plane", "t1_per_plane", "hosts_per_t0", "mtu", "roce_mtu", "nics", "nic_threads", "nic_path_probes", "links"}
var linkFields = []string{"capacity", "delay", "ecn_threshold", "ecn_max", "ecn_pmax", "trim_threshold", "buffer", "host_ecn"}

// parser reads a topology file's fields (yamlfields.Parser: file:line:
// field errors, the line of every field for validation).
type parser struct {
	yamlfields.Parser
	// roce is the file's roce_mtu, applied once every field is read so
	// that it sees whether mtu was given.
	roce int
}

func (p *parser) top(t *Topology, n *yaml.Node) error {
	return p.Mapping(n, "", topFields, func(k string, v *yaml.Node) error {
		var err error
		switch k {
		case "prefix":
			t.Prefix, err = p.Str(v, k)
		case "run_id":
			var x int
			x, err = p.IntIn(v, k, 1, math.MaxUint16)
			t.RunID = uint16(x)
		case "mode":
			var s string
			s, err = p.Enum(v, k, "srv6", "ecmp")
			t.Mode = Mode(s)
		case "dataplane":
			var s string
			s, err = p.Enum(v, k, "xdp", "kernel")
			t.Dataplane = Dataplane(s)
		case "usid_block":
			var s string
			if s, err = p.Str(v, k); err == nil {
				t.Block, err = netip.ParsePrefix(s)
				if err != nil || !t.Block.Addr().Is6() || t.Block.Bits() != 32 || t.Block.Masked() != t.Block ||
					!netip.MustParsePrefix("5f00::/16").Contains(t.Block.Addr()) {
					err = p.Err(v, k, "a /32 inside 5f00::/16 with zero host bits, e.g. 5f00:1::/32 (F3216)", "bad uSID block %q", s)
				}
			}
		case "planes":
			t.Planes, err = p.IntIn(v, k, 1, MaxPlanes)
		case "t0_per_plane":
			t.T0PerPlane, err = p.IntIn(v, k, 1, MaxT0)
		case "t1_per_plane":
			t.T1PerPlane, err = p.IntIn(v, k, 0, MaxT1)
		case "hosts_per_t0":
			t.HostsPerT0, err = p.IntIn(v, k, 1, MaxHostsPerT0)
		case "mtu":
			var m int
			if m, err = p.IntIn(v, k, MinMTU, MaxMTU); err == nil {
				t.SetMTU(m)
			}
		case "roce_mtu":
			var s string
			if s, err = p.Enum(v, k, "1024", "2048", "4096"); err == nil {
				p.roce, _ = strconv.Atoi(s)
			}
		case "nics":
			t.NICs, err = p.Bool(v, k)
		case "nic_threads":
			t.NICThreads, err = p.IntIn(v, k, 1, nicconfig.MaxThreads)
		case "nic_path_probes":
			// The range is validate's (the --nic-path-probes flag's too).
			if t.NICPathProbes, err = time.ParseDuration(v.Value); err != nil {
				return p.Err(v, k, "a Go duration from 1ms to 10s, e.g. 5ms (the recommended interval)", "bad nic_path_probes %q", v.Value)
			}
		case "links":
			err = p.Mapping(v, k, []string{"fabric", "host"}, func(kk string, vv *yaml.Node) error {
				if kk == "fabric" {
					return p.link(&t.Fabric, vv, "links.fabric")
				}
				return p.link(&t.Host, vv, "links.host")
			})
		}
		return err
	})
}

func (p *parser) link(l *LinkSpec, n *yaml.Node, field string) error {
	return p.Mapping(n, field, linkFields, func(k string, v *yaml.Node) error {
		path := field + "." + k
		s, err := p.Str(v, path)
		if err != nil {
			return err
		}
		switch k {
		case "capacity":
			l.CapacityBps, err = ParseRate(s)
			if err != nil {
				return p.Err(v, path, "a rate such as 10Gbit, 400Mbit, 25000000 (bit/s) or 0 for unlimited", "%v", err)
			}
		case "host_ecn":
			switch s {
			case "true":
				l.HostECN = true
			case "false":
				l.HostECN = false
			default:
				return p.Err(v, path, "true or false", "bad host_ecn %q", s)
			}
		case "ecn_pmax":
			l.ECNPMax, err = probability.Parse(s)
			if err != nil || l.ECNPMax == 0 {
				return p.Err(v, path, "a probability such as 1% or 0.01, above 0 and at most 1", "bad ecn_pmax %q", s)
			}
		case "delay":
			l.Delay, err = time.ParseDuration(s)
			if err != nil || l.Delay < 0 || l.Delay > 10*time.Second {
				return p.Err(v, path, "a Go duration from 0 to 10s, e.g. 50us, 2ms", "bad delay %q", s)
			}
		default:
			var x uint64
			x, err = ParseBytes(s)
			if err != nil {
				return p.Err(v, path, "a size such as 64KiB, 1MiB, 9000 (bytes) or 0 for off", "%v", err)
			}
			switch k {
			case "ecn_threshold":
				l.ECNThreshold = x
			case "ecn_max":
				l.ECNMax = x
			case "trim_threshold":
				l.TrimThreshold = x
			case "buffer":
				l.Buffer = x
			}
		}
		return nil
	})
}

// ParseRate parses a rate in bit/s: a plain integer, or a number with one of
// the suffixes bit, kbit, Mbit, Gbit, Tbit (decimal multiples, as tc uses).
func ParseRate(s string) (uint64, error) {
	return parseUnit(s, []unit{{"Tbit", 1e12}, {"Gbit", 1e9}, {"Mbit", 1e6}, {"kbit", 1e3}, {"bit", 1}})
}

// ParseBytes parses a size in bytes: a plain integer, or a number with one of
// the suffixes B, KiB, MiB, GiB, KB, MB, GB.
func ParseBytes(s string) (uint64, error) {
	return parseUnit(s, []unit{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"B", 1}})
}

type unit struct {
	suffix string
	mult   float64
}

func parseUnit(s string, units []unit) (uint64, error) {
	num, mult := strings.TrimSpace(s), 1.0
	for _, u := range units {
		if strings.HasSuffix(num, u.suffix) {
			num, mult = strings.TrimSpace(strings.TrimSuffix(num, u.suffix)), u.mult
			break
		}
	}
	f, err := strconv.ParseFloat(num, 64)
	if err != nil || f < 0 || math.IsInf(f, 0) || math.IsNaN(f) || f*mult > 1e18 {
		return 0, fmt.Errorf("bad value %q", s)
	}
	return uint64(math.Round(f * mult)), nil
}
