package config

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"sort"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/softmrc/softmrc/internal/probability"
	"github.com/softmrc/softmrc/internal/wire"
)

// Load reads and validates the config file at path. Errors name the file,
// line and field; all problems found are returned together.
func Load(path string) (*Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read switch config: %w", err)
	}
	return Parse(path, b)
}

// Parse decodes and validates YAML data; file names the source in errors.
// The returned Config has defaults applied.
func Parse(file string, data []byte) (*Config, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		// yaml.v3 syntax errors read "yaml: line N: ..."; keep the line.
		return nil, &Error{File: file, Msg: strings.TrimPrefix(err.Error(), "yaml: ")}
	}
	d := &decoder{file: file, lines: map[string]int{}, failed: map[string]bool{}}
	var c Config
	if doc.Kind == 0 || len(doc.Content) == 0 {
		d.fail(&doc, "", "file is empty: see docs/switchd.md for an example config")
	} else {
		d.config(doc.Content[0], &c)
	}
	errs := d.errs
	for _, e := range validate(&c) {
		if d.suppressed(e.Field) {
			continue
		}
		e.File = file
		e.Line = d.line(e.Field)
		errs = append(errs, e)
	}
	if len(errs) > 0 {
		sort.SliceStable(errs, func(i, j int) bool { return errs[i].Line < errs[j].Line })
		out := make([]error, len(errs))
		for i := range errs {
			out[i] = &errs[i]
		}
		return nil, errors.Join(out...)
	}
	c = c.WithDefaults()
	return &c, nil
}

// decoder walks the YAML node tree by hand so that every error carries the
// line and field path, unknown keys are rejected with the list of allowed
// ones, and later validation errors can be placed on the right line.
type decoder struct {
	file   string
	errs   []Error
	lines  map[string]int  // field path -> line
	failed map[string]bool // field paths that did not decode
}

func (d *decoder) fail(n *yaml.Node, field, format string, args ...any) {
	d.errs = append(d.errs, Error{File: d.file, Line: n.Line, Field: field, Msg: fmt.Sprintf(format, args...)})
	d.failed[field] = true
}

// suppressed reports whether field or a parent already failed to decode, so
// validation does not repeat the problem as "missing".
func (d *decoder) suppressed(field string) bool {
	for f := field; ; {
		if d.failed[f] {
			return true
		}
		i := strings.LastIndexAny(f, ".[")
		if i < 0 {
			return false
		}
		f = f[:i]
	}
}

// line finds the line of field, or of its closest parent that was seen.
func (d *decoder) line(field string) int {
	for f := field; ; {
		if l, ok := d.lines[f]; ok {
			return l
		}
		i := strings.LastIndexAny(f, ".[")
		if i < 0 {
			return d.lines[""]
		}
		f = f[:i]
	}
}

func join(parent, key string) string {
	if parent == "" {
		return key
	}
	return parent + "." + key
}

// mapping checks that n is a mapping with only the allowed keys and returns
// the value nodes by key.
func (d *decoder) mapping(n *yaml.Node, field string, allowed ...string) map[string]*yaml.Node {
	d.lines[field] = n.Line
	if n.Kind != yaml.MappingNode {
		d.fail(n, field, "is a %s: want a mapping with keys %s", kindName(n), strings.Join(allowed, ", "))
		return nil
	}
	out := map[string]*yaml.Node{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		f := join(field, k.Value)
		if !contains(allowed, k.Value) {
			d.fail(k, f, "unknown key %q: allowed here are %s", k.Value, strings.Join(allowed, ", "))
			continue
		}
		if _, dup := out[k.Value]; dup {
			d.fail(k, f, "key %q appears twice", k.Value)
			continue
		}
		out[k.Value] = v
		d.lines[f] = v.Line
	}
	return out
}

func (d *decoder) sequence(n *yaml.Node, field, want string) []*yaml.Node {
	d.lines[field] = n.Line
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		return nil
	}
	if n.Kind != yaml.SequenceNode {
		d.fail(n, field, "is a %s: want a list of %s", kindName(n), want)
		return nil
	}
	for i, it := range n.Content {
		d.lines[fmt.Sprintf("%s[%d]", field, i)] = it.Line
	}
	return n.Content
}

func (d *decoder) scalar(n *yaml.Node, field, want string) (string, bool) {
	if n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	if n.Kind != yaml.ScalarNode || n.Tag == "!!null" {
		d.fail(n, field, "is a %s: want %s", kindName(n), want)
		return "", false
	}
	return n.Value, true
}

func (d *decoder) str(n *yaml.Node, field, want string) string {
	s, _ := d.scalar(n, field, want)
	return s
}

func (d *decoder) boolean(n *yaml.Node, field string) bool {
	s, ok := d.scalar(n, field, "true or false")
	if !ok {
		return false
	}
	switch s {
	case "true":
		return true
	case "false":
		return false
	}
	d.fail(n, field, "is %q: want true or false", s)
	return false
}

// probability reads a probability as a fraction (0.01) or a percentage
// (1%), 0 < p <= 1.
func (d *decoder) probability(n *yaml.Node, field string) float64 {
	const want = "a probability such as 0.01 or 1%, above 0 and at most 1"
	s, ok := d.scalar(n, field, want)
	if !ok {
		return 0
	}
	p, err := probability.Parse(s)
	if err != nil || p == 0 {
		d.fail(n, field, "is %q: want %s", s, want)
		return 0
	}
	return p
}

func (d *decoder) config(n *yaml.Node, c *Config) {
	m := d.mapping(n, "", "name", "usid_block", "usids", "mode", "ports", "fib", "ecmp_groups", "pin_dir", "control_socket", "metrics")
	if m == nil {
		return
	}
	if v := m["name"]; v != nil {
		c.Name = d.str(v, "name", "the switch name, e.g. t0-p0-0")
	}
	if v := m["usid_block"]; v != nil {
		if s, ok := d.scalar(v, "usid_block", "an IPv6 prefix such as 5f00:1::/32"); ok {
			p, err := netip.ParsePrefix(s)
			if err != nil {
				d.fail(v, "usid_block", "%q is not an IPv6 prefix: want e.g. 5f00:1::/32", s)
			}
			c.Block = p
		}
	}
	if v := m["usids"]; v != nil {
		for i, it := range d.sequence(v, "usids", "uSIDs such as 0x0140") {
			f := fmt.Sprintf("usids[%d]", i)
			if s, ok := d.scalar(it, f, "a uSID such as 0x0140"); ok {
				u, err := wire.ParseUSID(s)
				if err != nil {
					d.fail(it, f, "%q is not a 16-bit uSID: want hex such as 0x0140 (0x0001..0xffff)", s)
				}
				c.USIDs = append(c.USIDs, u)
			}
		}
	}
	if v := m["mode"]; v != nil {
		c.Mode = Mode(d.str(v, "mode", "srv6 or ecmp"))
	}
	if v := m["ports"]; v != nil {
		for i, it := range d.sequence(v, "ports", "ports") {
			c.Ports = append(c.Ports, d.port(it, fmt.Sprintf("ports[%d]", i)))
		}
	}
	if v := m["fib"]; v != nil {
		for i, it := range d.sequence(v, "fib", "routes {prefix, port | group}") {
			c.FIB = append(c.FIB, d.route(it, fmt.Sprintf("fib[%d]", i)))
		}
	}
	if v := m["ecmp_groups"]; v != nil {
		for i, it := range d.sequence(v, "ecmp_groups", "groups {name, ports}") {
			f := fmt.Sprintf("ecmp_groups[%d]", i)
			var g ECMPGroup
			if gm := d.mapping(it, f, "name", "ports"); gm != nil {
				if v := gm["name"]; v != nil {
					g.Name = d.str(v, f+".name", "the group name")
				}
				if v := gm["ports"]; v != nil {
					for k, pn := range d.sequence(v, f+".ports", "port names") {
						g.Ports = append(g.Ports, d.str(pn, fmt.Sprintf("%s.ports[%d]", f, k), "a port name"))
					}
				}
			}
			c.ECMPGroups = append(c.ECMPGroups, g)
		}
	}
	if v := m["pin_dir"]; v != nil {
		c.PinDir = d.str(v, "pin_dir", "a bpffs directory path")
	}
	if v := m["control_socket"]; v != nil {
		c.Control = d.str(v, "control_socket", "a unix socket path")
	}
	if v := m["metrics"]; v != nil {
		c.Metrics = d.str(v, "metrics", "host:port or a unix socket path")
	}
}

func (d *decoder) port(n *yaml.Node, f string) Port {
	var p Port
	m := d.mapping(n, f, "name", "interface", "neighbour_mac", "role", "model")
	if m == nil {
		return p
	}
	if v := m["name"]; v != nil {
		p.Name = d.str(v, f+".name", "the port name")
	}
	if v := m["interface"]; v != nil {
		p.Interface = d.str(v, f+".interface", "a Linux interface name")
	}
	if v := m["neighbour_mac"]; v != nil {
		if s, ok := d.scalar(v, f+".neighbour_mac", "a MAC address such as 02:00:00:00:00:01"); ok {
			mac, err := wire.ParseMAC(s)
			if err != nil {
				d.fail(v, f+".neighbour_mac", "%q is not an Ethernet MAC address: want six hex bytes such as 02:00:00:00:00:01", s)
			} else {
				p.NeighbourMAC = mac
			}
		}
	}
	if v := m["role"]; v != nil {
		p.Role = Role(d.str(v, f+".role", "host or fabric"))
	}
	if v := m["model"]; v != nil {
		mf := f + ".model"
		mm := d.mapping(v, mf, "capacity_bps", "ecn_threshold", "ecn_max", "ecn_pmax", "trim_threshold", "buffer", "host_ecn")
		if mm != nil {
			var pm PortModel
			if v := mm["capacity_bps"]; v != nil {
				pm.CapacityBps = d.quantity(v, mf+".capacity_bps", rateUnits, 1<<63, "a rate in bit/s such as 10G, 25000000000 or 100M")
			}
			if v := mm["ecn_threshold"]; v != nil {
				pm.ECNThreshold = uint32(d.quantity(v, mf+".ecn_threshold", byteUnits, 1<<32-1, "a size in bytes such as 30000 or 64KiB"))
			}
			if v := mm["ecn_max"]; v != nil {
				pm.ECNMax = uint32(d.quantity(v, mf+".ecn_max", byteUnits, 1<<32-1, "a size in bytes such as 200000 or 200KB"))
			}
			if v := mm["ecn_pmax"]; v != nil {
				pm.ECNPMax = d.probability(v, mf+".ecn_pmax")
			}
			if v := mm["trim_threshold"]; v != nil {
				pm.TrimThreshold = uint32(d.quantity(v, mf+".trim_threshold", byteUnits, 1<<32-1, "a size in bytes such as 100000 or 128KiB"))
			}
			if v := mm["host_ecn"]; v != nil {
				pm.HostECN = d.boolean(v, mf+".host_ecn")
			}
			if v := mm["buffer"]; v != nil {
				pm.Buffer = uint32(d.quantity(v, mf+".buffer", byteUnits, 1<<32-1, "a size in bytes such as 262144 or 256KiB"))
			}
			p.Model = &pm
		}
	}
	return p
}

func (d *decoder) route(n *yaml.Node, f string) Route {
	var r Route
	m := d.mapping(n, f, "prefix", "port", "group")
	if m == nil {
		return r
	}
	if v := m["prefix"]; v != nil {
		if s, ok := d.scalar(v, f+".prefix", "an IPv6 prefix such as 5f00:1:101::/48"); ok {
			p, err := netip.ParsePrefix(s)
			if err != nil {
				d.fail(v, f+".prefix", "%q is not an IPv6 prefix: want e.g. 5f00:1:101::/48", s)
			}
			r.Prefix = p
		}
	}
	if v := m["port"]; v != nil {
		r.Port = d.str(v, f+".port", "a port name")
	}
	if v := m["group"]; v != nil {
		r.Group = d.str(v, f+".group", "an ECMP group name")
	}
	return r
}

type unit struct {
	suffix string
	mult   uint64
}

// Longer suffixes first so "KiB" is not read as "B".
var (
	rateUnits = []unit{{"G", 1e9}, {"M", 1e6}, {"k", 1e3}, {"K", 1e3}, {"T", 1e12}}
	byteUnits = []unit{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}, {"B", 1}}
)

// quantity parses an unsigned integer with an optional unit suffix.
func (d *decoder) quantity(n *yaml.Node, f string, units []unit, max uint64, want string) uint64 {
	s, ok := d.scalar(n, f, want)
	if !ok {
		return 0
	}
	num, mult := strings.TrimSpace(s), uint64(1)
	for _, u := range units {
		if strings.HasSuffix(num, u.suffix) {
			num, mult = strings.TrimSpace(strings.TrimSuffix(num, u.suffix)), u.mult
			break
		}
	}
	v, err := strconv.ParseUint(strings.ReplaceAll(num, "_", ""), 10, 64)
	if err != nil || (v != 0 && mult > max/v) || v*mult > max {
		d.fail(n, f, "%q is not %s (at most %d)", s, want, max)
		return 0
	}
	return v * mult
}

func contains(xs []string, s string) bool {
	for _, x := range xs {
		if x == s {
			return true
		}
	}
	return false
}

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "mapping"
	case yaml.SequenceNode:
		return "list"
	case yaml.ScalarNode:
		if n.Tag == "!!null" {
			return "empty value"
		}
		return fmt.Sprintf("scalar (%q)", n.Value)
	case yaml.AliasNode:
		return "alias"
	case yaml.DocumentNode:
		return "document"
	}
	return "nothing"
}
