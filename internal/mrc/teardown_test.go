package mrc

import "testing"

// TestDestroyQPFlushes: DestroyQP completes every posted, uncompleted WR
// with StatusFlushed (verbs, vproto and the daemon promise flush-error
// completions); an application waiting on those WR IDs must not hang.
func TestDestroyQPFlushes(t *testing.T) {
	for _, tc := range []struct {
		name    string
		runFor  Time // how long the transfer runs before the QP is destroyed
		wantAll bool // no WR completed OK before the destroy
	}{
		{"before any packet", 0, true},
		{"mid transfer", 20 * Microsecond, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, hopts{seed: 3})
			const n, chunk = 16, 64 << 10
			h.startTransfer(n*chunk, chunk)
			if tc.runFor > 0 {
				h.run(tc.runFor, nil)
			}
			if err := h.eng[0].DestroyQP(h.qp[0]); err != nil {
				t.Fatal(err)
			}
			seen := map[uint64]Status{}
			for _, c := range h.drainCQ(0) {
				if c.Kind != CompSend {
					continue
				}
				if _, dup := seen[c.WRID]; dup {
					t.Fatalf("WR %d completed twice", c.WRID)
				}
				seen[c.WRID] = c.Status
			}
			if len(seen) != n {
				t.Fatalf("%d of %d WRs completed after DestroyQP, want all (flushed or OK)", len(seen), n)
			}
			flushed := 0
			for _, s := range seen {
				switch s {
				case StatusFlushed:
					flushed++
				case StatusOK:
				default:
					t.Fatalf("status %v, want FLUSHED or OK", s)
				}
			}
			if tc.wantAll && flushed != n {
				t.Fatalf("%d flushed, want %d", flushed, n)
			}
			if flushed == 0 {
				t.Fatal("nothing was flushed: the test did not destroy a QP with posted WRs")
			}
			if err := h.eng[0].DestroyQP(h.qp[0]); err == nil {
				t.Fatal("second DestroyQP succeeded")
			}
			h.run(h.now+Millisecond, nil) // nothing of the destroyed QP may run
		})
	}
}
