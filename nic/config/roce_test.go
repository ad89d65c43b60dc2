package config

import (
	"strings"
	"testing"
	"time"
)

func TestRoCEOptions(t *testing.T) {
	for _, tc := range []struct {
		lines string
		ack   time.Duration
		scale float64
		err   string
	}{
		{"", DefaultRoCEAckTimeout, 0, ""},
		{"roce:\n  ack_timeout: 10ms\n  dcqcn_scale: 100", 10 * time.Millisecond, 100, ""},
		{"roce:\n  dcqcn_scale: -1", 0, 0, "dcqcn_scale -1"},
		{"roce:\n  ack_timeout: -1s", 0, 0, "roce: ack_timeout -1s"},
		{"roce:\n  dcqcn_target: mlx5", DefaultRoCEAckTimeout, 0, ""},
		{"roce:\n  dcqcn_target: paper", DefaultRoCEAckTimeout, 0, ""},
		{"roce:\n  dcqcn_target: cx7", 0, 0, `roce: dcqcn_target "cx7": want "paper"`},
	} {
		src := strings.Replace(good, "evs: 16\n", "evs: 16\n"+tc.lines+"\n", 1)
		c, err := Parse([]byte(src), "roce")
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: err %v, want %q", tc.lines, err, tc.err)
			}
			continue
		}
		if err != nil || c.RoCE.AckTimeout != tc.ack || c.RoCE.DCQCNScale != tc.scale {
			t.Errorf("%q: %+v, %v; want ack %v scale %v", tc.lines, c.RoCE, err, tc.ack, tc.scale)
		}
	}
	c, err := Parse([]byte(strings.Replace(good, "evs: 16\n", "evs: 16\nroce:\n  dcqcn_target: mlx5\n", 1)), "roce")
	if err != nil || c.RoCE.DCQCNTarget != DCQCNTargetMLX5 {
		t.Errorf("dcqcn_target: mlx5: %q, %v", c.RoCE.DCQCNTarget, err)
	}
	if DefaultRoCEAckTimeout != 67108864*time.Nanosecond {
		t.Fatalf("default RoCE ACK timeout %v, want 4.096 µs · 2^14", DefaultRoCEAckTimeout)
	}
}
