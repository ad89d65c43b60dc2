package collperf

import (
	"fmt"

	"github.com/softmrc/softmrc/nic/verbs"
)

// transportsHelp lists --transport's values.
const transportsHelp = "mrc|roce (default mrc; roce: the RoCEv2 RC baseline with DCQCN, no PFC)"

// parseTransport turns --transport into the QP configuration.
func parseTransport(s string) (verbs.QPConfig, error) {
	t, err := verbs.ParseTransport(s)
	if err != nil {
		return verbs.QPConfig{}, fmt.Errorf("--transport: %w", err)
	}
	return verbs.QPConfig{Transport: t}, nil
}
