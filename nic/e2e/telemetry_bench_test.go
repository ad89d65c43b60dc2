package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/softmrc/softmrc/internal/telemetry"
	"github.com/softmrc/softmrc/nic/verbs"
)

// BenchmarkTelemetryCost measures what the telemetry sampler costs the data
// path: mrc-write-bw (1 QP, 64 KiB writes, 2 s per round) between two
// mrc-nicd on one veth, with no subscriber, with one subscriber at 10 ms and
// with one at 1 ms on each daemon, in alternating rounds of one run (so that
// the machine's load drifts over all three alike). It reports each mode's
// mean bandwidth, its ratio to the run without subscribers, and the samples
// per second the subscribers received (proof they were subscribed).
//
//	go test -run '^$' -bench TelemetryCost -benchtime 1x ./nic/e2e/   (root)
//
// MRC_TELE_ROUNDS sets the rounds per mode (default 5). It also reports the
// two daemons' CPU time per second of each mode (from /proc: utime+stime),
// which shows the sampler's own cost even when the bandwidth is noisy.
func BenchmarkTelemetryCost(b *testing.B) {
	requireNetns(b)
	rounds := 5
	if v, err := strconv.Atoi(os.Getenv("MRC_TELE_ROUNDS")); err == nil && v > 0 {
		rounds = v
	}
	modes := []struct {
		name     string
		interval time.Duration // 0: no subscriber
	}{{"none", 0}, {"10ms", 10 * time.Millisecond}, {"1ms", time.Millisecond}}
	for i := 0; i < b.N; i++ {
		tp := newTopo(b, 1)
		bws := make([][]float64, len(modes))
		rate := make([]float64, len(modes))
		cpu := make([]float64, len(modes))
		for r := 0; r < rounds; r++ {
			for m, mode := range modes {
				var samples atomic.Int64
				ctx, cancel := context.WithCancel(context.Background())
				done := make(chan error, len(tp.h))
				if mode.interval > 0 {
					for _, h := range tp.h {
						go func() {
							done <- verbs.Watch(ctx, h.cfg.DeviceSocket, mode.interval, func(telemetry.Sample) { samples.Add(1) })
						}()
					}
				}
				start := time.Now()
				cpu0 := tp.daemonCPU(b)
				var bw bwJSON
				runJSON(b, tp, "mrc-write-bw", &bw, "-s", "65536", "-D", "2")
				el := time.Since(start)
				cpuUsed := (tp.daemonCPU(b) - cpu0).Seconds() / el.Seconds()
				cancel()
				if mode.interval > 0 {
					for range tp.h {
						if err := <-done; err != nil {
							b.Fatalf("watch at %v: %v", mode.interval, err)
						}
					}
					if samples.Load() == 0 {
						b.Fatalf("the %v subscribers received no sample", mode.interval)
					}
				}
				if len(bw.Results) != 1 {
					b.Fatalf("results: %+v", bw)
				}
				gbps := bw.Results[0].Average * (1 << 20) * 8 / 1e9
				bws[m] = append(bws[m], gbps)
				rate[m] += float64(samples.Load()) / el.Seconds()
				cpu[m] += cpuUsed
				fmt.Printf("round %d, subscribers %-4s: %.3f Gb/s, daemons' CPU %.2f cores, %.0f samples/s\n", r+1, mode.name, gbps, cpuUsed, float64(samples.Load())/el.Seconds())
			}
		}
		base := median(bws[0])
		for m, mode := range modes {
			med := median(bws[m])
			b.ReportMetric(med, "Gbps_"+mode.name)
			b.ReportMetric(cpu[m]/float64(rounds), "cpu_"+mode.name)
			if m > 0 {
				b.ReportMetric(med/base, "ratio_"+mode.name)
			}
			fmt.Printf("subscribers %-4s: median %.3f Gb/s over %d rounds (%.1f%% of none; rounds %.3f), daemons' CPU %.2f cores, %.0f samples/s\n",
				mode.name, med, rounds, 100*med/base, bws[m], cpu[m]/float64(rounds), rate[m]/float64(rounds))
		}
	}
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// daemonCPU is the CPU time both mrc-nicd processes have used (utime +
// stime from /proc/PID/stat; `ip netns exec` execs the daemon, so the
// started process is the daemon).
func (tp *topo) daemonCPU(tb testing.TB) time.Duration {
	var total time.Duration
	for _, h := range tp.h {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", h.daemon.Process.Pid))
		if err != nil {
			tb.Fatalf("mrc-nicd of %s: %v", h.ns, err)
		}
		// Fields after the command (which may hold spaces) start after ')'.
		f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
		ut, _ := strconv.ParseUint(f[11], 10, 64)
		st, _ := strconv.ParseUint(f[12], 10, 64)
		total += time.Duration(ut+st) * time.Second / clkTck
	}
	return total
}

// clkTck is USER_HZ, the unit of /proc times (100 on Linux for x86 and arm).
const clkTck = 100
