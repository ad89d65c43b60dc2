// Package scenarios ships the mrc-lab scenario files (testbed/scenarios/*.yaml)
// inside the binary, so `mrc-lab list` and `mrc-lab run NAME` work from
// anywhere. Each file says why its numbers are what they are.
package scenarios

import (
	"embed"
	"io/fs"
	"path"
	"slices"
	"strings"

	"github.com/softmrc/softmrc/testbed/lab/scenario"
)

//go:embed *.yaml
var files embed.FS

// Names lists the shipped scenarios in run order (file names sort as
// s01-..., s02-...).
func Names() []string {
	ents, _ := fs.ReadDir(files, ".")
	var out []string
	for _, e := range ents {
		out = append(out, strings.TrimSuffix(e.Name(), ".yaml"))
	}
	slices.Sort(out)
	return out
}

// Load parses a shipped scenario by name (with or without .yaml); errors
// name the file as testbed/scenarios/NAME.yaml.
func Load(name string) (*scenario.Scenario, bool, error) {
	name = strings.TrimSuffix(name, ".yaml")
	b, err := files.ReadFile(name + ".yaml")
	if err != nil {
		return nil, false, nil
	}
	s, err := scenario.Parse(path.Join("testbed/scenarios", name+".yaml"), b)
	return s, true, err
}
