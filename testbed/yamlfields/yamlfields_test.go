package yamlfields

import (
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"
)

// TestErrors: every check reports file:line: field: what (allowed: ...).
func TestErrors(t *testing.T) {
	fields := []string{"a", "b", "c", "d", "e", "f"}
	read := func(src string) error {
		root, err := Root("x.yaml", []byte(src), "test", fields)
		if err != nil {
			return err
		}
		p := &Parser{File: "x.yaml"}
		return p.Mapping(root, "", fields, func(k string, v *yaml.Node) error {
			var err error
			switch k {
			case "a":
				_, err = p.IntIn(v, k, 1, 3)
			case "b":
				_, err = p.Bool(v, k)
			case "c":
				_, err = p.Dur(v, k, time.Millisecond, time.Second)
			case "d":
				_, err = p.Enum(v, k, "x", "y")
			case "e":
				err = p.List(v, k, func(i int, vv *yaml.Node) error { _, err := p.Float(vv, k, 0, 1); return err })
			case "f":
				_, err = p.Num(v, k, "a number")
			}
			return err
		})
	}
	for _, c := range []struct{ name, src, want string }{
		{"empty", "", "x.yaml: empty test file (allowed: a, b, c, d, e, f)"},
		{"not a mapping", "- 1\n", "x.yaml:1: the file must be a YAML mapping of test fields"},
		{"syntax", "a: [\n", "x.yaml:1: YAML syntax:"},
		{"unknown", "z: 1\n", `x.yaml:1: z: unknown field "z" (allowed: a, b, c, d, e, f)`},
		{"twice", "a: 1\na: 2\n", "x.yaml:2: a: field given twice"},
		{"int range", "\na: 4\n", "x.yaml:2: a: 4 is out of range (allowed: an integer from 1 to 3)"},
		{"int text", "a: one\n", `x.yaml:1: a: "one" is not an integer`},
		{"bool", "b: maybe\n", `x.yaml:1: b: "maybe" is not a boolean (allowed: true | false)`},
		{"duration", "c: 2s\n", "x.yaml:1: c: 2s is out of range (allowed: a duration from 1ms to 1s"},
		{"enum", "d: z\n", `x.yaml:1: d: unknown value "z" (allowed: x | y)`},
		{"list", "e: 3\n", `x.yaml:1: e: expected a list, found "3" (allowed: a list)`},
		{"float in list", "e: [0.5, 2]\n", "x.yaml:1: e: 2 is out of range (allowed: a number from 0 to 1)"},
		{"num", "f: [1]\n", "x.yaml:1: f: a list is not a number (allowed: a number)"},
	} {
		err := read(c.src)
		if err == nil || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
	if err := read("a: 2\nb: true\nc: 10ms\nd: y\ne: [0, 1]\nf: -3.5\n"); err != nil {
		t.Errorf("a good file: %v", err)
	}
}
