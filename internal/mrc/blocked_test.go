package mrc

import (
	"testing"

	"github.com/softmrc/softmrc/internal/wire"
)

// TestBlockedQPFails: a QP with WRs posted and nothing outstanding that
// cannot send (here: every local port down, with NoEVTimeout longer than
// RetryTimeout, so NO_PATH does not end it first) used to wait forever:
// RetryTimeout only counted while data was outstanding (flap damping
// holding every usable plane left a QP of mrc-nicd 300 s like this). It
// must go to error with RETRY_EXCEEDED by RetryTimeout and flush its WRs;
// if a port comes back before then, the transfer resumes and completes.
func TestBlockedQPFails(t *testing.T) {
	const retry = 5 * Millisecond
	for _, tc := range []struct {
		name   string
		upAt   Time // ports back up (0: never)
		want   Status
		wantOK bool // the transfer completes
	}{
		{"ports stay down", 0, StatusRetryExceeded, false},
		{"a port returns in time", 3 * Millisecond, StatusOK, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, hopts{seed: 91, qc: QPConfig{RetryTimeout: retry, NoEVTimeout: Second}})
			for p := 0; p < testPlanes; p++ {
				h.eng[0].SetPortState(0, wire.Plane(p), false)
			}
			if tc.upAt > 0 {
				h.at(tc.upAt, func() { h.eng[0].SetPortState(h.now, 0, true) })
			}
			const size, chunk = 1 << 20, 256 << 10
			src, dst := h.startTransfer(size, chunk)
			done, qpErr := h.runWRs(4*retry, size/chunk)
			if tc.wantOK {
				if qpErr != nil || done != size/chunk || string(src) != string(dst) {
					t.Fatalf("port back at %v ms: %d of %d WRs done, QP error %v", tc.upAt/Millisecond, done, size/chunk, qpErr)
				}
				return
			}
			if qpErr == nil {
				t.Fatalf("QP still %v at %v ms with its WRs posted and no port up: blocked forever", h.snap(0).State, h.now/Millisecond)
			}
			if qpErr.Status != tc.want || h.now < retry || h.now > retry+Millisecond {
				t.Fatalf("QP error %v at %v µs, want %v at RetryTimeout (%v µs)", qpErr.Status, h.now/Microsecond, tc.want, retry/Microsecond)
			}
			if n := h.snap(0).Counters.SendBlockedFail; n != 1 {
				t.Errorf("SendBlockedFail = %d, want 1", n)
			}
		})
	}
}
