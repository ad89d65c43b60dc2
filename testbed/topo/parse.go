package topo

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"net/netip"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// Error is a problem in a topology file: where it is, which field, what is
// wrong and what is allowed.
type Error struct {
	File    string
	Line    int    // 1-based; 0 when the problem is not tied to a line
	Field   string // dotted path, e.g. "links.fabric.capacity"
	Msg     string
	Allowed string // what the field accepts; empty when not applicable
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		fmt.Fprintf(&b, ":%d", e.Line)
	}
	if e.Field != "" {
		fmt.Fprintf(&b, ": %s", e.Field)
	}
	fmt.Fprintf(&b, ": %s", e.Msg)
	if e.Allowed != "" {
		fmt.Fprintf(&b, " (allowed: %s)", e.Allowed)
	}
	return b.String()
}

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
	var doc yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&doc); err != nil {
		return nil, yamlError(file, err)
	}
	t := defaults()
	t.Source = file
	p := parser{file: file}
	if len(doc.Content) == 0 || doc.Content[0].Kind != yaml.MappingNode {
		line := 0
		if len(doc.Content) > 0 {
			line = doc.Content[0].Line
		}
		return nil, &Error{File: file, Line: line, Msg: "the file must be a YAML mapping of topology fields", Allowed: strings.Join(topFields, ", ")}
	}
	if err := p.top(t, doc.Content[0]); err != nil {
		return nil, err
	}
	if p.roce != 0 {
		t.SetRoCEMTU(p.roce) // after mtu, whichever order the file has
	}
	if err := t.validate(p.lines); err != nil {
		return nil, err
	}
	return t, nil
}

var topFields = []string{"prefix", "run_id", "mode", "dataplane", "usid_block", "planes", "t0_per_plane", "t1_per_plane", "hosts_per_t0", "mtu", "roce_mtu", "nics", "links"}
var linkFields = []string{"capacity", "delay", "ecn_threshold", "trim_threshold", "buffer", "host_ecn"}

type parser struct {
	file  string
	lines map[string]int // field path -> line, for validation errors
	// roce is the file's roce_mtu, applied once every field is read so
	// that it sees whether mtu was given.
	roce int
}

func (p *parser) err(n *yaml.Node, field, allowed, format string, args ...any) error {
	return &Error{File: p.file, Line: n.Line, Field: field, Msg: fmt.Sprintf(format, args...), Allowed: allowed}
}

func (p *parser) mapping(n *yaml.Node, field string, allowed []string, each func(key string, v *yaml.Node) error) error {
	if n.Kind != yaml.MappingNode {
		return p.err(n, field, "a mapping of "+strings.Join(allowed, ", "), "expected a mapping, found %s", kindName(n))
	}
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		path := k.Value
		if field != "" {
			path = field + "." + k.Value
		}
		if !contains(allowed, k.Value) {
			return p.err(k, path, strings.Join(allowed, ", "), "unknown field %q", k.Value)
		}
		if seen[k.Value] {
			return p.err(k, path, "", "field given twice")
		}
		seen[k.Value] = true
		if p.lines == nil {
			p.lines = map[string]int{}
		}
		p.lines[path] = v.Line
		if err := each(k.Value, v); err != nil {
			return err
		}
	}
	return nil
}

func (p *parser) top(t *Topology, n *yaml.Node) error {
	return p.mapping(n, "", topFields, func(k string, v *yaml.Node) error {
		var err error
		switch k {
		case "prefix":
			t.Prefix, err = p.str(v, k)
		case "run_id":
			var x int
			x, err = p.intIn(v, k, 1, math.MaxUint16)
			t.RunID = uint16(x)
		case "mode":
			var s string
			s, err = p.enum(v, k, "srv6", "ecmp")
			t.Mode = Mode(s)
		case "dataplane":
			var s string
			s, err = p.enum(v, k, "xdp", "kernel")
			t.Dataplane = Dataplane(s)
		case "usid_block":
			var s string
			if s, err = p.str(v, k); err == nil {
				t.Block, err = netip.ParsePrefix(s)
				if err != nil || !t.Block.Addr().Is6() || t.Block.Bits() != 32 || t.Block.Masked() != t.Block ||
					!netip.MustParsePrefix("5f00::/16").Contains(t.Block.Addr()) {
					err = p.err(v, k, "a /32 inside 5f00::/16 with zero host bits, e.g. 5f00:1::/32 (F3216)", "bad uSID block %q", s)
				}
			}
		case "planes":
			t.Planes, err = p.intIn(v, k, 1, MaxPlanes)
		case "t0_per_plane":
			t.T0PerPlane, err = p.intIn(v, k, 1, MaxT0)
		case "t1_per_plane":
			t.T1PerPlane, err = p.intIn(v, k, 0, MaxT1)
		case "hosts_per_t0":
			t.HostsPerT0, err = p.intIn(v, k, 1, MaxHostsPerT0)
		case "mtu":
			var m int
			if m, err = p.intIn(v, k, MinMTU, MaxMTU); err == nil {
				t.SetMTU(m)
			}
		case "roce_mtu":
			var s string
			if s, err = p.enum(v, k, "1024", "2048", "4096"); err == nil {
				p.roce, _ = strconv.Atoi(s)
			}
		case "nics":
			t.NICs, err = p.boolean(v, k)
		case "links":
			err = p.mapping(v, k, []string{"fabric", "host"}, func(kk string, vv *yaml.Node) error {
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
	return p.mapping(n, field, linkFields, func(k string, v *yaml.Node) error {
		path := field + "." + k
		s, err := p.str(v, path)
		if err != nil {
			return err
		}
		switch k {
		case "capacity":
			l.CapacityBps, err = ParseRate(s)
			if err != nil {
				return p.err(v, path, "a rate such as 10Gbit, 400Mbit, 25000000 (bit/s) or 0 for unlimited", "%v", err)
			}
		case "host_ecn":
			switch s {
			case "true":
				l.HostECN = true
			case "false":
				l.HostECN = false
			default:
				return p.err(v, path, "true or false", "bad host_ecn %q", s)
			}
		case "delay":
			l.Delay, err = time.ParseDuration(s)
			if err != nil || l.Delay < 0 || l.Delay > 10*time.Second {
				return p.err(v, path, "a Go duration from 0 to 10s, e.g. 50us, 2ms", "bad delay %q", s)
			}
		default:
			var x uint64
			x, err = ParseBytes(s)
			if err != nil {
				return p.err(v, path, "a size such as 64KiB, 1MiB, 9000 (bytes) or 0 for off", "%v", err)
			}
			switch k {
			case "ecn_threshold":
				l.ECNThreshold = x
			case "trim_threshold":
				l.TrimThreshold = x
			case "buffer":
				l.Buffer = x
			}
		}
		return nil
	})
}

func (p *parser) str(n *yaml.Node, field string) (string, error) {
	if n.Kind != yaml.ScalarNode {
		return "", p.err(n, field, "a scalar", "expected a scalar, found %s", kindName(n))
	}
	return n.Value, nil
}

func (p *parser) intIn(n *yaml.Node, field string, lo, hi int) (int, error) {
	allowed := fmt.Sprintf("an integer from %d to %d", lo, hi)
	if n.Kind != yaml.ScalarNode {
		return 0, p.err(n, field, allowed, "expected an integer, found %s", kindName(n))
	}
	x, err := strconv.Atoi(n.Value)
	if err != nil {
		return 0, p.err(n, field, allowed, "%q is not an integer", n.Value)
	}
	if x < lo || x > hi {
		return 0, p.err(n, field, allowed, "%d is out of range", x)
	}
	return x, nil
}

func (p *parser) enum(n *yaml.Node, field string, vals ...string) (string, error) {
	s, err := p.str(n, field)
	if err != nil {
		return "", err
	}
	if !contains(vals, s) {
		return "", p.err(n, field, strings.Join(vals, " | "), "unknown value %q", s)
	}
	return s, nil
}

func (p *parser) boolean(n *yaml.Node, field string) (bool, error) {
	var b bool
	if n.Kind != yaml.ScalarNode || n.Decode(&b) != nil {
		return false, p.err(n, field, "true | false", "%q is not a boolean", n.Value)
	}
	return b, nil
}

var yamlLine = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

func yamlError(file string, err error) error {
	if errors.Is(err, io.EOF) {
		return &Error{File: file, Msg: "empty topology file", Allowed: strings.Join(topFields, ", ")}
	}
	if m := yamlLine.FindStringSubmatch(err.Error()); m != nil {
		line, _ := strconv.Atoi(m[1])
		return &Error{File: file, Line: line, Msg: "YAML syntax: " + m[2]}
	}
	return &Error{File: file, Msg: "YAML syntax: " + strings.TrimPrefix(err.Error(), "yaml: ")}
}

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		return fmt.Sprintf("%q", n.Value)
	case yaml.AliasNode:
		return "an alias"
	}
	return "nothing"
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
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
