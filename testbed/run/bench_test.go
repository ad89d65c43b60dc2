package run

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/softmrc/softmrc/testbed/plan"
	"github.com/softmrc/softmrc/testbed/probe"
	"github.com/softmrc/softmrc/testbed/topo"
)

// BenchmarkUp brings presets up and down and reports bring-up time, the
// daemons' memory (PSS) and the drop in the system's MemAvailable
// (kernel side: namespaces, veths, BPF maps; noisy on a shared machine).
// The kernel dataplane (no daemons) is the baseline measured in the same run.
// After each bring-up one probe per path (every host pair × plane × T1)
// must arrive intact.
//
//	go test -run '^$' -bench Up -benchtime 1x ./testbed/run
func BenchmarkUp(b *testing.B) {
	needRoot(b)
	for _, preset := range []string{"clos-4p", "clos-8p"} {
		for _, dp := range []topo.Dataplane{topo.DataplaneKernel, topo.DataplaneXDP} {
			b.Run(preset+"/"+string(dp), func(b *testing.B) {
				bin := ""
				if dp == topo.DataplaneXDP {
					bin = switchdBin(b)
				}
				top, _ := topo.Preset(preset)
				top.Dataplane = dp
				var upTotal, downTotal, meshTotal time.Duration
				nPaths := 0
				var rss, avail int64
				for i := 0; i < b.N; i++ {
					dir := b.TempDir() + "/run"
					p, err := plan.Build(top, plan.Options{Prefix: randPrefix(b), RunDir: dir})
					if err != nil {
						b.Fatal(err)
					}
					before := memAvailableKB()
					t0 := time.Now()
					st, err := Up(context.Background(), p, Options{BinDir: bin, Log: quietLog()})
					upTotal += time.Since(t0)
					if err != nil {
						Down(dir, quietLog())
						b.Fatal(err)
					}
					avail += before - memAvailableKB()
					for _, pr := range st.Processes {
						rss += procPSSKB(pr.PID)
					}
					// The fabric must work at this scale: every path, once.
					paths, err := probe.Paths(p)
					if err != nil {
						b.Fatal(err)
					}
					t2 := time.Now()
					res, err := probe.Mesh(p, paths, time.Second)
					meshTotal += time.Since(t2)
					if err != nil {
						b.Fatal(err)
					}
					for _, r := range res {
						if !r.Arrived || r.Wrong != "" {
							b.Errorf("%s: arrived=%v %s", r.Path, r.Arrived, r.Wrong)
						}
					}
					nPaths = len(paths)
					t1 := time.Now()
					if err := Down(dir, quietLog()); err != nil {
						b.Fatal(err)
					}
					downTotal += time.Since(t1)
					checkGone(b, p, st)
					if i == 0 {
						b.Logf("%s %s: %d namespaces, %d veths, %d daemons", preset, dp, len(p.Namespaces), len(p.Links), len(st.Processes))
					}
				}
				n := float64(b.N)
				b.ReportMetric(float64(upTotal.Milliseconds())/n, "ms/up")
				b.ReportMetric(float64(downTotal.Milliseconds())/n, "ms/down")
				b.ReportMetric(float64(nPaths), "paths")
				b.ReportMetric(float64(meshTotal.Milliseconds())/n, "ms/mesh")
				b.ReportMetric(float64(rss)/1024/n, "MiB-daemon-PSS")
				b.ReportMetric(float64(avail)/1024/n, "MiB-MemAvailable-drop")
			})
		}
	}
}

func memAvailableKB() int64 {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if v, ok := strings.CutPrefix(s.Text(), "MemAvailable:"); ok {
			n, _ := strconv.ParseInt(strings.Fields(v)[0], 10, 64)
			return n
		}
	}
	return 0
}

// procPSSKB is the proportional set size (shared pages split between the
// daemons that map them), which sums meaningfully over processes.
func procPSSKB(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps_rollup", pid))
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "Pss:"); ok {
			n, _ := strconv.ParseInt(strings.Fields(v)[0], 10, 64)
			return n
		}
	}
	return 0
}
