package run

import (
	"testing"
	"time"
)

func TestParseOp(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Op
		ok   bool
	}{
		{"down", Op{Kind: "down"}, true},
		{"up", Op{Kind: "up"}, true},
		{"blackhole", Op{Kind: "blackhole"}, true},
		{"hang", Op{Kind: "hang"}, true},
		{"restart", Op{Kind: "restart"}, true},
		{"clear", Op{Kind: "clear"}, true},
		{"loss=0.01", Op{Kind: "loss", Loss: 0.01}, true},
		{"loss=1%", Op{Kind: "loss", Loss: 0.01}, true},
		{"loss=1", Op{Kind: "loss", Loss: 1}, true},
		{"loss=0", Op{}, false},
		{"loss=1.5", Op{}, false},
		{"loss", Op{}, false},
		{"flap=100ms/50ms", Op{Kind: "flap", FlapOn: 100 * time.Millisecond, FlapOff: 50 * time.Millisecond}, true},
		{"flap=100ms", Op{}, false},
		{"flap=0s/1s", Op{}, false},
		{"down=1", Op{}, false},
		{"explode", Op{}, false},
	} {
		got, err := ParseOp(tc.in)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("ParseOp(%q) = %+v, %v; want %+v ok=%v", tc.in, got, err, tc.want, tc.ok)
		}
		if err == nil {
			if back, err := ParseOp(got.String()); err != nil || back != got {
				t.Errorf("%q: String %q does not parse back: %+v %v", tc.in, got.String(), back, err)
			}
		}
	}
}
