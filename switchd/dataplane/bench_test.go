package dataplane

import (
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"
)

// bpfFTestXDPLiveFrames is BPF_F_TEST_XDP_LIVE_FRAMES: BPF_PROG_RUN executes
// the verdicts, so XDP_REDIRECT really transmits (kernel >= 5.18).
const bpfFTestXDPLiveFrames = 1 << 1

// BenchmarkProgRun is the cost of one BPF_PROG_RUN of a uN shift + FIB +
// redirect (dominated by the syscall and the frame copy).
func BenchmarkProgRun(b *testing.B) {
	h := newHarness(b)
	frame := usidFrame("5f00:1:100:200::", 64).bytes()
	out := make([]byte, len(frame)+256)
	in := make([]byte, len(frame))
	prog := h.d.SwitchProgram()
	b.SetBytes(int64(len(frame)))
	for b.Loop() {
		copy(in, frame)
		if ret, err := prog.Run(&ebpf.RunOptions{Data: in, DataOut: out}); err != nil || ret != xdpRedirect {
			b.Fatalf("run: %d %v", ret, err)
		}
	}
}

// BenchmarkProgramVsBaseline is the switch program's own cost per frame
// (BPF run-time statistics: run_time_ns / run_cnt, no syscall or copy) for
// three paths, for the embedded object and, alternately in the same run, a
// baseline object given by MRC_SWITCH_BASELINE (a switch_bpfel.o of another
// build, e.g. from git show OLD:switchd/dataplane/switch_bpfel.o; the maps
// must have the same layout). Without the variable only the embedded object
// is measured. Each benchmark iteration is one round of every path on both
// objects; reported values are medians over the rounds:
//
//	go test -run '^$' -bench ProgramVsBaseline -benchtime=9x ./switchd/dataplane
//
// Frames are fresh copies per run (BPF_PROG_RUN with Repeat would run the
// program again on its own output: shifted, decremented, trimmed).
func BenchmarkProgramVsBaseline(b *testing.B) {
	type object struct {
		name string
		h    *harness
	}
	objs := []object{{name: "new", h: newHarness(b)}}
	if p := os.Getenv("MRC_SWITCH_BASELINE"); p != "" {
		spec, err := ebpf.LoadCollectionSpec(p)
		if err != nil {
			b.Fatalf("MRC_SWITCH_BASELINE=%s: %v", p, err)
		}
		objs = append(objs, object{name: "base", h: newHarnessOf(b, spec)})
	}
	type path struct {
		name  string
		frame []byte
		setup func(*harness)
		cnt   counter // must move by one per run on port
		port  PortID
	}
	trimFrame := dataFrame(10, ecnECT0, mrcHdr{opcode: 0xCA, payload: 1000})
	trimFrame.dst = netip.MustParseAddr("5f00:1:100:300::") // via port 2
	paths := []path{
		{name: "uN+FIB", frame: usidFrame("5f00:1:100:200::", 64).bytes(), cnt: cForwarded, port: 1},
		{name: "ECMP", frame: usidFrame("fd00:9::1", 64).bytes(), cnt: cForwarded, port: PortID(FlowHash(netip.MustParseAddr("fd00:1::1"), netip.MustParseAddr("fd00:9::1"), 0x12345, 0xbeef) % 4)},
		{name: "trim", frame: trimFrame.bytes(), cnt: cTrimmed, port: 2,
			// Trim everything; the 1 B/s queue takes 4e9 trimmed bytes before it drops.
			setup: func(h *harness) { h.setModel(2, RoleFabric, slowModel(0, 1, 4_000_000_000)) }},
	}
	for _, o := range objs {
		for _, p := range paths {
			if p.setup != nil {
				p.setup(o.h)
			}
		}
	}
	st, err := ebpf.EnableStats(uint32(unix.BPF_STATS_RUN_TIME))
	if err != nil {
		b.Skipf("skipping: kernel without BPF run-time statistics (BPF_ENABLE_STATS, 5.8): %v", err)
	}
	defer st.Close()
	const runs = 20_000
	in := make([]byte, 2048)
	out := make([]byte, 2048+256)
	// measure returns the program's mean ns per run of frame over runs runs.
	measure := func(o object, p path) float64 {
		prog := o.h.d.SwitchProgram()
		before := p.cnt.get(o.h.counters(p.port))
		s0, err := prog.Stats()
		must(b, err)
		for range runs {
			n := copy(in, p.frame)
			if ret, err := prog.Run(&ebpf.RunOptions{Data: in[:n], DataOut: out}); err != nil || ret != xdpRedirect {
				b.Fatalf("%s %s: verdict %d, %v", o.name, p.name, ret, err)
			}
		}
		s1, err := prog.Stats()
		must(b, err)
		if got := p.cnt.get(o.h.counters(p.port)) - before; got != runs {
			b.Fatalf("%s %s: port %d %s moved by %d in %d runs", o.name, p.name, p.port, p.cnt.name, got, runs)
		}
		return float64(s1.Runtime-s0.Runtime) / float64(s1.RunCount-s0.RunCount)
	}
	ns := map[string][]float64{}
	for b.Loop() {
		for _, p := range paths {
			for _, o := range objs {
				v := measure(o, p)
				ns[o.name+" "+p.name] = append(ns[o.name+" "+p.name], v)
			}
		}
	}
	for _, p := range paths {
		for _, o := range objs {
			b.ReportMetric(median(ns[o.name+" "+p.name]), o.name+"-"+p.name+"-ns/pkt")
		}
		if len(objs) == 2 {
			var r []float64
			for i, v := range ns["new "+p.name] {
				r = append(r, v/ns["base "+p.name][i])
			}
			b.ReportMetric(median(r), "new/base-"+p.name)
		}
	}
}

// Benchmark CPUs: the generator runs alone on genCPU; the router (r0's NAPI
// thread) and, in softirq raised by it, the receiver (d0's NAPI) share
// routerCPU.
const (
	genCPU    = 0
	routerCPU = 1
)

// BenchmarkForwardVsKernel compares the uN router of the same veth chain
//
//	generator -> s0 = r0 [router] r1 = d0 -> receiver
//
// done by the kernel (seg6local End flavors next-csid, with XDP_PASS on r0 so
// that the generator's redirected frames reach the stack) and by the XDP
// switch, with the same generator, receiver and frames, alternately in the
// same run.
//
// Method (docs/switch.md, "Benchmark"):
//   - the generator is bpf/testgen.bpf.c in BPF_PROG_RUN live-frames mode on
//     a SCHED_FIFO thread pinned to genCPU, so it offers more than either
//     router can take (frames r0's ring cannot hold are dropped there);
//   - r0's NAPI runs threaded (/sys/class/net/r0/threaded), pinned to
//     routerCPU and SCHED_FIFO, so other processes on this shared machine do
//     not take that CPU mid-measurement. Everything the router does per
//     frame (veth receive, the program or the kernel stack, the transmit into
//     d0) runs in that thread, and so does the receiver: d0's NAPI is raised
//     from it as a softirq on the same CPU and runs testgen's xdp_sink
//     (count, drop) for both routers. Keeping the receiver off another CPU
//     avoids a cross-CPU wake-up per frame sent by the kernel (veth_xmit
//     schedules the peer's NAPI for each skb; XDP redirects do it per bulk
//     of up to 16), which would penalise the kernel for an artefact;
//   - rate = frames counted by the receiver per second of the generator's
//     run; router-ns/pkt = CPU time of r0's NAPI thread (/proc/PID/schedstat)
//     per received frame, i.e. the cost of forwarding plus receiving one;
//   - one benchmark iteration is one round: the kernel, then the XDP switch
//     (the program on r0 is swapped in place on one bpf_link, so nothing else
//     changes), then the XDP switch again with BPF run-time statistics on,
//     for the program's own ns/run (the statistics read the clock twice per
//     run, so they stay off while rates are measured);
//   - reported values are medians over the rounds, the ratio being the
//     median of the per-round ratios.
//
// Run with several rounds: go test -run '^$' -bench ForwardVsKernel
// -benchtime=9x ./switchd/dataplane
func BenchmarkForwardVsKernel(b *testing.B) {
	if runtime.NumCPU() < 2 {
		b.Skip("skipping: needs 2 CPUs to separate generator and router")
	}
	c := newChain(b)
	s0, r0, r1, d0 := c.ifindex(c.S, c.p+"s0"), c.ifindex(c.R, c.p+"r0"), c.ifindex(c.R, c.p+"r1"), c.ifindex(c.D, c.p+"d0")
	kernelUN(b, c.R, "5f00:1:100::/48", c.p+"r0")
	sh(b, "ip", "-n", c.R, "-6", "route", "add", "5f00:1:200::/48", "via", "fd00:2::2", "dev", c.p+"r1")

	load := func() *Dataplane {
		d, err := Load(LoadOptions{})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { d.Destroy() })
		return d
	}
	router := load()
	var gen TestgenObjects
	if err := LoadTestgenObjects(&gen, nil); err != nil {
		b.Fatalf("load traffic generator: %v", err)
	}
	b.Cleanup(func() { gen.Close() })
	c.in(c.S, func() error { return gen.GenTx.Put(uint32(0), uint32(s0)) })
	var rl link.Link
	c.in(c.R, func() error {
		if err := router.SetSwitchConfig(SwitchConfig{Block: testBlock, OwnUSIDs: []uint16{ownUSID}}); err != nil {
			return err
		}
		if err := router.SetPort(0, Port{Ifindex: r1, NeighMAC: c.macD0, OwnMAC: c.macR1}); err != nil {
			return err
		}
		if err := router.AddRoute(netip.MustParsePrefix("5f00:1:200::/48"), NextHop{Port: 0}); err != nil {
			return err
		}
		// One link whose program is swapped between rounds: r0's NAPI
		// (and its pinned thread) stays the same for both routers.
		var err error
		rl, err = link.AttachXDP(link.XDPOptions{Program: router.PassProgram(), Interface: r0, Flags: link.XDPDriverMode})
		return err
	})
	b.Cleanup(func() { rl.Close() })
	var sl link.Link
	c.in(c.D, func() error {
		var err error
		sl, err = link.AttachXDP(link.XDPOptions{Program: gen.XdpSink, Interface: d0, Flags: link.XDPDriverMode})
		return err
	})
	b.Cleanup(func() { sl.Close() })
	// SCHED_FIFO (lowest RT priority) for the router thread and the
	// generator: other processes on this shared machine cannot take their
	// CPUs mid-measurement. The thread sleeps whenever r0's ring is empty,
	// the generator stops after its frames, and the kernel's RT throttling
	// leaves 5% of each CPU to everyone else in any case.
	rThread := napiThread(b, c.R, c.p+"r0", routerCPU)
	if err := setFIFO(rThread, 1); err != nil {
		b.Fatalf("make r0's NAPI thread SCHED_FIFO: %v", err)
	}
	received := func() uint64 {
		var per []uint64
		if err := gen.SinkCount.Lookup(uint32(0), &per); err != nil {
			b.Fatalf("read receiver count: %v", err)
		}
		var n uint64
		for _, v := range per {
			n += v
		}
		return n
	}

	f := usidFrame("5f00:1:100:200::", 64)
	f.dstMAC, f.srcMAC = [6]byte(c.macR0), [6]byte(c.macS0)
	frame := f.bytes()
	if err := gen.GenHdr.Put(uint32(0), frame[:64]); err != nil {
		b.Fatal(err)
	}
	const offered = 300_000
	type result struct{ mpps, offMpps, routerNs float64 }
	// measure offers frames as fast as the generator can redirect them into
	// s0; frames r0's ring cannot take are dropped there, so the delivered
	// rate is what the router sustains (or what the generator offers, if
	// that is less: then offered ≈ delivered).
	measure := func() result {
		before := received()
		cpu0 := threadRuntime(b, rThread)
		start := time.Now()
		if err := onCPU(genCPU, func() error {
			_, err := gen.XdpGen.Run(&ebpf.RunOptions{Data: frame, Repeat: offered, Flags: bpfFTestXDPLiveFrames})
			return err
		}); err != nil {
			b.Fatalf("live-frames generator: %v", err)
		}
		el := time.Since(start).Seconds()
		// The rings may still be draining: poll until the count is stable.
		var after uint64
		for last := uint64(0); ; {
			time.Sleep(5 * time.Millisecond)
			after = received()
			if after == last {
				break
			}
			last = after
		}
		got := after - before
		if got == 0 {
			b.Fatal("nothing arrived at the receiver")
		}
		return result{mpps: float64(got) / el / 1e6, offMpps: offered / el / 1e6, routerNs: float64(threadRuntime(b, rThread)-cpu0) / float64(got)}
	}
	progStats := func() (time.Duration, uint64) {
		ps, err := router.SwitchProgram().Stats()
		if err != nil {
			b.Fatalf("program stats: %v", err)
		}
		return ps.Runtime, ps.RunCount
	}
	var kMpps, xMpps, xOff, ratio, kNs, xNs, costRatio, progNs []float64
	for b.Loop() {
		must(b, rl.Update(router.PassProgram()))
		k := measure()
		must(b, rl.Update(router.SwitchProgram()))
		x := measure()
		// The program's own run time, from BPF run-time statistics
		// (kernel >= 5.8), in a separate pass: the statistics read the
		// clock twice per run, which is not free in a VM.
		st, err := ebpf.EnableStats(uint32(unix.BPF_STATS_RUN_TIME))
		if err != nil {
			b.Fatalf("enable BPF run-time statistics: %v", err)
		}
		rt0, rc0 := progStats()
		measure()
		rt1, rc1 := progStats()
		st.Close()
		kMpps, xMpps, xOff = append(kMpps, k.mpps), append(xMpps, x.mpps), append(xOff, x.offMpps)
		ratio = append(ratio, x.mpps/k.mpps)
		kNs, xNs = append(kNs, k.routerNs), append(xNs, x.routerNs)
		costRatio = append(costRatio, k.routerNs/x.routerNs)
		if rc1 > rc0 {
			progNs = append(progNs, float64(rt1-rt0)/float64(rc1-rc0))
		}
		b.Logf("round %d: kernel %.3f of %.3f Mpps offered, %.0f ns/pkt; xdp %.3f of %.3f Mpps, %.0f ns/pkt (program %.0f ns); rate ratio %.2f, cost ratio %.2f",
			len(ratio), k.mpps, k.offMpps, k.routerNs, x.mpps, x.offMpps, x.routerNs, float64(rt1-rt0)/float64(max(rc1-rc0, 1)), x.mpps/k.mpps, k.routerNs/x.routerNs)
	}
	b.ReportMetric(median(kMpps), "kernel-Mpps")
	b.ReportMetric(median(xMpps), "xdp-Mpps")
	b.ReportMetric(median(xOff), "xdp-offered-Mpps")
	b.ReportMetric(median(ratio), "xdp/kernel")
	b.ReportMetric(median(kNs), "kernel-router-ns/pkt")
	b.ReportMetric(median(xNs), "xdp-router-ns/pkt")
	b.ReportMetric(median(costRatio), "kernel/xdp-cost")
	if len(progNs) > 0 {
		b.ReportMetric(median(progNs), "xdp-prog-ns/pkt")
	}
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// napiThread switches dev (in namespace ns, which must have an XDP program
// attached so that veth has a NAPI instance) to threaded NAPI, pins the
// thread to cpu and returns its thread id.
func napiThread(b *testing.B, ns, dev string, cpu int) int {
	b.Helper()
	if out, err := exec.Command("ip", "netns", "exec", ns, "sh", "-c", "echo 1 > /sys/class/net/"+dev+"/threaded").CombinedOutput(); err != nil {
		b.Skipf("skipping: cannot switch %s to threaded NAPI (kernel without it for veth?): %v: %s", dev, err, out)
	}
	// The kthread is named napi/<dev>-<napi id> (truncated to 15 bytes).
	want := ("napi/" + dev + "-")
	if len(want) > 15 {
		want = want[:15]
	}
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		ents, _ := os.ReadDir("/proc")
		for _, e := range ents {
			pid, err := strconv.Atoi(e.Name())
			if err != nil {
				continue
			}
			comm, err := os.ReadFile(filepath.Join("/proc", e.Name(), "comm"))
			if err != nil || !strings.HasPrefix(string(comm), want) {
				continue
			}
			var set unix.CPUSet
			set.Set(cpu)
			if err := unix.SchedSetaffinity(pid, &set); err != nil {
				b.Fatalf("pin %s to CPU %d: %v", strings.TrimSpace(string(comm)), cpu, err)
			}
			return pid
		}
		time.Sleep(10 * time.Millisecond)
	}
	b.Skipf("skipping: no threaded NAPI kthread %s* for %s (kernel without threaded NAPI on veth?)", want, dev)
	return 0
}

// threadRuntime is the CPU time of thread pid in ns (/proc/PID/schedstat).
func threadRuntime(b *testing.B, pid int) uint64 {
	b.Helper()
	s, err := os.ReadFile(fmt.Sprintf("/proc/%d/schedstat", pid))
	if err != nil {
		b.Fatalf("read schedstat of NAPI thread: %v", err)
	}
	f := strings.Fields(string(s))
	if len(f) == 0 {
		b.Fatalf("schedstat of NAPI thread: %q", s)
	}
	ns, err := strconv.ParseUint(f[0], 10, 64)
	if err != nil {
		b.Fatalf("schedstat of NAPI thread: %v", err)
	}
	return ns
}

// onCPU runs f on a SCHED_FIFO thread pinned to cpu.
func onCPU(cpu int, f func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		// The thread is not unlocked: it dies with the goroutine rather
		// than carrying the pinning back into the Go scheduler.
		var set unix.CPUSet
		set.Set(cpu)
		if err := unix.SchedSetaffinity(0, &set); err != nil {
			errc <- fmt.Errorf("pin generator to CPU %d: %w", cpu, err)
			return
		}
		if err := setFIFO(0, 1); err != nil {
			errc <- fmt.Errorf("make the generator SCHED_FIFO: %w", err)
			return
		}
		errc <- f()
	}()
	return <-errc
}

// setFIFO makes thread tid (0: the calling thread) SCHED_FIFO at prio.
func setFIFO(tid int, prio uint32) error {
	return unix.SchedSetAttr(tid, &unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: unix.SCHED_FIFO, Priority: prio}, 0)
}
