// Package yamlfields reads a YAML file field by field, with the line of
// every field, so that a bad topology or scenario file is reported as
// "file:line: field: what is wrong (allowed: what is accepted)". It holds
// the checks both testbed/topo and testbed/lab/scenario use; what a field
// means stays with them.
package yamlfields

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// Error is a problem in a file: where it is, which field, what is wrong
// and what is allowed.
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

// Root decodes data and returns its top mapping. what names the kind of
// file in errors ("topology", "scenario"), fields its top-level fields.
func Root(file string, data []byte, what string, fields []string) (*yaml.Node, error) {
	var doc yaml.Node
	if err := yaml.NewDecoder(bytes.NewReader(data)).Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, &Error{File: file, Msg: "empty " + what + " file", Allowed: strings.Join(fields, ", ")}
		}
		return nil, syntaxError(file, err)
	}
	if len(doc.Content) == 0 || doc.Content[0].Kind != yaml.MappingNode {
		line := 0
		if len(doc.Content) > 0 {
			line = doc.Content[0].Line
		}
		return nil, &Error{File: file, Line: line, Msg: "the file must be a YAML mapping of " + what + " fields", Allowed: strings.Join(fields, ", ")}
	}
	return doc.Content[0], nil
}

var yamlLine = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

func syntaxError(file string, err error) error {
	if m := yamlLine.FindStringSubmatch(err.Error()); m != nil {
		line, _ := strconv.Atoi(m[1])
		return &Error{File: file, Line: line, Msg: "YAML syntax: " + m[2]}
	}
	return &Error{File: file, Msg: "YAML syntax: " + strings.TrimPrefix(err.Error(), "yaml: ")}
}

// Parser reads the fields of one file.
type Parser struct {
	File string
	// Lines maps every field path Mapping visited to its value's line,
	// for errors found after parsing (validation).
	Lines map[string]int
}

// Err is an Error at node n.
func (p *Parser) Err(n *yaml.Node, field, allowed, format string, args ...any) error {
	return &Error{File: p.File, Line: n.Line, Field: field, Msg: fmt.Sprintf(format, args...), Allowed: allowed}
}

// Mapping calls each for every key of mapping n, in file order; unknown
// and repeated keys are errors. field is n's path ("" at the top).
func (p *Parser) Mapping(n *yaml.Node, field string, allowed []string, each func(key string, v *yaml.Node) error) error {
	if n.Kind != yaml.MappingNode {
		return p.Err(n, field, "a mapping of "+strings.Join(allowed, ", "), "expected a mapping, found %s", KindName(n))
	}
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		path := k.Value
		if field != "" {
			path = field + "." + k.Value
		}
		if !slices.Contains(allowed, k.Value) {
			return p.Err(k, path, strings.Join(allowed, ", "), "unknown field %q", k.Value)
		}
		if seen[k.Value] {
			return p.Err(k, path, "", "field given twice")
		}
		seen[k.Value] = true
		if p.Lines == nil {
			p.Lines = map[string]int{}
		}
		p.Lines[path] = v.Line
		if err := each(k.Value, v); err != nil {
			return err
		}
	}
	return nil
}

// List calls each for every item of list n.
func (p *Parser) List(n *yaml.Node, field string, each func(i int, v *yaml.Node) error) error {
	if n.Kind != yaml.SequenceNode {
		return p.Err(n, field, "a list", "expected a list, found %s", KindName(n))
	}
	for i, v := range n.Content {
		if err := each(i, v); err != nil {
			return err
		}
	}
	return nil
}

// Str is a scalar's text.
func (p *Parser) Str(n *yaml.Node, field string) (string, error) {
	if n.Kind != yaml.ScalarNode {
		return "", p.Err(n, field, "a scalar", "expected a scalar, found %s", KindName(n))
	}
	return n.Value, nil
}

// IntIn is an integer in [lo, hi].
func (p *Parser) IntIn(n *yaml.Node, field string, lo, hi int) (int, error) {
	allowed := fmt.Sprintf("an integer from %d to %d", lo, hi)
	if n.Kind != yaml.ScalarNode {
		return 0, p.Err(n, field, allowed, "expected an integer, found %s", KindName(n))
	}
	x, err := strconv.Atoi(n.Value)
	if err != nil {
		return 0, p.Err(n, field, allowed, "%q is not an integer", n.Value)
	}
	if x < lo || x > hi {
		return 0, p.Err(n, field, allowed, "%d is out of range", x)
	}
	return x, nil
}

// Float is a number in [lo, hi].
func (p *Parser) Float(n *yaml.Node, field string, lo, hi float64) (float64, error) {
	allowed := fmt.Sprintf("a number from %g to %g", lo, hi)
	x, err := strconv.ParseFloat(n.Value, 64)
	if n.Kind != yaml.ScalarNode || err != nil {
		return 0, p.Err(n, field, allowed, "%s is not a number", KindName(n))
	}
	if x < lo || x > hi {
		return 0, p.Err(n, field, allowed, "%g is out of range", x)
	}
	return x, nil
}

// Num is any finite number.
func (p *Parser) Num(n *yaml.Node, field, allowed string) (*float64, error) {
	x, err := strconv.ParseFloat(n.Value, 64)
	if n.Kind != yaml.ScalarNode || err != nil || math.IsNaN(x) || math.IsInf(x, 0) {
		return nil, p.Err(n, field, allowed, "%s is not a number", KindName(n))
	}
	return &x, nil
}

// Dur is a Go duration in [lo, hi].
func (p *Parser) Dur(n *yaml.Node, field string, lo, hi time.Duration) (time.Duration, error) {
	allowed := fmt.Sprintf("a duration from %v to %v, e.g. 2.5s, 10ms", lo, hi)
	if n.Kind != yaml.ScalarNode {
		return 0, p.Err(n, field, allowed, "expected a duration, found %s", KindName(n))
	}
	d, err := time.ParseDuration(n.Value)
	if err != nil {
		return 0, p.Err(n, field, allowed, "bad duration %q", n.Value)
	}
	if d < lo || d > hi {
		return 0, p.Err(n, field, allowed, "%v is out of range", d)
	}
	return d, nil
}

// Enum is one of vals.
func (p *Parser) Enum(n *yaml.Node, field string, vals ...string) (string, error) {
	s, err := p.Str(n, field)
	if err != nil {
		return "", err
	}
	if !slices.Contains(vals, s) {
		return "", p.Err(n, field, strings.Join(vals, " | "), "unknown value %q", s)
	}
	return s, nil
}

// Bool is true or false.
func (p *Parser) Bool(n *yaml.Node, field string) (bool, error) {
	var b bool
	if n.Kind != yaml.ScalarNode || n.Decode(&b) != nil {
		return false, p.Err(n, field, "true | false", "%q is not a boolean", n.Value)
	}
	return b, nil
}

// KindName says what a node is, for errors: a mapping, a list, "text".
func KindName(n *yaml.Node) string {
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
