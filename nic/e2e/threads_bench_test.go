package e2e

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// BenchmarkThreads measures what more engine threads buy (mrc-nicd
// -threads, docs/nic.md "More than one core"): on one veth pair with as
// many queues as threads, S mrc-write-bw sessions at once (each its own
// pair of processes, Q QPs, 64 KiB), between daemons started with
// -threads 1 and with -threads N, alternately in every round. Each new QP
// goes to the thread with the fewest QPs. It reports the sum of the sessions' rates and both daemons' CPU per GB, and
// their ratios N/1 within each round (median and range over the rounds).
// A benchmark, never a test: it asserts nothing about speed.
//
//	make bench-threads [ROUNDS=5] [THREADS=2]   (root)
//
// MRC_BENCH_ROUNDS (5), MRC_BENCH_SECS (3), MRC_BENCH_THREADS (2),
// MRC_BENCH_SESSIONS (the thread count) and MRC_BENCH_QPS (2) change the run; MRC_NICD_ARGS adds
// mrc-nicd arguments to both (e.g. -busy-poll 0).
func BenchmarkThreads(b *testing.B) {
	requireNetns(b)
	atoi := func(name, def string) int {
		v := cmp.Or(os.Getenv(name), def)
		k, err := strconv.Atoi(v)
		if err != nil || k <= 0 {
			b.Fatalf("%s=%q: want a positive integer", name, v)
		}
		return k
	}
	rounds := atoi("MRC_BENCH_ROUNDS", "5")
	secs := atoi("MRC_BENCH_SECS", "3")
	n := atoi("MRC_BENCH_THREADS", "2")
	sessions := atoi("MRC_BENCH_SESSIONS", strconv.Itoa(n))
	qps := atoi("MRC_BENCH_QPS", "2")
	if n < 2 || sessions < 1 || rounds < 1 || secs < 1 {
		b.Fatalf("MRC_BENCH_THREADS %d (want >= 2), MRC_BENCH_SESSIONS %d, MRC_BENCH_ROUNDS %d, MRC_BENCH_SECS %d", n, sessions, rounds, secs)
	}
	tp := newTopoQueues(b, 1, false, 3500, 0, n)
	extra := strings.Fields(os.Getenv("MRC_NICD_ARGS"))
	type sample struct{ gbps, cpuPerGB, handed float64 }
	measure := func(threads int) sample {
		for _, h := range tp.h {
			h.extra = append([]string{"-threads", strconv.Itoa(threads)}, extra...)
			h.start(b)
		}
		defer func() {
			for _, h := range tp.h {
				h.stop()
			}
		}()
		cpu0 := tp.daemonCPU(b)
		ctx, cancel := context.WithTimeout(context.Background(), time.Duration(secs+60)*time.Second)
		defer cancel()
		var wg sync.WaitGroup
		rates := make([]float64, sessions)
		errs := make([]error, sessions)
		for k := 0; k < sessions; k++ {
			port := strconv.Itoa(18700 + k)
			args := []string{"-p", port, "-q", strconv.Itoa(qps), "-s", "65536", "-D", strconv.Itoa(secs), "--report_gbits"}
			srv := tp.h[1].tool(ctx, "mrc-write-bw", args...)
			if err := srv.Start(); err != nil {
				b.Fatal(err)
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				out, err := tp.h[0].tool(ctx, "mrc-write-bw", append(args, tp.h[1].addrs[0].String())...).CombinedOutput()
				serr := srv.Wait()
				m := bwRow.FindStringSubmatch(string(out))
				if err != nil || serr != nil || m == nil {
					errs[k] = fmt.Errorf("session %d: client %v, server %v: %s", k, err, serr, out)
					return
				}
				rates[k], _ = strconv.ParseFloat(m[4], 64)
			}()
		}
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				b.Fatalf("-threads %d: %v", threads, err)
			}
		}
		var sum float64
		for _, r := range rates {
			sum += r
		}
		gb := sum * float64(secs) / 8
		cpu := (tp.daemonCPU(b) - cpu0).Seconds() * 1000 / gb
		var handed, rx uint64
		for _, h := range tp.h {
			c := daemonCounters(b, h)
			handed, rx = handed+c["shard_handoffs_out"], rx+c["rx_frames"]
		}
		return sample{sum, cpu, float64(handed) / float64(max(rx, 1))}
	}
	var one, many, rate, cpu []float64
	var rateKept, rateHanded []float64 // rounds without and with most frames handed over
	for r := 0; r < rounds; r++ {
		a, c := measure(1), measure(n)
		one, many = append(one, a.gbps), append(many, c.gbps)
		rate, cpu = append(rate, c.gbps/a.gbps), append(cpu, c.cpuPerGB/a.cpuPerGB)
		if c.handed > 0.5 {
			rateHanded = append(rateHanded, c.gbps/a.gbps)
		} else {
			rateKept = append(rateKept, c.gbps/a.gbps)
		}
		fmt.Printf("round %d: -threads 1 %.2f Gb/s (%.0f ms CPU per GB), -threads %d %.2f Gb/s (%.0f ms per GB, %.0f %% of the frames received handed to another thread)\n",
			r+1, a.gbps, a.cpuPerGB, n, c.gbps, c.cpuPerGB, 100*c.handed)
	}
	span := func(v []float64) string {
		if len(v) == 0 {
			return "– | no round"
		}
		return fmt.Sprintf("**%.2f** | %.2f – %.2f (%d rounds)", median(v), slices.Min(v), slices.Max(v), len(v))
	}
	var t strings.Builder
	fmt.Fprintf(&t, "%d sessions of mrc-write-bw -q %d -s 65536 -D %d at once, veth pair with %d queues, %d alternating rounds:\n\n", sessions, qps, secs, n, rounds)
	fmt.Fprintf(&t, "| measure | median | range |\n|---|---|---|\n")
	fmt.Fprintf(&t, "| sum of the sessions' rates, -threads 1, Gb/s | %s |\n", span(one))
	fmt.Fprintf(&t, "| sum of the sessions' rates, -threads %d, Gb/s | %s |\n", n, span(many))
	fmt.Fprintf(&t, "| rate, -threads %d / -threads 1 | %s |\n", n, span(rate))
	fmt.Fprintf(&t, "| rate, rounds without hand-offs (each QP on the same thread on both hosts) | %s |\n", span(rateKept))
	fmt.Fprintf(&t, "| rate, rounds where most frames were handed to another thread | %s |\n", span(rateHanded))
	fmt.Fprintf(&t, "| both daemons' CPU per GB, -threads %d / -threads 1 | %s |\n", n, span(cpu))
	fmt.Print(t.String()) // to stdout: go test cuts a benchmark's log at 10 lines
	b.ReportMetric(median(rate), "rate-ratio")
	b.ReportMetric(median(cpu), "cpu-per-GB-ratio")
	for i := 0; i < b.N; i++ {
	}
}
