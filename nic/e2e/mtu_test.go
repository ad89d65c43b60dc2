package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/softmrc/softmrc/nic/vproto"
)

// portStats sums every counter of a host's AF_XDP ports.
func portStats(t testing.TB, bin, sock string) map[string]uint64 {
	t.Helper()
	b, err := exec.Command(filepath.Join(bin, "mrcctl"), "-json", "-d", sock, "ports").Output()
	if err != nil {
		t.Fatalf("mrcctl ports: %v", err)
	}
	var ps []vproto.PortStatus
	if err := json.Unmarshal(b, &ps); err != nil {
		t.Fatalf("mrcctl ports: %v: %s", err, b)
	}
	sum := map[string]uint64{}
	for _, p := range ps {
		for k, v := range p.Stats {
			sum[k] += v
		}
	}
	return sum
}

// TestTestbedMTU4096: clos-2p with --roce-mtu 4096 (links at 4228, every
// XDP program frags-aware, the NICs' sockets multi-buffer): mrc-write-bw
// --mtu 4096 from h0 to h3, across a T1, 64 KiB and 8 MiB messages, every
// byte verified, and the data really went in 4 KiB payloads (fewer data
// frames than a 2048 MTU needs for the bytes written).
func TestTestbedMTU4096(t *testing.T) {
	requireNetns(t)
	tb := upTestbedArgs(t, "clos-2p", []string{"--roce-mtu", "4096"}, nil, nil, "h0", "h3")
	if m := tb.hosts["h0"].cfg.MTU; m != 4096 {
		t.Fatalf("the testbed wrote mtu %d into h0's NIC config, want 4096", m)
	}
	// Data frames (engine counters, both planes): a 2048 MTU needs at
	// least bytes/2048 of them, a 4096 MTU bytes/4096. Small frames sent on
	// timers (path probes, more of them the slower the run) do not count.
	dataFrames := func() uint64 {
		c := tb.engineCounters(t, "h0")
		return c["TxDataByPlane.plane0"] + c["TxDataByPlane.plane1"]
	}
	for _, size := range []int{65536, 8388608} {
		const iters = 20
		d0 := dataFrames()
		out, err := tb.run(t, "mrc-write-bw", "h0", "h3", "--mtu", "4096", "-s", fmt.Sprint(size), "-n", fmt.Sprint(iters), "--verify")
		t.Logf("\n%s", out)
		if err != nil {
			t.Fatalf("mrc-write-bw --mtu 4096 -s %d --verify: %v", size, err)
		}
		if !strings.Contains(out, "Mtu             : 4096[B]") || bwRow.FindStringSubmatch(out) == nil {
			t.Fatalf("no 4096-MTU result row:\n%s", out)
		}
		// The run's warm-up posts are not in -n; allow them and
		// retransmissions up to half again the minimum, still far below
		// what a 2048 MTU needs.
		bytes := uint64(size * iters)
		n, min4k := dataFrames()-d0, bytes/4096
		t.Logf("-s %d: h0 sent %d data frames for %d bytes (%.0f bytes each)", size, n, bytes, float64(bytes)/float64(n))
		if n < min4k || n >= bytes/2048 {
			t.Errorf("-s %d: %d data frames for %d bytes: want %d..%d (4 KiB payloads; a 2048 MTU needs %d)", size, n, bytes, min4k, bytes/2048-1, bytes/2048)
		}
	}
}

// TestPathMTUMismatch: NICs configured for a 4096 RoCE MTU on 2048-byte
// links: the connect fails, and the tool's error says what is wrong and
// what to change (pathmtu.Error).
func TestPathMTUMismatch(t *testing.T) {
	requireNetns(t)
	tp := newTopoMTU(t, 1, true, 2048, 4096)
	out, err := tp.pairRun(t, time.Minute, "mrc-write-bw", "-s", "65536", "-n", "5")
	t.Logf("\n%s", out)
	if err == nil {
		t.Fatal("mrc-write-bw with a 4096 RoCE MTU on 2048-MTU ports succeeded")
	}
	for _, want := range []string{"path MTU: a RoCE MTU of 4096 needs an interface MTU of at least 4188",
		"has MTU 2048", "raise the interface MTU to 4188"} {
		if !strings.Contains(out, want) {
			t.Errorf("the error does not say %q", want)
		}
	}
}

// BenchmarkRoCEMTU compares RoCE MTU 2048 with 4096 in the same run on the
// same veths (two planes, ECMP mode, link MTU 4300 so both fit): mrc-nicd
// is restarted with the one or the other MTU, alternately, for
// MRC_MTU_ROUNDS (default 5) rounds of mrc-write-bw, 1 QP, -D 2, per
// message size. It reports the medians and the 4096/2048 ratio
// and both daemons' CPU time per GB written (from /proc; it moves much less
// with the machine's load than the rate) (docs/performance.md). A
// benchmark, not a test: it takes about a minute.
//
//	MRC_BIN=$PWD/bin go test -run '^$' -bench RoCEMTU -benchtime 1x ./nic/e2e
func BenchmarkRoCEMTU(b *testing.B) {
	requireNetns(b)
	rounds := 5
	if v, err := strconv.Atoi(os.Getenv("MRC_MTU_ROUNDS")); err == nil && v > 0 {
		rounds = v
	}
	tp := newTopoMTU(b, 2, false, 4300, 2048)
	paths := map[int][2]string{}
	for _, mtu := range []int{2048, 4096} {
		var ps [2]string
		for i, h := range tp.h {
			c := *h.cfg
			c.MTU = mtu
			ps[i] = filepath.Join(tp.dir, fmt.Sprintf("h%d-mtu%d.yaml", i+1, mtu))
			if err := c.Write(ps[i]); err != nil {
				b.Fatal(err)
			}
		}
		paths[mtu] = ps
	}
	sizes := []string{"65536", "1048576"}
	res := map[string]map[int][]float64{}   // MiB/s
	cpuGB := map[string]map[int][]float64{} // CPU seconds of both daemons per GB written
	for _, s := range sizes {
		res[s] = map[int][]float64{}
		cpuGB[s] = map[int][]float64{}
	}
	for r := 0; r < rounds; r++ {
		order := []int{2048, 4096}
		if r%2 == 1 {
			order = []int{4096, 2048} // alternate, so neither always goes first
		}
		for _, mtu := range order {
			for i, h := range tp.h {
				h.path = paths[mtu][i]
				h.start(b)
			}
			for _, s := range sizes {
				cpu0 := tp.daemonCPU(b)
				rx0 := portStats(b, tp.h[1].bin, tp.h[1].cfg.DeviceSocket)
				out, err := tp.pairRun(b, 2*time.Minute, "mrc-write-bw", "--mtu", fmt.Sprint(mtu), "-s", s, "-D", "2", "--verify")
				cpu := tp.daemonCPU(b) - cpu0
				m := bwRow.FindStringSubmatch(out)
				if err != nil || m == nil {
					b.Fatalf("round %d mtu %d -s %s: %v\n%s", r, mtu, s, err, out)
				}
				v, _ := strconv.ParseFloat(m[4], 64)
				size, _ := strconv.ParseFloat(m[1], 64)
				iters, _ := strconv.ParseFloat(m[2], 64)
				perGB := cpu.Seconds() / (size * iters / 1e9)
				res[s][mtu] = append(res[s][mtu], v)
				cpuGB[s][mtu] = append(cpuGB[s][mtu], perGB)
				rx1 := portStats(b, tp.h[1].bin, tp.h[1].cfg.DeviceSocket)
				drops := func(st map[string]uint64) uint64 {
					return st["RxDropped"] + st["RxRingFull"] + st["FillEmpty"] + st["RxPartial"]
				}
				b.Logf("round %d: mtu %d -s %s: %.1f MiB/s, both daemons %.2f CPU-s per GB; receiver frames %d, dropped %d",
					r, mtu, s, v, perGB, rx1["RxFrames"]-rx0["RxFrames"], drops(rx1)-drops(rx0))
			}
			for _, h := range tp.h {
				h.stop()
			}
		}
	}
	// Each ratio within one round (both MTUs under the same load), then
	// the median and range over the rounds, as make bench-nic does.
	for _, s := range sizes {
		var ratios []float64
		for r := range res[s][2048] {
			ratios = append(ratios, res[s][4096][r]/res[s][2048][r])
		}
		b.Logf("-s %s: MTU 2048 median %.1f MiB/s %.1f; MTU 4096 median %.1f MiB/s %.1f; ratio 4096/2048 per round %.2f, median %.2f (range %.2f-%.2f)",
			s, median(res[s][2048]), res[s][2048], median(res[s][4096]), res[s][4096], ratios, median(ratios), slices.Min(ratios), slices.Max(ratios))
		b.ReportMetric(median(ratios), "ratio_4096_2048_s"+s)
		// CPU per GB moves much less with the machine's load than the rate.
		var cr []float64
		for r := range cpuGB[s][2048] {
			cr = append(cr, cpuGB[s][4096][r]/cpuGB[s][2048][r])
		}
		b.Logf("-s %s: CPU-s per GB: MTU 2048 median %.2f, MTU 4096 median %.2f; ratio 4096/2048 per round %.2f, median %.2f",
			s, median(cpuGB[s][2048]), median(cpuGB[s][4096]), cr, median(cr))
		b.ReportMetric(median(cr), "cpu_ratio_4096_2048_s"+s)
	}
}
