// Package scenarios ships the mrc-lab scenario files (testbed/scenarios/*.yaml)
// inside the binary, so `mrc-lab list` and `mrc-lab run NAME` work from
// anywhere. Each file says why its numbers are what they are.
package scenarios

import (
	"embed"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strings"

	"github.com/softmrc/softmrc/testbed/lab/scenario"
)

// The scenarios are the .yaml files of this folder; topologies/ holds the
// topology files they name (topology.file), which are not scenarios.
//
//go:embed *.yaml topologies/*.yaml
var files embed.FS

// Names lists the shipped scenarios in run order (file names sort as
// s01-..., s02-...).
func Names() []string {
	ents, _ := fs.ReadDir(files, ".")
	var out []string
	for _, e := range ents {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".yaml") {
			continue
		}
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
	// A topology file is read from the binary: its path is joined to
	// testbed/scenarios/ as the scenario's folder.
	read := func(p string) ([]byte, error) {
		rel, ok := strings.CutPrefix(p, dir+"/")
		if !ok {
			return nil, fmt.Errorf("%s is not inside %s: a shipped scenario names a topology file in testbed/scenarios/topologies/", p, dir)
		}
		return files.ReadFile(rel)
	}
	s, err := scenario.ParseWith(path.Join(dir, name+".yaml"), b, read)
	return s, true, err
}

// dir is where the shipped scenarios live in the source tree (in errors).
const dir = "testbed/scenarios"
