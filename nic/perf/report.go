package perf

import (
	"fmt"
	"io"
	"math"
	"net/netip"
	"sort"
	"strings"

	"github.com/softmrc/softmrc/nic/verbs"
)

// resultLine is perftest's RESULT_LINE.
var resultLine = strings.Repeat("-", 87)

// chex formats v like C's "%#0<w>x": width counts the 0x prefix, and zero
// has no prefix.
func chex(v uint64, w int) string {
	if v == 0 {
		return fmt.Sprintf("%0*x", w, 0)
	}
	return fmt.Sprintf("0x%0*x", max(w-2, 0), v)
}

func printBanner(w io.Writer, p *Params, info verbs.DeviceInfo) {
	fmt.Fprintln(w, resultLine)
	title := fmt.Sprintf("RDMA_Write %s Test", p.Kind)
	fmt.Fprintf(w, "%s%s\n", strings.Repeat(" ", 20), title)
	onoff := func(b bool) string {
		if b {
			return "ON"
		}
		return "OFF"
	}
	fmt.Fprintf(w, " Dual-port       : OFF\t\tDevice         : %s\n", p.Device)
	fmt.Fprintf(w, " Number of qps   : %d\t\tTransport type : %s\n", p.QPs, map[verbs.Transport]string{verbs.TransportMRC: "MRC", verbs.TransportRoCE: "RoCE (go-back-N, DCQCN)"}[p.Transport])
	fmt.Fprintf(w, " Connection type : RC\t\tUsing SRQ      : OFF\n")
	fmt.Fprintf(w, " Planes          : %d\t\tEVs per QP     : %d\n", len(info.Ports), info.EVs)
	fmt.Fprintf(w, " Fabric mode     : %s\t\tBidirectional  : %s\n", info.Mode, onoff(p.Bidir))
	fmt.Fprintf(w, " TX depth        : %d\n", p.TxDepth)
	fmt.Fprintf(w, " CQ Moderation   : %d\n", p.cqMod())
	fmt.Fprintf(w, " Mtu             : %d[B]\n", info.MTU)
	fmt.Fprintf(w, " Link type       : Ethernet\n")
	fmt.Fprintf(w, " GID index       : 0\n")
	fmt.Fprintf(w, " Max inline data : 0[B]\n")
	fmt.Fprintf(w, " rdma_cm QPs\t : OFF\n")
	fmt.Fprintf(w, " Data ex. method : Ethernet\n")
	fmt.Fprintf(w, " Verify          : %s\n", onoff(p.Verify))
	fmt.Fprintln(w, resultLine)
}

func printAddr(w io.Writer, side string, k key) {
	fmt.Fprintf(w, " %s address: LID %s QPN %s PSN %s RKey %s VAddr %s\n", side, chex(0, 4), chex(uint64(k.QPN), 6),
		chex(uint64(k.PSN), 6), chex(uint64(k.RKey), 8), chex(k.VAddr, 16))
	var gid [16]byte
	if len(k.Addrs) > 0 {
		gid = k.Addrs[0].As16()
	}
	parts := make([]string, 16)
	for i, b := range gid {
		parts[i] = fmt.Sprintf("%02d", b)
	}
	fmt.Fprintf(w, " GID: %s\n", strings.Join(parts, ":"))
}

func bwUnit(gbits bool) string {
	if gbits {
		return "Gb/sec"
	}
	return "MiB/sec"
}

// bwValue converts bytes per second to the report unit (2^20 bytes, or
// 10^9 bits with --report_gbits, as perftest).
func bwValue(bps float64, gbits bool) float64 {
	if gbits {
		return bps * 8 / 1e9
	}
	return bps / (1 << 20)
}

func printBWHeader(w io.Writer, gbits bool) {
	u := bwUnit(gbits)
	fmt.Fprintf(w, " #bytes     #iterations    BW peak[%s]    BW average[%s]   MsgRate[Mpps]\n", u, u)
}

// BWResult is one row of the bandwidth table.
type BWResult struct {
	MsgSize    int     `json:"MsgSize"`
	Iterations uint64  `json:"n_iterations"`
	Peak       float64 `json:"BW_peak"`
	Average    float64 `json:"BW_average"`
	MsgRate    float64 `json:"MsgRate"`
	Unit       string  `json:"unit"`
	Seconds    float64 `json:"seconds"`
	// Verified is true when --verify ran; Mismatches counts wrong bytes.
	Verified   bool   `json:"verified"`
	Mismatches uint64 `json:"mismatches"`
}

func printBWRow(w io.Writer, r BWResult) {
	fmt.Fprintf(w, " %-7d    %-10d       %-7.2f            %-7.2f\t\t     %-7.6f\n", r.MsgSize, r.Iterations, r.Peak, r.Average, r.MsgRate)
}

// LatResult is one row of the latency table (microseconds).
type LatResult struct {
	MsgSize    int     `json:"MsgSize"`
	Iterations uint64  `json:"n_iterations"`
	Min        float64 `json:"t_min"`
	Max        float64 `json:"t_max"`
	Typical    float64 `json:"t_typical"`
	Avg        float64 `json:"t_avg"`
	Stdev      float64 `json:"t_stdev"`
	P99        float64 `json:"percentile_99"`
	P999       float64 `json:"percentile_99.9"`
	Verified   bool    `json:"verified"`
	Mismatches uint64  `json:"mismatches"`
	Duration   bool    `json:"-"`
	TPS        float64 `json:"tps,omitempty"`
}

func printLatHeader(w io.Writer, duration bool) {
	if duration {
		fmt.Fprintln(w, " #bytes        #iterations       t_avg[usec]    tps average")
		return
	}
	fmt.Fprintln(w, " #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec] ")
}

func printLatRow(w io.Writer, r LatResult) {
	if r.Duration {
		fmt.Fprintf(w, " %-7d       %-10d        %-7.2f        %-7.2f\n", r.MsgSize, r.Iterations, r.Avg, r.TPS)
		return
	}
	fmt.Fprintf(w, " %-7d %d          %-7.2f        %-7.2f      %-7.2f  \t       %-7.2f     \t%-7.2f\t\t%-7.2f \t\t%-7.2f\n",
		r.MsgSize, r.Iterations, r.Min, r.Max, r.Typical, r.Avg, r.Stdev, r.P99, r.P999)
}

// latStats computes the perftest latency statistics from one-way samples
// (microseconds): sorted, the largest 2 dropped (LAT_MEASURE_TAIL), median
// as typical, percentiles at ceil(n·q).
func latStats(size int, samples []float64) LatResult {
	r := LatResult{MsgSize: size, Iterations: uint64(len(samples)) + 1}
	s := append([]float64(nil), samples...)
	sort.Float64s(s)
	if len(s) > 2 {
		s = s[:len(s)-2]
	}
	n := len(s)
	if n == 0 {
		return r
	}
	r.Min, r.Max, r.Typical = s[0], s[n-1], s[n/2]
	sum := 0.0
	for _, x := range s {
		sum += x
	}
	r.Avg = sum / float64(n)
	v := 0.0
	for _, x := range s {
		v += (x - r.Avg) * (x - r.Avg)
	}
	r.Stdev = math.Sqrt(v / float64(n))
	pct := func(q float64) float64 {
		i := int(math.Ceil(float64(n)*q)) - 1
		return s[min(max(i, 0), n-1)]
	}
	r.P99, r.P999 = pct(0.99), pct(0.999)
	return r
}

func devAddrs(info verbs.DeviceInfo) []netip.Addr {
	a := make([]netip.Addr, len(info.Ports))
	for _, p := range info.Ports {
		if p.Plane >= 0 && p.Plane < len(a) {
			a[p.Plane] = p.Address
		}
	}
	return a
}
