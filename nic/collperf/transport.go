package collperf

import (
	"fmt"

	"github.com/softmrc/softmrc/nic/verbs"
)

// transportsHelp lists --transport's values.
const transportsHelp = "mrc (RoCE needs verbs.TransportRoCE, which this build lacks)"

// parseTransport turns --transport into the QP configuration.
func parseTransport(s string) (verbs.QPConfig, error) {
	switch s {
	case "mrc", "":
		return verbs.QPConfig{}, nil
	}
	return verbs.QPConfig{}, fmt.Errorf("--transport %s: this build has only mrc (the RoCE baseline comes with verbs.TransportRoCE)", s)
}
