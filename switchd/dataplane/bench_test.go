package dataplane

import (
	"net/netip"
	"testing"
	"time"

	"github.com/cilium/ebpf"
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

// BenchmarkForwardVsKernel measures the forwarding rate of the same veth
// chain (sender -> router -> receiver) with the router's uN done by the
// kernel's seg6local End flavors next-csid and by the XDP switch, with the
// same offered traffic in the same run. The traffic generator runs in
// BPF_PROG_RUN live-frames mode (bpf/testgen.bpf.c: restore the headers, then
// redirect out of s0); the receiver counts
// with the switch program (no routes: every frame is counted and dropped).
// Reported: delivered Mpps for each, and xdp/kernel.
func BenchmarkForwardVsKernel(b *testing.B) {
	c := newChain(b)
	s0, r0, r1, d0 := c.ifindex(c.S, c.p+"s0"), c.ifindex(c.R, c.p+"r0"), c.ifindex(c.R, c.p+"r1"), c.ifindex(c.D, c.p+"d0")
	sh(b, "ip", "-n", c.R, "-6", "route", "add", "5f00:1:100::/48", "encap", "seg6local", "action", "End",
		"flavors", "next-csid", "lblen", "32", "nflen", "16", "dev", c.p+"r0")
	sh(b, "ip", "-n", c.R, "-6", "route", "add", "5f00:1:200::/48", "via", "fd00:2::2", "dev", c.p+"r1")

	load := func() *Dataplane {
		d, err := Load(LoadOptions{})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { d.Destroy() })
		return d
	}
	router, sink := load(), load()
	var gen TestgenObjects
	if err := LoadTestgenObjects(&gen, nil); err != nil {
		b.Fatalf("load traffic generator: %v", err)
	}
	b.Cleanup(func() { gen.Close() })
	c.in(c.S, func() error { return gen.GenTx.Put(uint32(0), uint32(s0)) })
	c.in(c.R, func() error {
		if err := router.SetSwitchConfig(SwitchConfig{Block: testBlock, OwnUSIDs: []uint16{ownUSID}}); err != nil {
			return err
		}
		if err := router.SetPort(0, Port{Ifindex: r1, NeighMAC: c.macD0, OwnMAC: c.macR1}); err != nil {
			return err
		}
		return router.AddRoute(netip.MustParsePrefix("5f00:1:200::/48"), NextHop{Port: 0})
	})
	c.in(c.D, func() error { return sink.Attach(d0, AttachNative) })

	f := usidFrame("5f00:1:100:200::", 64)
	f.dstMAC, f.srcMAC = [6]byte(c.macR0), [6]byte(c.macS0)
	frame := f.bytes()
	if err := gen.GenHdr.Put(uint32(0), frame[:64]); err != nil {
		b.Fatal(err)
	}
	const offered = 500_000
	// measure offers frames as fast as the generator can redirect them into
	// s0 and returns delivered and offered frames per second. The whole chain
	// (generator, router, receiver) runs in softirq on the generator's CPU,
	// so frames the router cannot take in time are dropped at its veth ring
	// and the delivered rate is the path's forwarding rate on one CPU.
	measure := func() (float64, float64) {
		before, _ := sink.Counters(UnmappedPort)
		start := time.Now()
		_, err := gen.XdpGen.Run(&ebpf.RunOptions{Data: frame, Repeat: offered, Flags: bpfFTestXDPLiveFrames})
		if err != nil {
			b.Fatalf("live-frames generator: %v", err)
		}
		el := time.Since(start).Seconds()
		// The receiver may still be draining its ring: poll until stable.
		var after PortCounters
		for last := uint64(0); ; {
			time.Sleep(5 * time.Millisecond)
			after, _ = sink.Counters(UnmappedPort)
			if after.RxPackets == last {
				break
			}
			last = after.RxPackets
		}
		return float64(after.RxPackets-before.RxPackets) / el, offered / el
	}
	// Run-time statistics of the router program itself (kernel >= 5.8),
	// enabled only while this file descriptor is open.
	if st, err := ebpf.EnableStats(uint32(unix.BPF_STATS_RUN_TIME)); err == nil {
		defer st.Close()
	}
	var kSum, xSum, kOff, xOff float64
	for b.Loop() {
		c.in(c.R, func() error { return router.AttachPass(r0) })
		d, o := measure()
		kSum, kOff = kSum+d, kOff+o
		c.in(c.R, func() error {
			if err := router.Detach(r0); err != nil {
				return err
			}
			return router.Attach(r0, AttachNative)
		})
		d, o = measure()
		xSum, xOff = xSum+d, xOff+o
		c.in(c.R, func() error { return router.Detach(r0) })
	}
	nb := float64(b.N)
	if ps, err := router.SwitchProgram().Stats(); err == nil && ps.RunCount > 0 {
		b.ReportMetric(float64(ps.Runtime.Nanoseconds())/float64(ps.RunCount), "xdp-prog-ns/pkt")
	}
	b.ReportMetric(kSum/nb/1e6, "kernel-Mpps")
	b.ReportMetric(xSum/nb/1e6, "xdp-Mpps")
	b.ReportMetric(kOff/nb/1e6, "kernel-offered-Mpps")
	b.ReportMetric(xOff/nb/1e6, "xdp-offered-Mpps")
	if kSum > 0 {
		b.ReportMetric(xSum/kSum, "xdp/kernel")
	}
}
