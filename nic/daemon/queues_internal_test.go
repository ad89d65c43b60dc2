package daemon

import (
	"strings"
	"testing"
)

func TestQueueGap(t *testing.T) {
	for _, tc := range []struct {
		rx, first, n int
		want         string // "" or a substring
	}{
		{1, 0, 1, ""},
		{0, 0, 1, ""}, // unknown
		{2, 0, 2, ""},
		{4, 0, 8, ""},
		{2, 0, 1, "2 receive queues and mrc-nicd sockets only on queues 0..0"},
		{8, 0, 2, "set threads: 8"},
		{2, 1, 1, "only on queues 1..1"},
	} {
		got := queueGap("veth0", tc.rx, tc.first, tc.n)
		if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
			t.Errorf("rx %d, sockets %d+%d: %q, want %q", tc.rx, tc.first, tc.n, got, tc.want)
		}
	}
}
