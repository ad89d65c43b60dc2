package e2e

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/softmrc/softmrc/nic/config"
	"github.com/softmrc/softmrc/nic/pathmtu"
	tbtopo "github.com/softmrc/softmrc/testbed/topo"
)

// BenchmarkNICCompare is `make bench-nic`: the soft NIC against this
// machine's floor and the kernel on the same paths, in one run, in
// alternating rounds. Each round measures, on each path:
//
//   - with mrc-nicd stopped (no XDP program on the ports, as a kernel user
//     has them): a raw AF_XDP sender → receiver of mrc-nicd's own data
//     frames (a payload of MRC_BENCH_ROCE_MTU bytes) on port 0 (the floor), one kernel TCP stream, on clos-2p
//     one kernel MPTCP connection with one subflow per plane, and a 2-byte
//     kernel UDP ping-pong;
//   - then with mrc-nicd started on both hosts: mrc-write-bw for each size
//     and QP count of MRC_BENCH_BW and mrc-write-lat for each size of
//     MRC_BENCH_LAT; then the daemons stop again;
//   - then the same cases with the NIC inside each tool (--in-process),
//     unless MRC_BENCH_IN_PROCESS=0.
//
// The paths are a veth pair between two namespaces ("veth") and h0 → h3 of
// clos-2p in ecmp mode ("clos": across a T1, where the kernel's packets
// cross the XDP switches as the NIC's do). After the first start on the
// veth pair, both idle daemons' CPU use is read from /proc over
// MRC_BENCH_IDLE.
//
// It prints the ratios (median and range over the rounds, each ratio taken
// within one round) and the measurements, and with MRC_BENCH_OUT=FILE
// replaces the generated section of FILE (docs/performance.md) with them.
//
//	make bench-nic [ROUNDS=5]   (root; docs/performance.md says what each knob does)
//
// Every load loop is bounded: each measurement by MRC_BENCH_SECS or an
// iteration count, each tool run by a 2-minute context. Traffic stays in
// the namespaces the run creates.
func BenchmarkNICCompare(b *testing.B) {
	requireNetns(b)
	cfg := benchNICConfigFromEnv(b)
	for i := 0; i < b.N; i++ {
		res := runBenchNIC(b, cfg)
		out := res.markdown(cfg)
		fmt.Print(out)
		if cfg.out != "" {
			if err := writeGenerated(cfg.out, genSection(cfg.roceMTU), out); err != nil {
				b.Fatal(err)
			}
			fmt.Fprintf(os.Stderr, "bench-nic: wrote %s\n", cfg.out)
		}
		for _, r := range res.ratios() {
			if r.path == "veth" || r.path == "clos" {
				if m, _, _, ok := stats(r.vals); ok {
					b.ReportMetric(m, r.path+":"+strings.ReplaceAll(r.name, " ", "_"))
				}
			}
		}
	}
}

// bwCase is one mrc-write-bw configuration.
type bwCase struct{ size, qps int }

// value is what the ratio table takes from a run of c: Gb/s, or for
// writes under 4 KiB the message rate (Mmsg/s: bytes per second mean
// little for tiny writes), as bwName names it.
func (c bwCase) value(r bwResult) float64 {
	if c.size < 4096 {
		return r.MsgRate
	}
	return r.Average * (1 << 20) * 8 / 1e9
}

func (c bwCase) String() string {
	return fmt.Sprintf("mrc-write-bw %s, %d QP", sizeName(c.size), c.qps)
}

type benchNICConfig struct {
	rounds  int
	secs    int
	paths   []string
	bw      []bwCase
	lat     []int
	latIter int
	idle    time.Duration
	out     string
	cmdline string
	nicArgs []string
	base    string // MRC_BENCH_BASE_BIN: older binaries to alternate with, for before/after ratios
	roceMTU int    // MRC_BENCH_ROCE_MTU: the NICs' RoCE MTU; the links are sized for it
	// MRC_BENCH_BUSY_POLL: the latency is measured again with the daemons
	// started with -busy-poll this long (default 0: what the default
	// polling saves; negative: not measured again).
	busyPoll time.Duration
	// MRC_BENCH_IN_PROCESS (default 1; 0: not measured): after the daemons
	// stop, the same bandwidth and latency cases with the NIC inside each
	// tool (--in-process).
	inProcess bool
}

// benchLinkMTU is the veth path's interface MTU for RoCE MTU m: the
// testbed's default link MTU (3500), or what m's frames need where that is
// more. Kernel TCP and UDP use the same links, so every baseline sees the
// MTU the NIC gets.
func benchLinkMTU(m int) int { return max(3500, pathmtu.IfMTU(m, false)) }

// closLinkMTU is the interface MTU mrc-testbed up --roce-mtu m gives
// clos-2p's links (the same code: the preset with that RoCE MTU).
func closLinkMTU(m int) int {
	t, err := tbtopo.Preset("clos-2p")
	if err != nil {
		return 0
	}
	t.SetRoCEMTU(m)
	return t.MTU
}

func benchNICConfigFromEnv(tb testing.TB) benchNICConfig {
	tb.Helper()
	atoi := func(name, def string) int {
		v := cmp.Or(os.Getenv(name), def)
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			tb.Fatalf("%s=%q: want a positive integer", name, v)
		}
		return n
	}
	c := benchNICConfig{
		rounds:  atoi("MRC_BENCH_ROUNDS", "5"),
		secs:    atoi("MRC_BENCH_SECS", "2"),
		latIter: atoi("MRC_BENCH_LAT_ITERS", "1000"),
		out:     os.Getenv("MRC_BENCH_OUT"),
		cmdline: cmp.Or(os.Getenv("MRC_BENCH_CMD"), "go test -run '^$' -bench NICCompare -benchtime 1x ./nic/e2e/"),
		nicArgs: strings.Fields(os.Getenv("MRC_NICD_ARGS")),
		base:    os.Getenv("MRC_BENCH_BASE_BIN"),
		roceMTU: atoi("MRC_BENCH_ROCE_MTU", "2048"),
	}
	if c.roceMTU != 1024 && c.roceMTU != 2048 && c.roceMTU != 4096 {
		tb.Fatalf("MRC_BENCH_ROCE_MTU=%d: want 1024, 2048 or 4096 (a RoCE MTU)", c.roceMTU)
	}
	if c.base != "" {
		if _, err := os.Stat(filepath.Join(c.base, "mrc-nicd")); err != nil {
			tb.Fatalf("MRC_BENCH_BASE_BIN=%s: %v (a bin folder of an older build: git worktree add, make build)", c.base, err)
		}
	}
	for _, p := range strings.Split(cmp.Or(os.Getenv("MRC_BENCH_PATHS"), "veth,clos"), ",") {
		p = strings.TrimSpace(p)
		if p != "veth" && p != "clos" {
			tb.Fatalf("MRC_BENCH_PATHS: unknown path %q: want veth, clos or both (comma-separated)", p)
		}
		c.paths = append(c.paths, p)
	}
	// SIZExQPS, comma-separated.
	for _, f := range strings.Split(cmp.Or(os.Getenv("MRC_BENCH_BW"), "65536x1,65536x4,2x1,8388608x1"), ",") {
		s, q, ok := strings.Cut(strings.TrimSpace(f), "x")
		size, err1 := strconv.Atoi(s)
		qps, err2 := strconv.Atoi(q)
		if !ok || err1 != nil || err2 != nil || size < 2 || size > 8<<20 || qps < 1 {
			tb.Fatalf("MRC_BENCH_BW: %q: want SIZExQPS with SIZE 2 .. 8388608 and QPS ≥ 1, e.g. 65536x4", f)
		}
		c.bw = append(c.bw, bwCase{size, qps})
	}
	for _, f := range strings.Split(cmp.Or(os.Getenv("MRC_BENCH_LAT"), "2"), ",") {
		size, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || size < 2 || size > 8<<20 {
			tb.Fatalf("MRC_BENCH_LAT: %q: want sizes 2 .. 8388608", f)
		}
		c.lat = append(c.lat, size)
	}
	idle, err := time.ParseDuration(cmp.Or(os.Getenv("MRC_BENCH_IDLE"), "10s"))
	if err != nil || idle < 0 || idle > time.Minute {
		tb.Fatalf("MRC_BENCH_IDLE=%q: want a duration from 0 (skip) to 1m", os.Getenv("MRC_BENCH_IDLE"))
	}
	c.idle = idle
	switch v := cmp.Or(os.Getenv("MRC_BENCH_IN_PROCESS"), "1"); v {
	case "1":
		c.inProcess = true
	case "0":
	default:
		tb.Fatalf("MRC_BENCH_IN_PROCESS=%q: want 1 (measure the tools' --in-process NIC too) or 0", v)
	}
	c.busyPoll = -1
	if v := cmp.Or(os.Getenv("MRC_BENCH_BUSY_POLL"), "0"); v != "none" {
		bp, err := time.ParseDuration(v)
		if err != nil || bp < 0 || bp > 10*time.Millisecond {
			tb.Fatalf("MRC_BENCH_BUSY_POLL=%q: want a duration from 0 (polling off) to 10ms, or none (no second latency run)", v)
		}
		c.busyPoll = bp
	}
	return c
}

// benchNICResult holds every round's value of every measurement, by path.
type benchNICResult struct {
	start, end       time.Time
	loadBefore       string
	loadAfter        string
	kernel           string
	vals             map[string]map[string][]float64 // path → measurement → per round (NaN-free; a missing round is absent)
	order            []string                        // measurement names in first-seen order
	idle             []idleSample
	mptcpPlaneShares []float64 // share of MPTCP bytes h0 sent on plane 1, per round
}

type idleSample struct {
	host    string
	percent float64
	window  time.Duration
}

func (r *benchNICResult) add(path, name string, round int, v float64) {
	if r.vals[path] == nil {
		r.vals[path] = map[string][]float64{}
	}
	if !slices.Contains(r.order, name) {
		r.order = append(r.order, name)
	}
	s := r.vals[path][name]
	if len(s) > round {
		panic(fmt.Sprintf("bench-nic: %s on %s measured twice in round %d", name, path, round+1))
	}
	for len(s) < round {
		s = append(s, nan) // keeps rounds aligned for the per-round ratios
	}
	r.vals[path][name] = append(s, v)
}

var nan = func() float64 { var z float64; return z / z }()

const (
	mRaw = "raw AF_XDP payload (port 0), Gb/s"
	// The raw sender's and receiver's thread CPU per GB of payload
	// received: the floor for mrc-nicd's CPU per GB rows.
	mRawTxCPU = "raw AF_XDP sender thread CPU, ms per GB"
	mRawRxCPU = "raw AF_XDP receiver thread CPU, ms per GB"
	mTCP      = "kernel TCP 1 stream, Gb/s"
	mTCPPkt   = "kernel TCP mean packet sent by h0's port 0 (one per skb), bytes"
	mMPTCP    = "kernel MPTCP 1 subflow/plane, Gb/s"
	mUDP      = "kernel UDP ping-pong 2 B half RTT, µs"
	// The raw AF_XDP ping-pongs (rawping_test.go): the latency floors of
	// an AF_XDP transport on the path, with each side's thread asleep on
	// its socket, spinning, or handing each frame to an application
	// thread and back (a daemon's shape).
	mRawPing        = "raw AF_XDP ping-pong 2 B half RTT, µs"
	mRawPingSpin    = "raw AF_XDP ping-pong 2 B, spinning, half RTT, µs"
	mRawPingHandoff = "raw AF_XDP ping-pong 2 B, hand-off to an application thread per side, half RTT, µs"
	mRawPingHOSpin  = "raw AF_XDP ping-pong 2 B, hand-off per side, socket threads spinning, half RTT, µs"
)

// rawPingName is the measurement of a raw ping-pong mode.
func rawPingName(m rawPingMode) string {
	return [...]string{mRawPing, mRawPingSpin, mRawPingHandoff, mRawPingHOSpin}[m]
}

// basePrefix names the measurements of MRC_BENCH_BASE_BIN's binaries.
const basePrefix = "before: "

func bwName(c bwCase) string {
	if c.size < 4096 {
		return c.String() + ", Mmsg/s"
	}
	return c.String() + ", Gb/s"
}
func latName(size int) string {
	return fmt.Sprintf("mrc-write-lat %s t_typical (half RTT), µs", sizeName(size))
}

// latBusyName names the latency measured with the daemons' -busy-poll set
// to busy (0: off) instead of their default.
func latBusyName(size int, busy time.Duration) string {
	return fmt.Sprintf("mrc-write-lat %s, mrc-nicd -busy-poll %v t_typical (half RTT), µs", sizeName(size), busy)
}

func sizeName(n int) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d B", n)
}

func progress(format string, a ...any) {
	fmt.Fprintf(os.Stderr, "bench-nic %s: %s\n", time.Now().UTC().Format("15:04:05"), fmt.Sprintf(format, a...))
}

func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

func runBenchNIC(b *testing.B, cfg benchNICConfig) *benchNICResult {
	res := &benchNICResult{start: time.Now(), loadBefore: loadavg(), vals: map[string]map[string][]float64{}}
	if out, err := exec.Command("uname", "-r").Output(); err == nil {
		res.kernel = strings.TrimSpace(string(out))
	}
	d := time.Duration(cfg.secs) * time.Second
	// The paths are built once; the rounds alternate over them.
	type path struct {
		name string
		mrc  *topo // management (veth: port) addresses, for the tools' out-of-band setup
		kern *topo // port addresses: the kernel's traffic and the raw frames go here
	}
	var paths []path
	for _, p := range cfg.paths {
		switch p {
		case "veth":
			tp := newTopoMTU(b, 1, false, benchLinkMTU(cfg.roceMTU), cfg.roceMTU)
			paths = append(paths, path{p, tp, tp})
		case "clos":
			progress("bringing up clos-2p (ecmp mode)")
			m, k := fabricPairStartMTU(b, "h0", "h3", false, cfg.roceMTU)
			setupMPTCP(b, k)
			paths = append(paths, path{p, m, k})
		}
	}
	for _, p := range paths {
		for _, h := range p.mrc.h {
			for _, a := range cfg.nicArgs {
				h.extra = append(h.extra, strings.ReplaceAll(a, "%h", h.cfg.Host))
			}
		}
	}
	for round := 0; round < cfg.rounds; round++ {
		for _, p := range paths {
			tag := fmt.Sprintf("round %d/%d %s", round+1, cfg.rounds, p.name)
			raw := rawXDPRun(b, p.kern.h[0], p.kern.h[1], 0, d)
			fps := raw.fps
			res.add(p.name, mRaw, round, fps*float64(raw.payload)*8/1e9)
			if gb := float64(raw.got) * float64(raw.payload) / 1e9; gb > 0 {
				res.add(p.name, mRawTxCPU, round, float64(raw.txCPU.Milliseconds())/gb)
				res.add(p.name, mRawRxCPU, round, float64(raw.rxCPU.Milliseconds())/gb)
			}
			progress("%s: raw AF_XDP %.3f Mpps, %.2f Gb/s payload (%d frames sent, %d received; CPU %.2f s sender, %.2f s receiver)",
				tag, fps/1e6, fps*float64(raw.payload)*8/1e9, raw.sent, raw.got, raw.txCPU.Seconds(), raw.rxCPU.Seconds())
			// What the kernel puts on the wire per packet: on a bare veth
			// pair TSO skbs of up to 64 KiB cross it whole; through the XDP
			// fabric they are segmented to the link MTU before h0's port.
			port0 := p.kern.h[0].cfg.Ports[0].Interface
			pk0, by0 := linkCounters(b, p.kern.h[0].ns, port0, "tx")
			tcp := tcpStream(b, p.kern, d)
			pk1, by1 := linkCounters(b, p.kern.h[0].ns, port0, "tx")
			res.add(p.name, mTCP, round, tcp*8/1e9)
			if pk1 > pk0 {
				res.add(p.name, mTCPPkt, round, float64(by1-by0)/float64(pk1-pk0))
			}
			progress("%s: kernel TCP %.2f Gb/s (%d packets of %.0f bytes on average left h0's %s)", tag, tcp*8/1e9,
				pk1-pk0, float64(by1-by0)/float64(max(pk1-pk0, 1)), port0)
			if p.name == "clos" {
				mp, share := mptcpStream(b, p.kern, d)
				res.add(p.name, mMPTCP, round, mp*8/1e9)
				res.mptcpPlaneShares = append(res.mptcpPlaneShares, share)
				progress("%s: kernel MPTCP %.2f Gb/s (%.0f %% of h0's bytes on plane 1)", tag, mp*8/1e9, 100*share)
			}
			udp := udpPingPong(b, p.kern, cfg.latIter)
			res.add(p.name, mUDP, round, udp)
			progress("%s: kernel UDP ping-pong %.1f µs", tag, udp)
			var floors []string
			for _, mode := range []rawPingMode{rawPingBlock, rawPingSpin, rawPingHandoff, rawPingHandoffSpin} {
				us := rawXDPPingPong(b, p.kern.h[0], p.kern.h[1], 0, cfg.latIter, mode)
				res.add(p.name, rawPingName(mode), round, us)
				floors = append(floors, fmt.Sprintf("%v %.1f µs", mode, us))
			}
			progress("%s: raw AF_XDP ping-pong %s", tag, strings.Join(floors, ", "))

			bins := []string{""}
			if cfg.base != "" {
				// Before and after in the same round, in alternating order.
				bins = []string{"", cfg.base}
				if round%2 == 1 {
					bins = []string{cfg.base, ""}
				}
			}
			for _, bin := range bins {
				prefix, own := "", p.mrc.h[0].bin
				if bin != "" {
					prefix = basePrefix
					for _, h := range p.mrc.h {
						h.bin = bin
					}
				}
				for _, h := range p.mrc.h {
					h.start(b)
				}
				if round == 0 && p.name == "veth" && cfg.idle > 0 && bin == "" {
					progress("idle mrc-nicd CPU over %v", cfg.idle)
					res.idle = idleCPU(b, p.mrc.h[:], cfg.idle)
				}
				for _, c := range cfg.bw {
					var bw bwJSON
					cpu0 := daemonTicks(b, p.mrc.h[:])
					// -m: the tool refuses to run if the daemon's MTU is not the one asked for.
					runJSON(b, p.mrc, "mrc-write-bw", &bw, "-s", strconv.Itoa(c.size), "-q", strconv.Itoa(c.qps), "-D", strconv.Itoa(cfg.secs), "-m", strconv.Itoa(cfg.roceMTU))
					cpu1 := daemonTicks(b, p.mrc.h[:])
					if len(bw.Results) != 1 {
						b.Fatalf("%s: mrc-write-bw results: %+v", tag, bw)
					}
					r0 := bw.Results[0]
					v := c.value(r0)
					res.add(p.name, prefix+bwName(c), round, v)
					// CPU per byte moves less with the machine's load than
					// the rate does: a daemon that waits for the CPU does
					// not burn it.
					if gb := r0.Average * (1 << 20) * r0.Seconds / 1e9; gb > 0 && c.size >= 4096 {
						for i, side := range []string{"sender", "receiver"} {
							res.add(p.name, fmt.Sprintf("%s%s mrc-nicd CPU in %s, ms per GB", prefix, side, strings.TrimPrefix(c.String(), "mrc-write-bw ")), round, 1e3*(cpu1[i]-cpu0[i])/clockTicks/gb)
						}
					}
					progress("%s: %s%s: %s (mrc-nicd CPU %.2f s sender, %.2f s receiver)", tag, prefix, c, num(v),
						(cpu1[0]-cpu0[0])/clockTicks, (cpu1[1]-cpu0[1])/clockTicks)
					if os.Getenv("MRC_BENCH_COUNTERS") != "" {
						for _, h := range p.mrc.h {
							out, _ := exec.Command(filepath.Join(h.bin, "mrcctl"), "-d", h.cfg.DeviceSocket, "counters").CombinedOutput()
							fmt.Fprintf(os.Stderr, "%s mrcctl counters (cumulative since the daemon started):\n%s", h.cfg.Host, out)
						}
					}
				}
				lat := func(name func(int) string) {
					for _, s := range cfg.lat {
						var out latJSON
						runJSON(b, p.mrc, "mrc-write-lat", &out, "-s", strconv.Itoa(s), "-n", strconv.Itoa(cfg.latIter), "-m", strconv.Itoa(cfg.roceMTU))
						if len(out.Results) != 1 {
							b.Fatalf("%s: mrc-write-lat results: %+v", tag, out)
						}
						res.add(p.name, prefix+name(s), round, out.Results[0].Typical)
						progress("%s: %s%s: %.1f µs", tag, prefix, strings.TrimSuffix(name(s), " t_typical (half RTT), µs"), out.Results[0].Typical)
					}
				}
				lat(latName)
				if cfg.busyPoll >= 0 && bin == "" {
					// The same latency with both daemons' -busy-poll set
					// (by default to 0): the issue's "with it off, say what
					// it costs" against the default's polling. The daemons
					// restart with the option.
					arg := "-busy-poll=" + cfg.busyPoll.String()
					for _, h := range p.mrc.h {
						h.stop()
						h.extra = append(h.extra, arg)
						h.start(b)
					}
					lat(func(s int) string { return latBusyName(s, cfg.busyPoll) })
					for _, h := range p.mrc.h {
						h.extra = slices.DeleteFunc(h.extra, func(a string) bool { return a == arg })
					}
				}
				for _, h := range p.mrc.h {
					h.stop()
					h.bin = own
				}
				if bin == "" && cfg.inProcess {
					inProcessRuns(b, res, cfg, p.name, p.mrc, round, tag)
				}
			}
		}
	}
	res.end, res.loadAfter = time.Now(), loadavg()
	return res
}

// inProcessRuns measures mrc-write-bw and mrc-write-lat with the NIC
// inside each tool (--in-process: the engine on the tool's own thread, no
// hand-off to a daemon), the hosts' mrc-nicd stopped.
func inProcessRuns(b *testing.B, res *benchNICResult, cfg benchNICConfig, path string, tp *topo, round int, tag string) {
	for _, c := range cfg.bw {
		var bw bwJSON
		runJSONInProcess(b, tp, "mrc-write-bw", &bw, "-s", strconv.Itoa(c.size), "-q", strconv.Itoa(c.qps), "-D", strconv.Itoa(cfg.secs), "-m", strconv.Itoa(cfg.roceMTU))
		if len(bw.Results) != 1 {
			b.Fatalf("%s: mrc-write-bw --in-process results: %+v", tag, bw)
		}
		r0 := bw.Results[0]
		v := c.value(r0)
		res.add(path, inProcessName(bwName(c)), round, v)
		progress("%s: %s --in-process: %s", tag, c, num(v))
	}
	for _, s := range cfg.lat {
		var out latJSON
		runJSONInProcess(b, tp, "mrc-write-lat", &out, "-s", strconv.Itoa(s), "-n", strconv.Itoa(cfg.latIter), "-m", strconv.Itoa(cfg.roceMTU))
		if len(out.Results) != 1 {
			b.Fatalf("%s: mrc-write-lat --in-process results: %+v", tag, out)
		}
		res.add(path, inProcessName(latName(s)), round, out.Results[0].Typical)
		progress("%s: mrc-write-lat %s --in-process: %.1f µs", tag, sizeName(s), out.Results[0].Typical)
	}
}

// inProcessName names a measurement of the in-process NIC: the tool's own
// name with ", in-process NIC" after its size and QPs, so that the ratio
// table pairs it with the same baselines.
func inProcessName(m string) string {
	for _, unit := range []string{" t_typical (half RTT), µs", ", Gb/s", ", Mmsg/s"} {
		if head, ok := strings.CutSuffix(m, unit); ok {
			return head + ", in-process NIC" + unit
		}
	}
	return m + ", in-process NIC"
}

// setupMPTCP lets h0 open one extra subflow to the address h3 announces on
// each further plane (the in-kernel path manager; the first subflow is the
// plane-0 connection itself), so the connection uses every plane. The
// namespaces are the run's own and go away with it.
func setupMPTCP(tb testing.TB, tp *topo) {
	tb.Helper()
	planes := len(tp.h[1].addrs)
	for _, h := range tp.h {
		out, err := exec.Command("ip", "netns", "exec", h.ns, "sysctl", "-n", "net.mptcp.enabled").CombinedOutput()
		if err != nil {
			tb.Skipf("skipping: the kernel lacks MPTCP (sysctl net.mptcp.enabled: %v: %s)", err, out)
		}
		if strings.TrimSpace(string(out)) != "1" {
			ip(tb, "netns", "exec", h.ns, "sysctl", "-q", "-w", "net.mptcp.enabled=1")
		}
		n := strconv.Itoa(planes - 1)
		ip(tb, "-n", h.ns, "mptcp", "limits", "set", "subflows", n, "add_addr_accepted", n)
	}
	srv := tp.h[1]
	for p := 1; p < planes; p++ {
		ip(tb, "-n", srv.ns, "mptcp", "endpoint", "add", srv.addrs[p].String(), "dev", srv.cfg.Ports[p].Interface, "signal")
	}
}

// mptcpStream is tcpStream over MPTCP from h[0] to h[1]'s plane-0 address.
// It returns the goodput and the share of the bytes h0's ports sent that
// left by plane 1 (0 would mean the second subflow never carried data: the
// run then fails, as the measurement would not be what it is called).
func mptcpStream(tb testing.TB, tp *topo, d time.Duration) (bps, plane1Share float64) {
	tb.Helper()
	addr := net.JoinHostPort(tp.h[1].addrs[0].String(), "18602")
	var ln net.Listener
	inNS(tb, tp.h[1].ns, func() {
		var lc net.ListenConfig
		lc.SetMultipathTCP(true)
		var err error
		// On every address: the joins of the other planes' subflows
		// arrive at the addresses h3 announces (a listener on the
		// plane-0 address alone refuses them).
		if ln, err = lc.Listen(context.Background(), "tcp", "[::]:18602"); err != nil {
			tb.Fatal(err)
		}
	})
	defer ln.Close()
	var mp atomic.Bool
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		if tc, ok := c.(*net.TCPConn); ok {
			m, _ := tc.MultipathTCP()
			mp.Store(m)
		}
		io.Copy(io.Discard, c)
	}()
	ports := tp.h[0].cfg.Ports
	before := make([]uint64, len(ports))
	for i, p := range ports {
		before[i] = linkBytes(tb, tp.h[0].ns, p.Interface, "tx")
	}
	var dl net.Dialer
	dl.SetMultipathTCP(true)
	bps = sendFor(tb, tp.h[0].ns, dl.Dial, addr, d)
	var total, p1 uint64
	for i, p := range ports {
		n := linkBytes(tb, tp.h[0].ns, p.Interface, "tx") - before[i]
		total += n
		if i == 1 {
			p1 = n
		}
	}
	if !mp.Load() {
		tb.Fatalf("MPTCP: the server's connection is plain TCP (the kernel fell back): the MPTCP baseline would be a TCP one")
	}
	if total == 0 || p1 < total/100 {
		tb.Fatalf("MPTCP: h0 sent %d B, %d B of them on plane 1: the second subflow carried nothing (ip -n %s mptcp endpoint show)", total, p1, tp.h[1].ns)
	}
	return bps, float64(p1) / float64(total)
}

// idleCPU reads each daemon's utime+stime from /proc/PID/stat over window
// and returns the share of one core it used.
func idleCPU(tb testing.TB, hosts []*host, window time.Duration) []idleSample {
	tb.Helper()
	ticks := func(h *host) float64 {
		pid := h.daemon.Process.Pid
		// ip netns exec execs the daemon: the pid is mrc-nicd's own.
		if comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid)); strings.TrimSpace(string(comm)) != "mrc-nicd" {
			tb.Fatalf("pid %d is %q, not mrc-nicd", pid, bytes.TrimSpace(comm))
		}
		v, err := procCPUTicks(pid)
		if err != nil {
			tb.Fatal(err)
		}
		return v
	}
	before := make([]float64, len(hosts))
	for i, h := range hosts {
		before[i] = ticks(h)
	}
	t0 := time.Now()
	time.Sleep(window) // the measurement window itself: nothing to wait on
	el := time.Since(t0)
	var out []idleSample
	for i, h := range hosts {
		used := (ticks(h) - before[i]) / clockTicks
		out = append(out, idleSample{host: h.cfg.Host, percent: 100 * used / el.Seconds(), window: el})
	}
	return out
}

// daemonTicks returns each host's mrc-nicd utime+stime in clock ticks.
func daemonTicks(tb testing.TB, hosts []*host) []float64 {
	tb.Helper()
	out := make([]float64, len(hosts))
	for i, h := range hosts {
		v, err := procCPUTicks(h.daemon.Process.Pid)
		if err != nil {
			tb.Fatal(err)
		}
		out[i] = v
	}
	return out
}

// clockTicks is USER_HZ, the unit of /proc/PID/stat's times (100 on every
// Linux architecture Go supports).
const clockTicks = 100

// procCPUTicks returns utime+stime of pid in clock ticks.
func procCPUTicks(pid int) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name (field 2) may hold spaces: fields count from the
	// closing parenthesis.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: no ')' in %q", pid, b)
	}
	f := strings.Fields(string(b[i+1:]))
	// f[0] is field 3 (state); utime and stime are fields 14 and 15.
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields after the name, want ≥ 13", pid, len(f))
	}
	u, err1 := strconv.ParseFloat(f[11], 64)
	s, err2 := strconv.ParseFloat(f[12], 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("/proc/%d/stat: utime %q stime %q", pid, f[11], f[12])
	}
	return u + s, nil
}

// stats returns the median, min and max of the values that are numbers.
func stats(v []float64) (med, lo, hi float64, ok bool) {
	var s []float64
	for _, x := range v {
		if x == x {
			s = append(s, x)
		}
	}
	if len(s) == 0 {
		return 0, 0, 0, false
	}
	slices.Sort(s)
	med = s[len(s)/2]
	if len(s)%2 == 0 {
		med = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return med, s[0], s[len(s)-1], true
}

type ratio struct {
	path, name string
	vals       []float64 // per round
	better     string    // "higher" or "lower"
}

// ratios divides, round by round, each MRC measurement by its baseline.
func (r *benchNICResult) ratios() []ratio {
	var out []ratio
	per := func(path, num, den, name, better string) {
		n, d := r.vals[path][num], r.vals[path][den]
		if len(n) == 0 || len(d) == 0 {
			return
		}
		var v []float64
		for i := range min(len(n), len(d)) {
			if d[i] > 0 {
				v = append(v, n[i]/d[i])
			}
		}
		out = append(out, ratio{path, name, v, better})
	}
	for _, path := range []string{"veth", "clos"} {
		for _, m := range r.order {
			// Tiny writes are a message rate, which no baseline here has.
			if !strings.HasPrefix(m, "mrc-write-bw") || !strings.HasSuffix(m, ", Gb/s") {
				continue
			}
			short := strings.TrimSuffix(strings.TrimPrefix(m, "mrc-write-bw "), ", Gb/s")
			per(path, m, mRaw, "bw "+short+" / raw AF_XDP", "higher")
			per(path, m, mTCP, "bw "+short+" / TCP", "higher")
			per(path, m, mMPTCP, "bw "+short+" / MPTCP", "higher")
		}
		// CPU per GB against the raw path's threads: how much more work a
		// byte costs mrc-nicd than the floor, whatever the scheduler gave.
		for _, m := range r.order {
			for side, raw := range map[string]string{"sender": mRawTxCPU, "receiver": mRawRxCPU} {
				if c, ok := strings.CutPrefix(m, side+" mrc-nicd CPU in "); ok {
					per(path, m, raw, side+" CPU per GB "+strings.TrimSuffix(c, ", ms per GB")+" / raw "+side, "lower")
				}
			}
		}
		for _, m := range r.order {
			if !strings.HasPrefix(m, "mrc-write-lat") {
				continue
			}
			short := strings.TrimSuffix(strings.TrimPrefix(m, "mrc-write-lat "), " t_typical (half RTT), µs")
			per(path, m, mUDP, "lat "+short+" / UDP ping-pong", "lower")
			if strings.Contains(m, ", in-process NIC") {
				// One thread a side polling its socket: the spinning floor's shape.
				per(path, m, mRawPingSpin, "lat "+short+" / raw AF_XDP ping-pong, spinning", "lower")
				continue
			}
			per(path, m, mRawPingHandoff, "lat "+short+" / raw AF_XDP ping-pong with hand-offs", "lower")
		}
		// The floors against the kernel: what AF_XDP itself, and a daemon's
		// hand-offs, cost on this path before any transport work.
		per(path, mRawPing, mUDP, "raw AF_XDP ping-pong / UDP ping-pong", "lower")
		per(path, mRawPingSpin, mUDP, "raw AF_XDP ping-pong, spinning / UDP ping-pong", "lower")
		per(path, mRawPingHandoff, mUDP, "raw AF_XDP ping-pong with hand-offs / UDP ping-pong", "lower")
		per(path, mRawPingHOSpin, mUDP, "raw AF_XDP ping-pong with hand-offs, socket threads spinning / UDP ping-pong", "lower")
		for _, m := range r.order {
			if strings.HasPrefix(m, basePrefix) {
				better := "higher"
				if strings.HasSuffix(m, "µs") || strings.Contains(m, "CPU") {
					better = "lower"
				}
				per(path, strings.TrimPrefix(m, basePrefix), m, "after / before: "+strings.TrimPrefix(m, basePrefix), better)
			}
		}
	}
	return out
}

func (r *benchNICResult) markdown(cfg benchNICConfig) string {
	var w strings.Builder
	fmt.Fprintf(&w, "Command: `%s`, %s UTC, %s, kernel %s, %d CPUs. %d alternating rounds of %d s per bandwidth measurement and %d iterations per latency one; load average %s before, %s after. RoCE MTU %d (data frames of up to %d bytes on the wire); interface MTU %d on the veth pair and %d on clos-2p, for the kernel's packets too.\n\n",
		cfg.cmdline, r.start.UTC().Format("2006-01-02 15:04"), r.end.Sub(r.start).Round(time.Second), r.kernel, runtime.NumCPU(), cfg.rounds, cfg.secs, cfg.latIter, r.loadBefore, r.loadAfter,
		cfg.roceMTU, pathmtu.FrameLen(cfg.roceMTU, false), benchLinkMTU(cfg.roceMTU), closLinkMTU(cfg.roceMTU))
	fmt.Fprintf(&w, "**Ratios** (each within one round; median, range over the rounds):\n\n")
	fmt.Fprintf(&w, "| path | ratio | median | range | better |\n|---|---|---|---|---|\n")
	for _, x := range r.ratios() {
		m, lo, hi, ok := stats(x.vals)
		if !ok {
			continue
		}
		fmt.Fprintf(&w, "| %s | %s | **%.2f** | %.2f – %.2f | %s |\n", x.path, x.name, m, lo, hi, x.better)
	}
	fmt.Fprintf(&w, "\n**Measurements** (median, range):\n\n| measurement | veth | clos-2p h0 → h3 |\n|---|---|---|\n")
	for _, name := range r.order {
		fmt.Fprintf(&w, "| %s |", name)
		for _, path := range []string{"veth", "clos"} {
			if m, lo, hi, ok := stats(r.vals[path][name]); ok {
				fmt.Fprintf(&w, " %s (%s – %s) |", num(m), num(lo), num(hi))
			} else {
				fmt.Fprintf(&w, " – |")
			}
		}
		fmt.Fprintln(&w)
	}
	if len(r.mptcpPlaneShares) > 0 {
		m, lo, hi, _ := stats(r.mptcpPlaneShares)
		fmt.Fprintf(&w, "\nMPTCP: share of h0's bytes sent on plane 1: %.2f (%.2f – %.2f).\n", m, lo, hi)
	}
	if len(r.idle) > 0 {
		fmt.Fprintf(&w, "\n**Idle mrc-nicd** (fresh, no QP; utime+stime from /proc/PID/stat over %v):", r.idle[0].window.Round(time.Millisecond))
		for _, s := range r.idle {
			fmt.Fprintf(&w, " %s %.2f %% of a core;", s.host, s.percent)
		}
		fmt.Fprintln(&w)
	}
	return w.String()
}

func num(v float64) string {
	if v < 0.1 {
		return strconv.FormatFloat(v, 'g', 3, 64)
	}
	if v >= 100 {
		return strconv.FormatFloat(v, 'f', 0, 64)
	}
	if v >= 10 {
		return strconv.FormatFloat(v, 'f', 1, 64)
	}
	return strconv.FormatFloat(v, 'f', 2, 64)
}

// genMarkers are the lines around a generated section. The default RoCE
// MTU's run owns "bench-nic"; a run at another MTU writes its own section
// ("bench-nic-mtu4096"), so that the file can hold both side by side.
func genMarkers(section string) (begin, end string) {
	return "<!-- " + section + ":begin (generated by make bench-nic; edits here are overwritten) -->", "<!-- " + section + ":end -->"
}

// genSection names the generated section of a run at RoCE MTU m.
func genSection(m int) string {
	if m == config.DefaultMTU {
		return "bench-nic"
	}
	return fmt.Sprintf("bench-nic-mtu%d", m)
}

// writeGenerated replaces the text between section's markers in file (made
// with the markers at the end if missing), leaving the rest of the file as
// it was.
func writeGenerated(file, section, body string) error {
	genBegin, genEnd := genMarkers(section)
	old, err := os.ReadFile(file)
	if err != nil && !os.IsNotExist(err) {
		return err
	}
	s := string(old)
	i, j := strings.Index(s, genBegin), strings.Index(s, genEnd)
	block := genBegin + "\n" + body + genEnd
	switch {
	case i >= 0 && j > i:
		s = s[:i] + block + s[j+len(genEnd):]
	case len(s) == 0:
		s = "# Performance\n\n" + block + "\n"
	default:
		s = strings.TrimRight(s, "\n") + "\n\n" + block + "\n"
	}
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		return err
	}
	return os.WriteFile(file, []byte(s), 0o644)
}
