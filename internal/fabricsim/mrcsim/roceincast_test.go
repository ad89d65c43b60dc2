package mrcsim

import (
	"testing"

	"github.com/softmrc/softmrc/internal/dcqcn"
	"github.com/softmrc/softmrc/internal/fabricsim"
	"github.com/softmrc/softmrc/internal/mrc"
)

// TestScenarioRoCE16Incast: S7's RoCE 16 QPs where they hurt most, in the
// simulator: 3 hosts × 16 RoCE QPs write 128 KiB each into one host over
// 80 Mbit/s links with mrc-switchd's port model (ECN above 16 KiB on every
// port, trims above 64 KiB, 128 KiB buffers), NICs paced at 80 Mbit/s,
// DCQCN × 1250 (S7's dcqcn_scale), no injected loss. The only losses are
// trims at the receiver's downlink, which RoCE takes as plain losses.
//
// With perftest's ACK timeout (67 ms), before the RoCE retry fixes of
// 2026-12-03 (transport timer after a retry, stale NAKs) 6, 8 and 5 of
// the 48 QPs failed with RETRY_EXCEEDED on seeds 1-3; after them at most 1
// per seed does. That one is lossy RoCE as IBTA has it: its retransmissions
// are trimmed again and again at a port that stays full, because DCQCN does
// not slow down for a loss, only for CNPs (failed QP of seed 1: 7 timeouts
// and 1 NAK without progress, DCQCN at 1.0 Mbit/s after 10 CNPs). With
// NCCL's timeout (20: 4.295 s, S7's roce_ack_timeout) no QP fails: 8
// retries span 34 s, and the incast drains long before.
func TestScenarioRoCE16Incast(t *testing.T) {
	for _, tc := range []struct {
		name      string
		ackTO     mrc.Time
		maxFailed int // QPs with RETRY_EXCEEDED, per seed
	}{
		{"perftest timeout 67 ms", 67 * mrc.Millisecond, 1},
		{"NCCL timeout 4.295 s", 4295 * mrc.Millisecond, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for seed := uint64(1); seed <= 3; seed++ {
				failed, timeouts := roceIncast(t, seed, tc.ackTO)
				t.Logf("seed %d: %d of 48 QPs failed, %d timeouts", seed, failed, timeouts)
				if failed > tc.maxFailed {
					t.Errorf("seed %d: %d of 48 QPs failed with RETRY_EXCEEDED, want at most %d", seed, failed, tc.maxFailed)
				}
			}
		})
	}
}

func roceIncast(t *testing.T, seed uint64, ackTO mrc.Time) (failed int, timeouts uint64) {
	sc := fabricsim.DefaultConfig()
	sc.Mode = fabricsim.ModeECMP
	sc.Planes, sc.T0s, sc.T1s, sc.HostsPerT0 = 1, 2, 2, 2
	port := fabricsim.LinkConfig{XDP: true, Delay: 8_000, Jitter: 10_000, ECNBytes: 16 << 10, TrimBytes: 64 << 10, BufferBytes: 128 << 10, HostECN: true}
	sc.Host, sc.Fabric = port, port
	sc.Host.RateBps, sc.Fabric.RateBps = 80e6, 80e6
	sc.Seed = seed
	f := newFabric(t, sc, seed, func(_ int, c *mrc.Config) { c.PortRate = 0.08 })
	// As mrc-nicd makes a RoCE QP (nic/daemon nic.go): a fixed IBTA
	// timeout, no backoff, retry_cnt 7, DCQCN scaled.
	qc := mrc.QPConfig{Transport: mrc.RoCE, AckTimeout: ackTO, FixedRTO: true, TimeoutMode: mrc.TimeoutLinear,
		RetryLimit: 7, DCQCN: dcqcn.Config{}.Scaled(1250)}
	var fls []*Flow
	for src := 0; src < 3; src++ {
		for range 16 {
			fl := connect(t, f, src, 3, qc, 128<<10, 64<<10, 2)
			fl.StartAt(0)
			fls = append(fls, fl)
		}
	}
	f.RunUntilDone(120e9)
	for _, fl := range fls {
		timeouts += fl.Snapshot().Counters.Timeouts
		switch {
		case len(fl.Errors) > 0:
			failed++
		case !fl.Done() || !fl.Exact():
			t.Fatalf("seed %d: flow h%d->h%d neither failed nor completed exactly (%d of %d bytes)", seed, fl.Src, fl.Dst, fl.Completed(), fl.Size)
		}
	}
	return failed, timeouts
}
