// Package probability parses a probability as the tools write one: a
// fraction (0.01) or a percentage (1%).
package probability

import (
	"fmt"
	"strconv"
	"strings"
)

// Parse reads s as a fraction or, with a trailing %, a percentage, and
// returns it as a fraction in [0, 1]. Callers that exclude 0 check that
// themselves.
func Parse(s string) (float64, error) {
	num, pct := strings.CutSuffix(strings.TrimSpace(s), "%")
	p, err := strconv.ParseFloat(num, 64)
	if err != nil {
		return 0, fmt.Errorf("probability %q: %w", s, err)
	}
	if pct {
		p /= 100
	}
	if !(p >= 0 && p <= 1) {
		return 0, fmt.Errorf("probability %q: outside 0..1 (0 %%..100 %%)", s)
	}
	return p, nil
}
