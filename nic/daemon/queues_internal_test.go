package daemon

import (
	"os"
	"runtime"
	"strings"
	"testing"

	"github.com/softmrc/softmrc/internal/nsthread"
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

// TestRxQueuesOfVeths: the queue count the warning uses is the one the
// device receives on. A veth made without numrxqueues (every testbed host
// link) allocates a queue per possible CPU but uses one; netlink's count
// made every mrc-nicd on a multi-CPU machine warn that frames on the second
// queue were lost.
func TestRxQueuesOfVeths(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("skipping: not root (needs netns and veth)")
	}
	ns, _, ip := scratchNetns(t, "dq")
	ip("-n", ns, "link", "add", "dflt0", "type", "veth", "peer", "name", "dflt1")
	ip("-n", ns, "link", "add", "three0", "numtxqueues", "3", "numrxqueues", "3", "type", "veth", "peer", "name", "three1", "numtxqueues", "3", "numrxqueues", "3")
	got := map[string]int{}
	if err := nsthread.Named(ns, func() error {
		for _, i := range []string{"dflt0", "three0", "nosuch0"} {
			got[i] = rxQueues(i)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	want := map[string]int{"dflt0": 1, "three0": 3, "nosuch0": 0}
	for i, w := range want {
		if got[i] != w {
			t.Errorf("rxQueues(%s) = %d, want %d (runtime.NumCPU %d)", i, got[i], w, runtime.NumCPU())
		}
	}
	if msg := queueGap("dflt0", got["dflt0"], 0, 1); msg != "" {
		t.Errorf("a default veth with one socket: %s", msg)
	}
}
