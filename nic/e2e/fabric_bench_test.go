package e2e

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/netip"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/softmrc/softmrc/nic/config"
	"github.com/softmrc/softmrc/testbed/run"
)

// fabricPair brings up the clos-2p testbed in ecmp mode and runs mrc-nicd on
// hosts from and to. It returns two views of the pair: mrc, whose addresses
// are the management ones (the tools' out-of-band connection setup, as in
// upTestbedWith), and tcp, whose addresses are the plane-0 NIC port
// addresses (kernel traffic through the XDP switches of plane 0).
//
// ecmp mode, not srv6: only there do hosts have kernel routes to the other
// hosts' plane /64s (testbed/netns: "in ecmp mode also a route per plane"),
// and the switches forward plain IPv6 on those /64s. In srv6 mode a host's
// kernel has no route into the fabric, so kernel TCP could not cross it.
// upTestbedWith takes a *testing.T and always uses the preset's srv6 mode,
// hence this helper; it reuses host.start and the testbed binaries.
func fabricPair(tb testing.TB, from, to string) (mrc, tcp *topo) {
	tb.Helper()
	return fabricPairStart(tb, from, to, true)
}

// fabricPairStart is fabricPair; the daemons run only when start is set.
// tcp's hosts then carry every port's address (plane order) and the config.
func fabricPairStart(tb testing.TB, from, to string, start bool) (mrc, tcp *topo) {
	tb.Helper()
	return fabricPairStartMTU(tb, from, to, start, 0)
}

// fabricPairStartMTU is fabricPairStart with the NICs' RoCE MTU (mrc-testbed
// up --roce-mtu; the links follow it); 0 keeps the testbed's default.
func fabricPairStartMTU(tb testing.TB, from, to string, start bool, roceMTU int) (mrc, tcp *topo) {
	tb.Helper()
	var up []string
	if roceMTU != 0 {
		up = append(up, "--roce-mtu", strconv.Itoa(roceMTU))
	}
	return fabricPairUp(tb, from, to, start, up...)
}

// fabricPairUp is fabricPairStart with more mrc-testbed up arguments.
func fabricPairUp(tb testing.TB, from, to string, start bool, upArgs ...string) (mrc, tcp *topo) {
	tb.Helper()
	bin := bins(tb)
	tbBin := filepath.Join(bin, "mrc-testbed")
	if _, err := exec.LookPath(tbBin); err != nil {
		tb.Skipf("skipping: %s not found: run make build and set MRC_BIN to the repository's bin folder", tbBin)
	}
	var r [2]byte
	rand.Read(r[:])
	prefix := "f" + hex.EncodeToString(r[:])
	dir := tb.TempDir()
	// Registered before up, so a half-made run is removed too; it runs
	// after the daemons' cleanups (LIFO), which host.start registers later.
	tb.Cleanup(func() {
		if out, err := exec.Command(tbBin, "down", "--dir", dir).CombinedOutput(); err != nil {
			tb.Errorf("testbed down: %v: %s", err, out)
		}
	})
	args := append([]string{"up", "--preset", "clos-2p", "--mode", "ecmp", "--prefix", prefix, "--dir", dir, "--bin", bin}, upArgs...)
	out, err := exec.Command(tbBin, args...).CombinedOutput()
	if err != nil {
		tb.Fatalf("testbed up --preset clos-2p --mode ecmp %s: %v: %s", strings.Join(upArgs, " "), err, out)
	}
	p, err := run.LoadPlan(dir)
	if err != nil {
		tb.Fatal(err)
	}
	mrc, tcp = &topo{}, &topo{}
	for i, hn := range []string{from, to} {
		ph := p.Host(hn)
		if ph == nil || len(ph.Ports) == 0 {
			tb.Fatalf("plan in %s has no host %s with ports", dir, hn)
		}
		path := filepath.Join(dir, "host", hn+".nic.yaml")
		c, err := config.Load(path)
		if err != nil {
			tb.Fatal(err)
		}
		h := &host{ns: ph.NS, cfg: c, path: path, log: &lockedBuffer{}, bin: bin,
			addrs: []netip.Addr{ph.MgmtAddr.Addr()}}
		if start {
			h.start(tb)
		}
		mrc.h[i] = h
		tcp.h[i] = &host{ns: ph.NS, cfg: c}
		for _, pp := range ph.Ports {
			tcp.h[i].addrs = append(tcp.h[i].addrs, pp.Addr.Addr())
		}
	}
	return mrc, tcp
}

// linkBytes reads an interface's rx or tx byte counter in namespace ns.
func linkBytes(tb testing.TB, ns, ifname, dir string) uint64 {
	tb.Helper()
	_, n := linkCounters(tb, ns, ifname, dir)
	return n
}

// linkCounters reads an interface's rx or tx packet and byte counters in
// namespace ns. A veth counts one packet per skb it passes, so bytes over
// packets is the size of what crossed it (a GSO skb counts once).
func linkCounters(tb testing.TB, ns, ifname, dir string) (packets, bytes uint64) {
	tb.Helper()
	out, err := exec.Command("ip", "-n", ns, "-j", "-s", "link", "show", "dev", ifname).Output()
	if err != nil {
		tb.Fatalf("ip -n %s -s link show %s: %v", ns, ifname, err)
	}
	var links []struct {
		Stats map[string]struct {
			Packets uint64 `json:"packets"`
			Bytes   uint64 `json:"bytes"`
		} `json:"stats64"`
	}
	if err := json.Unmarshal(out, &links); err != nil || len(links) != 1 {
		tb.Fatalf("ip -j -s link show %s in %s: %v: %s", ifname, ns, err, out)
	}
	return links[0].Stats[dir].Packets, links[0].Stats[dir].Bytes
}

// BenchmarkFabricTCP compares, in one run and through the same XDP switch
// fabric (clos-2p, ecmp mode, h0 -> h3 across a T1), mrc-write-bw goodput
// (1 QP, 64 KiB messages) with one kernel TCP stream between the hosts'
// plane-0 port addresses (the NIC's steering program passes non-MRC traffic
// to the kernel, so mrc-nicd stays up while TCP runs).
//
//	make build && MRC_BIN=$PWD/bin go test -run '^$' -bench FabricTCP -benchtime 1x ./nic/e2e/   (root)
//
// TCP uses one plane (one port); MRC sprays both planes. The per-port
// figures divide each goodput by the ports it used.
func BenchmarkFabricTCP(b *testing.B) {
	requireNetns(b)
	const secs = 4
	for i := 0; i < b.N; i++ {
		mrc, tcp := fabricPair(b, "h0", "h3")
		tx0, rx0 := linkBytes(b, tcp.h[0].ns, "p0", "tx"), linkBytes(b, tcp.h[1].ns, "p0", "rx")
		tcpBps := tcpStream(b, tcp, secs*time.Second)
		// The stream must have left h0 and reached h3 by their plane-0
		// ports; h0 and h3 hang off different T0s, which only T1s join,
		// so it crossed the fabric. (A wrong route would show here, not
		// as an odd number.)
		sent := tcpBps * secs
		txd, rxd := linkBytes(b, tcp.h[0].ns, "p0", "tx")-tx0, linkBytes(b, tcp.h[1].ns, "p0", "rx")-rx0
		if float64(txd) < 0.9*sent || float64(rxd) < 0.9*sent {
			b.Fatalf("TCP sent %.0f B but h0:p0 sent %d B and h3:p0 received %d B: the stream did not cross plane 0", sent, txd, rxd)
		}
		var bw bwJSON
		runJSON(b, mrc, "mrc-write-bw", &bw, "-s", "65536", "-D", strconv.Itoa(secs))
		if len(bw.Results) != 1 {
			b.Fatalf("mrc-write-bw results: %+v", bw)
		}
		mrcBps := bw.Results[0].Average * (1 << 20) // BW_average is MiB/s
		tcpPorts, mrcPorts := 1.0, float64(len(mrc.h[0].cfg.Ports))
		b.ReportMetric(tcpBps*8/1e9, "tcp_Gbps")
		b.ReportMetric(mrcBps*8/1e9, "mrc_Gbps")
		b.ReportMetric(tcpBps*8/1e9/tcpPorts, "tcp_Gbps/port")
		b.ReportMetric(mrcBps*8/1e9/mrcPorts, "mrc_Gbps/port")
		if tcpBps > 0 {
			b.ReportMetric(mrcBps/tcpBps, "mrc/tcp")
			b.ReportMetric((mrcBps/mrcPorts)/(tcpBps/tcpPorts), "mrc/tcp_per_port")
		}
		fmt.Printf("clos-2p ecmp h0->h3 across a T1, %d s each: kernel TCP %.2f Gb/s (1 port), mrc-write-bw 64 KiB 1 QP %.2f Gb/s (%.0f ports, %.2f Gb/s per port); mrc/tcp %.2f, per port %.2f\n",
			secs, tcpBps*8/1e9, mrcBps*8/1e9, mrcPorts, mrcBps*8/1e9/mrcPorts, mrcBps/tcpBps, (mrcBps/mrcPorts)/(tcpBps/tcpPorts))
	}
}
