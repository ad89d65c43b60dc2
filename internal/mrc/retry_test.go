package mrc

import "testing"

// TestPeerGoneStopsRetrying: the requester must stop retrying when its
// peer is gone and go to error with a retry-exceeded status (both
// StatusRetryExceeded and StatusNoPath become RETRY_EXC_ERR at the verbs
// layer), flushing its WRs, and then send nothing more.
//   - destroyed: the peer's QP is gone, its NIC drops everything for it
//     (probes included): every EV goes ASSUMED_BAD and NoEVTimeout ends it.
//   - desynchronised: the peer's QP is there but connected with another
//     start PSN (a peer that re-created its side), so it answers probes but
//     never acknowledges the data: EVs return to GOOD after each probe and
//     only RetryTimeout ends it.
func TestPeerGoneStopsRetrying(t *testing.T) {
	for _, tc := range []struct {
		name    string
		desync  bool
		timeout Time // QPConfig.RetryTimeout (0: default)
		want    Status
		by      Time // error expected by then
	}{
		{"destroyed", false, 0, StatusNoPath, 100 * Millisecond},
		{"desynchronised, default timeout", true, 0, StatusRetryExceeded, defaultRetryTimeout + 100*Millisecond},
		{"desynchronised, 50 ms", true, 50 * Millisecond, StatusRetryExceeded, 100 * Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, hopts{seed: 61, noQPs: true})
			qc := QPConfig{RetryTimeout: tc.timeout, NoEVTimeout: 10 * Millisecond}
			a, _ := h.eng[0].CreateQP(qc)
			b, _ := h.eng[1].CreateQP(qc)
			ia, _ := h.eng[0].Info(a)
			ib, _ := h.eng[1].Info(b)
			if err := h.eng[0].Connect(a, ib); err != nil {
				t.Fatal(err)
			}
			if tc.desync {
				ia.StartPSN = ia.StartPSN.Add(1 << 22)
			}
			if err := h.eng[1].Connect(b, ia); err != nil {
				t.Fatal(err)
			}
			h.qp[0], h.qp[1] = a, b
			if !tc.desync {
				h.startTransfer(4<<20, 1<<20)
				h.run(30*Microsecond, nil)
				if err := h.eng[1].DestroyQP(b); err != nil {
					t.Fatal(err)
				}
			} else {
				h.startTransfer(4<<20, 1<<20)
			}
			var qpErr *Completion
			wrs := 0
			h.run(tc.by, func() bool {
				for _, c := range h.drainCQ(0) {
					switch c.Kind {
					case CompQPError:
						qpErr = &c
					case CompSend:
						wrs++
					}
				}
				return qpErr != nil
			})
			var s QPSnapshot
			h.eng[0].Snapshot(a, &s)
			if qpErr == nil {
				t.Fatalf("QP still %v at %v ms (timeouts %d, probes %d)", s.State, h.now/Millisecond, s.Counters.Timeouts, s.Counters.TxProbe)
			}
			t.Logf("QP error %v at %v ms", qpErr.Status, h.now/Millisecond)
			if qpErr.Status != tc.want {
				t.Fatalf("QP error %v, want %v", qpErr.Status, tc.want)
			}
			for _, c := range h.drainCQ(0) {
				if c.Kind == CompSend {
					wrs++
				}
			}
			if wrs != 4 {
				t.Fatalf("%d of 4 WRs completed", wrs)
			}
			sent := h.framesSent[0]
			h.run(h.now+Second, nil)
			if d := h.framesSent[0] - sent; d > 0 {
				t.Fatalf("%d frames sent after the QP error", d)
			}
		})
	}
}
