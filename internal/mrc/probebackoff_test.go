package mrc

import (
	"testing"

	"github.com/softmrc/softmrc/internal/wire"
)

// TestProbeTimeoutBacksOffWithoutEVs: the peer goes silent for 5 ms (every
// EV times out and goes ASSUMED_BAD), then answers again, but 2 ms late,
// where srtt was 6 µs: a host that became starved of CPU. The answers to
// probes are then the only RTT samples left. With a probe timeout fixed at
// 3·srtt every answer came after its probe had failed, srtt never grew,
// 20 048 probes went out and the QP failed NO_PATH at NoEVTimeout with
// every byte deliverable. The timeout now doubles per unanswered round
// while no EV is usable, so the answers land, srtt learns the new RTT and
// the write completes.
func TestProbeTimeoutBacksOffWithoutEVs(t *testing.T) {
	h := newHarness(t, hopts{seed: 5, qc: QPConfig{NoEVTimeout: 100 * Millisecond, RetryTimeout: Second}})
	const size, chunk = 8 << 20, 256 << 10
	src, dst := h.startTransfer(size, chunk)
	h.run(100*Microsecond, nil)
	before := h.snap(0).SRTT
	h.Filter = func(from int, _ wire.Plane, _ []byte) bool { return from == 1 }
	h.run(h.now+5*Millisecond, nil)
	q := h.eng[0].qps[h.qp[0]]
	if q.anyUsableEV() {
		t.Fatalf("after 5 ms of silence %d of %d EVs are ASSUMED_BAD, want all", q.nBad, len(q.evs))
	}
	h.Filter = nil
	h.Delay = Millisecond // each way: RTT 2 ms
	done, qpErr := h.runWRs(h.now+300*Millisecond, size/chunk)
	s := h.snap(0)
	t.Logf("srtt %v ns before, %v ns after; done at %v ms; %d probes", before, s.SRTT, h.now/Millisecond, s.Counters.TxProbe)
	if qpErr != nil || done != size/chunk || string(src) != string(dst) {
		t.Fatalf("QP error %v, %d of %d WRs done at %v ms after %d probes", qpErr, done, size/chunk, h.now/Millisecond, s.Counters.TxProbe)
	}
	if s.SRTT < Millisecond {
		t.Errorf("srtt %v ns after the RTT became 2 ms: no sample was taken", s.SRTT)
	}
}

// While other EVs carry the data, probes of the dead ones keep the short
// timeout: the backoff is only for a QP with no usable EV (a dead plane
// here: side 0's plane 0 drops everything it sends).
func TestProbeTimeoutNoBackoffWithUsableEVs(t *testing.T) {
	h := newHarness(t, hopts{seed: 6})
	h.startTransfer(8<<20, 256<<10)
	h.run(100*Microsecond, nil)
	h.Filter = func(from int, port wire.Plane, _ []byte) bool { return from == 0 && port == 0 }
	h.run(h.now+5*Millisecond, nil)
	q := h.eng[0].qps[h.qp[0]]
	if q.nBad == 0 || !q.anyUsableEV() {
		t.Fatalf("%d of %d EVs ASSUMED_BAD, usable ones left %v: want some of each", q.nBad, len(q.evs), q.anyUsableEV())
	}
	if s := h.snap(0); q.probeBackoff != 0 || q.probeTimeout() != max(3*q.srtt, 50*Microsecond) || s.Counters.TxProbe == 0 {
		t.Fatalf("probe backoff %d, timeout %v ns with srtt %v ns, %d probes: want no backoff", q.probeBackoff, q.probeTimeout(), q.srtt, s.Counters.TxProbe)
	}
}
