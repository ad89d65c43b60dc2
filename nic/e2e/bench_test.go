package e2e

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"golang.org/x/sys/unix"
	"io"
	"net"
	"net/netip"
	"os"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/vishvananda/netns"

	"github.com/softmrc/softmrc/internal/wire"
	"github.com/softmrc/softmrc/nic/config"
	"github.com/softmrc/softmrc/nic/xsk"
)

// inNS runs fn on a thread switched into namespace ns (sockets made there
// stay in it).
func inNS(tb testing.TB, ns string, fn func()) {
	tb.Helper()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	orig, err := netns.Get()
	if err != nil {
		tb.Fatal(err)
	}
	defer orig.Close()
	h, err := netns.GetFromName(ns)
	if err != nil {
		tb.Fatal(err)
	}
	defer h.Close()
	if err := netns.Set(h); err != nil {
		tb.Fatal(err)
	}
	defer netns.Set(orig)
	fn()
}

// tcpStream measures one kernel TCP stream from h[0] to h[1] for d.
func tcpStream(tb testing.TB, tp *topo, d time.Duration) float64 {
	var ln net.Listener
	addr := net.JoinHostPort(tp.h[1].addrs[0].String(), "18600")
	inNS(tb, tp.h[1].ns, func() {
		var err error
		if ln, err = net.Listen("tcp", addr); err != nil {
			tb.Fatal(err)
		}
	})
	defer ln.Close()
	var got atomic.Int64
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		n, _ := io.Copy(io.Discard, c)
		got.Store(n)
	}()
	var dl net.Dialer
	return sendFor(tb, tp.h[0].ns, dl.Dial, addr, d)
}

// sendFor dials addr from namespace ns with dial, writes 64 KiB buffers
// for d (or until a write fails) and closes the connection; it returns the
// bytes per second written. The dialer is the caller's (plain TCP, MPTCP):
// the send loop is the same for every kernel baseline.
func sendFor(tb testing.TB, ns string, dial func(network, addr string) (net.Conn, error), addr string, d time.Duration) float64 {
	tb.Helper()
	var c net.Conn
	inNS(tb, ns, func() {
		var err error
		if c, err = dial("tcp", addr); err != nil {
			tb.Fatalf("dial %s from %s: %v", addr, ns, err)
		}
	})
	defer c.Close()
	buf := make([]byte, 64<<10)
	start := time.Now()
	var sent int64
	for time.Since(start) < d {
		n, err := c.Write(buf)
		sent += int64(n)
		if err != nil {
			break
		}
	}
	return float64(sent) / time.Since(start).Seconds()
}

// udpPingPong returns the typical (median) half round trip, in µs, of a
// 2-byte kernel UDP ping-pong from h[0] to h[1].
func udpPingPong(tb testing.TB, tp *topo, n int) float64 {
	addr := net.JoinHostPort(tp.h[1].addrs[0].String(), "18601")
	var srv *net.UDPConn
	inNS(tb, tp.h[1].ns, func() {
		a, _ := net.ResolveUDPAddr("udp", addr)
		var err error
		if srv, err = net.ListenUDP("udp", a); err != nil {
			tb.Fatal(err)
		}
	})
	defer srv.Close()
	go func() {
		buf := make([]byte, 64)
		for {
			k, from, err := srv.ReadFromUDP(buf)
			if err != nil {
				return
			}
			srv.WriteToUDP(buf[:k], from)
		}
	}()
	var c *net.UDPConn
	inNS(tb, tp.h[0].ns, func() {
		a, _ := net.ResolveUDPAddr("udp", addr)
		var err error
		if c, err = net.DialUDP("udp", nil, a); err != nil {
			tb.Fatal(err)
		}
	})
	defer c.Close()
	buf := make([]byte, 64)
	var s []float64
	for i := 0; i < n; i++ {
		t0 := time.Now()
		c.Write([]byte{1, 2})
		c.SetReadDeadline(time.Now().Add(time.Second))
		if _, err := c.Read(buf); err != nil {
			continue // lost: not a sample
		}
		s = append(s, float64(time.Since(t0).Nanoseconds())/2e3)
	}
	sort.Float64s(s)
	if len(s) == 0 {
		tb.Fatal("UDP ping-pong: no answers")
	}
	return s[len(s)/2]
}

// rawXDP sends MRC data frames (a payload of the NICs' RoCE MTU, 2048 bytes
// by default, as mrc-nicd sends them)
// from h[0]'s port to h[1]'s AF_XDP port for d and returns the frames per
// second received: the raw AF_XDP receive rate of the same frames on the
// same path.
func rawXDP(tb testing.TB, tp *topo, d time.Duration) (fps float64, frameLen int) {
	return rawXDPPorts(tb, tp.h[0], tp.h[1], 0, d)
}

// rawXDPPorts is rawXDP from src's port p to dst's port p, addressed as
// mrc-nicd in ecmp mode addresses them (to the neighbour's MAC, which on a
// veth pair is the peer and on a testbed the T0), so that on a fabric the
// switches forward the frames as they forward the NIC's. The daemons must
// not run on those ports (one AF_XDP socket per queue).
func rawXDPPorts(tb testing.TB, src, dst *host, p int, d time.Duration) (fps float64, frameLen int) {
	r := rawXDPRun(tb, src, dst, p, d)
	return r.fps, r.frameLen
}

// rawRun is one raw AF_XDP measurement: the receive rate, and the CPU time
// of the sending and the receiving thread (each locked to its OS thread,
// read with getrusage(RUSAGE_THREAD)), so that mrc-nicd's CPU per byte can
// be set against the floor's on the same path in the same round.
type rawRun struct {
	fps          float64
	frameLen     int
	payload      int // bytes of payload per frame: the hosts' RoCE MTU
	sent, got    uint64
	txCPU, rxCPU time.Duration
}

// threadCPU is the user + system time of the calling OS thread.
func threadCPU() time.Duration {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_THREAD, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func rawXDPRun(tb testing.TB, src, dst *host, p int, d time.Duration) rawRun {
	c0, c1 := src.cfg.Ports[p], dst.cfg.Ports[p]
	var tx, rx *xsk.XDPPort
	inNS(tb, src.ns, func() {
		var err error
		if tx, err = xsk.Open(xsk.Config{Ifname: c0.Interface, NoSteer: true, RingSize: 2048}); err != nil {
			tb.Fatal(err)
		}
	})
	defer tx.Close()
	inNS(tb, dst.ns, func() {
		var err error
		if rx, err = xsk.Open(xsk.Config{Ifname: c1.Interface, Addrs: []netip.Addr{c1.Address}, RingSize: 4096}); err != nil {
			tb.Fatal(err)
		}
	})
	defer rx.Close()
	pk := wire.Packet{SrcMAC: c0.MAC, DstMAC: c0.NeighborMAC, Src: wire.Addr128FromNetip(c0.Address), Dst: wire.Addr128FromNetip(c1.Address),
		DSCP: wire.DSCPTrimmable, ECN: wire.ECNECT0, EV: 0x1234, Opcode: wire.OpWriteMiddle, DestQP: 0x101, PSN: 1,
		VA: 0x1000, RKey: 7, DMALen: 65536, Payload: make([]byte, cmp.Or(src.cfg.MTU, config.DefaultMTU))}
	frame := make([]byte, pk.Len())
	n, err := pk.Encode(frame)
	if err != nil {
		tb.Fatal(err)
	}
	frame = frame[:n]
	batch := make([][]byte, 64)
	for i := range batch {
		batch[i] = frame
	}
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	var got atomic.Uint64
	var rxCPU time.Duration
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread()
		t0 := threadCPU()
		for ctx.Err() == nil {
			k, _ := rx.RecvFunc(256, func([]byte) {})
			got.Add(uint64(k))
			if k == 0 {
				rx.Wait(10 * time.Millisecond)
			}
		}
		rxCPU = threadCPU() - t0
	}()
	runtime.LockOSThread()
	t0 := threadCPU()
	var sent uint64
	for ctx.Err() == nil {
		k, _ := tx.Send(batch)
		sent += uint64(k)
		if k == 0 {
			tx.Wait(0)
		}
	}
	txCPU := threadCPU() - t0
	runtime.UnlockOSThread()
	<-done
	return rawRun{fps: float64(got.Load()) / d.Seconds(), frameLen: n, payload: len(pk.Payload), sent: sent, got: got.Load(), txCPU: txCPU, rxCPU: rxCPU}
}

type bwJSON struct {
	Results []bwResult `json:"results"`
}

// bwResult is one row of mrc-write-bw --json.
type bwResult struct {
	Average float64 `json:"BW_average"`
	MsgRate float64 `json:"MsgRate"` // Mpps
	Seconds float64 `json:"seconds"`
}

type latJSON struct {
	Results []struct {
		Typical float64 `json:"t_typical"`
	} `json:"results"`
}

func runJSON(tb testing.TB, tp *topo, name string, out any, args ...string) {
	tb.Helper()
	runJSONPids(tb, tp, name, out, nil, args...)
}

// runJSONInProcess is runJSON with each side's NIC inside its tool
// (--in-process, from the host's config): the hosts' mrc-nicd must be
// stopped.
func runJSONInProcess(tb testing.TB, tp *topo, name string, out any, args ...string) {
	tb.Helper()
	runJSONSides(tb, tp, name, out, nil, func(h *host) []string { return []string{"--in-process", "--nic-config", h.path} }, args...)
}

// runJSONPids is runJSON that also reports the server's and the client's
// process ids in pids when it is not nil (ip netns exec execs the tool:
// the same process).
func runJSONPids(tb testing.TB, tp *topo, name string, out any, pids *[2]int, args ...string) {
	tb.Helper()
	runJSONSides(tb, tp, name, out, pids, nil, args...)
}

// runJSONSides is runJSONPids with each side's own arguments, side(h)
// (nil: none) after args.
func runJSONSides(tb testing.TB, tp *topo, name string, out any, pids *[2]int, side func(*host) []string, args ...string) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	own := func(h *host) []string {
		a := slices.Clone(args)
		if side != nil {
			a = append(a, side(h)...)
		}
		return a
	}
	srv := tp.h[1].tool(ctx, name, own(tp.h[1])...)
	if err := srv.Start(); err != nil {
		tb.Fatal(err)
	}
	defer srv.Wait()
	cmd := tp.h[0].tool(ctx, name, append(own(tp.h[0]), "--json", tp.h[1].addrs[0].String())...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	if pids != nil {
		pids[0], pids[1] = srv.Process.Pid, cmd.Process.Pid
	}
	err := cmd.Wait()
	if err != nil && ctx.Err() != nil {
		// Timed out: a daemon may be stuck. SIGQUIT makes a Go process
		// print every goroutine's stack before it exits; the daemons' logs
		// (printed when the benchmark fails) then show where.
		for _, h := range tp.h {
			if h.daemon != nil {
				_ = h.daemon.Process.Signal(syscall.SIGQUIT)
			}
		}
		tb.Fatalf("%s %v timed out after 2 minutes (the daemons got SIGQUIT: their goroutine stacks are in the logs below)", name, args)
	}
	if err != nil {
		tb.Fatalf("%s %v: %v: %s", name, args, err, stderr.String())
	}
	if err := json.Unmarshal(stdout.Bytes(), out); err != nil {
		tb.Fatalf("%s --json: %v: %s", name, err, stdout.String())
	}
}

// BenchmarkNIC measures, on one fresh veth between two namespaces and in
// one run: the raw AF_XDP receive rate of mrc-nicd's 2048-byte data frames,
// one kernel TCP stream and a kernel UDP ping-pong (the baselines), then
// mrc-write-bw (1 QP, 64 KiB) and mrc-write-lat (2 B) through mrc-nicd on
// the same veth. It reports the ratios.
//
//	go test -run '^$' -bench NIC -benchtime 1x ./nic/e2e/   (root)
//
// Two environment variables help profiling: MRC_BENCH_PARTS (a comma list of
// raw, tcp, udp, bw, lat; default all) runs only some parts, and
// MRC_NICD_ARGS adds options to both daemons, with %h replaced by the host
// (e.g. "-cpuprofile /tmp/%h.pprof").
func BenchmarkNIC(b *testing.B) {
	requireNetns(b)
	parts := map[string]bool{}
	for _, p := range strings.Split(cmp.Or(os.Getenv("MRC_BENCH_PARTS"), "raw,tcp,udp,bw,lat"), ",") {
		parts[strings.TrimSpace(p)] = true
	}
	for i := 0; i < b.N; i++ {
		tp := newTopoStart(b, 1, false)
		const d = 4 * time.Second
		var fps, tcp, udpLat float64
		var flen int
		if parts["raw"] {
			fps, flen = rawXDP(b, tp, d)
		}
		rawGoodput := fps * 2048 // payload bytes per second at the raw frame rate
		if parts["tcp"] {
			tcp = tcpStream(b, tp, d)
		}
		if parts["udp"] {
			udpLat = udpPingPong(b, tp, 2000)
		}
		for _, h := range tp.h {
			for _, a := range strings.Fields(os.Getenv("MRC_NICD_ARGS")) {
				h.extra = append(h.extra, strings.ReplaceAll(a, "%h", h.cfg.Host))
			}
			h.start(b)
		}
		var mrcBps, mrcLat float64
		if parts["bw"] {
			var bw bwJSON
			runJSON(b, tp, "mrc-write-bw", &bw, "-s", "65536", "-D", "4")
			if len(bw.Results) != 1 {
				b.Fatalf("results: %+v", bw)
			}
			mrcBps = bw.Results[0].Average * (1 << 20)
			b.ReportMetric(mrcBps*8/1e9, "mrc_Gbps")
		}
		if parts["lat"] {
			var lat latJSON
			runJSON(b, tp, "mrc-write-lat", &lat, "-s", "2", "-n", "2000")
			if len(lat.Results) != 1 {
				b.Fatalf("results: %+v", lat)
			}
			mrcLat = lat.Results[0].Typical
			b.ReportMetric(mrcLat, "mrc_lat_us")
		}
		if parts["raw"] {
			b.ReportMetric(fps/1e6, "raw_xdp_Mpps")
			b.ReportMetric(rawGoodput*8/1e9, "raw_xdp_payload_Gbps")
		}
		if parts["tcp"] {
			b.ReportMetric(tcp*8/1e9, "tcp_Gbps")
		}
		if parts["udp"] {
			b.ReportMetric(udpLat, "udp_halfrtt_us")
		}
		if mrcBps > 0 && fps > 0 {
			b.ReportMetric(mrcBps/rawGoodput, "mrc/raw_xdp")
		}
		if mrcBps > 0 && tcp > 0 {
			b.ReportMetric(mrcBps/tcp, "mrc/tcp")
		}
		if mrcLat > 0 && udpLat > 0 {
			b.ReportMetric(mrcLat/udpLat, "mrc_lat/udp")
		}
		fmt.Printf("frame %d B: raw AF_XDP %.3f Mpps (%.2f Gb/s payload), TCP %.2f Gb/s, mrc-write-bw %.2f Gb/s; UDP ping-pong %.1f us, mrc-write-lat %.1f us\n",
			flen, fps/1e6, rawGoodput*8/1e9, tcp*8/1e9, mrcBps*8/1e9, udpLat, mrcLat)
	}
}
