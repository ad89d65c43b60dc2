package config

import (
	"strings"
	"testing"
)

func TestCCScale(t *testing.T) {
	for _, tc := range []struct {
		cc    string
		scale float64
		err   string
	}{
		{"cc: {algorithm: default}", 0, ""},
		{"cc: {scale: 1250}", 1250, ""},
		{"cc: {scale: -1}", 0, "cc: scale -1: want 0 (none) up to 1e6"},
		{"cc: {scale: 2e6}", 0, "cc: scale 2e+06: want 0 (none) up to 1e6"},
	} {
		src := strings.Replace(good, "cc: {algorithm: default, initial_window: 65536, max_window: 1048576}", tc.cc, 1)
		c, err := Parse([]byte(src), "ccscale")
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: err %v, want %q", tc.cc, err, tc.err)
			}
			continue
		}
		if err != nil || c.CC.Scale != tc.scale {
			t.Errorf("%q: %+v, %v; want scale %v", tc.cc, c.CC, err, tc.scale)
		}
	}
}
