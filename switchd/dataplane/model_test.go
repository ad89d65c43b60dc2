package dataplane

import (
	"bytes"
	"math"
	"net/netip"
	"strings"
	"testing"
	"time"
)

const (
	ecnNotECT = 0
	ecnECT0   = 2
	ecnCE     = 3
)

// dataFrame is an MRC RDMA WRITE data packet through the own uN to port 1.
func dataFrame(dscp uint8, ecn uint8, m mrcHdr) testFrame {
	f := usidFrame("5f00:1:100:200::", 64)
	f.tc = dscp<<2 | ecn
	f.rawPayload = nil
	f.mrc = &m
	return f
}

// trimmedOf is the golden trimmed copy of f sent on port p: payload and ICRC
// gone, every length recomputed, DSCP replaced, ECN kept.
func trimmedOf(f testFrame, p PortID, dscp uint8) testFrame {
	w := sent(f, p, "5f00:1:200::", 63)
	m := *f.mrc
	m.dmaLen, m.payload, m.noICRC = m.payload, 0, true
	w.mrc = &m
	// Only the outermost header is re-marked (docs/switch.md).
	itc := f.tc
	w.innerTC = &itc
	w.tc = dscp<<2 | f.tc&3
	return w
}

// A slow port (1 B/s) so that the queue does not drain during a test.
func slowModel(mark, trim, buf uint32) PortModel {
	return PortModel{CapacityBps: 8, MarkBytes: mark, TrimBytes: trim, BufferBytes: buf}
}

func TestECNMarking(t *testing.T) {
	marked := func(f testFrame) *testFrame {
		w := sent(f, 1, "5f00:1:200::", 63)
		itc := f.tc // only the outermost header is marked
		w.innerTC = &itc
		w.tc = w.tc&^3 | ecnCE
		return &w
	}
	plain := func(f testFrame, p PortID) *testFrame {
		w := sent(f, p, "5f00:1:200::", 63)
		return &w
	}
	ect := dataFrame(10, ecnECT0, mrcHdr{opcode: 0xCA, payload: 200})
	notECT := dataFrame(10, ecnNotECT, mrcHdr{opcode: 0xCA, payload: 200})
	ect1 := dataFrame(10, 1, mrcHdr{opcode: 0xCA, payload: 200})
	host := ect
	host.dst = netip.MustParseAddr("5f00:1:100:c001::")
	hostOut := sent(host, 4, "5f00:1:c001::", 63)
	hostMarked := hostOut
	hostInnerTC := host.tc
	hostMarked.innerTC = &hostInnerTC
	hostMarked.tc = hostMarked.tc&^3 | ecnCE
	hostECN := slowModel(100, 10000, 20000)
	hostECN.HostECN = true
	fabric := func(h *harness) { h.setModel(1, RoleFabric, slowModel(100, 10000, 20000)) }
	runCases(t, []fwdCase{
		{name: "ECT(0) above threshold gets CE", setup: fabric, in: ect, wantRet: xdpRedirect, want: marked(ect), port: 1, cnt: cMarked},
		{name: "ECT(1) above threshold gets CE", setup: fabric, in: ect1, wantRet: xdpRedirect, want: marked(ect1), port: 1, cnt: cMarked},
		{name: "not-ECT is not marked", setup: fabric, in: notECT, wantRet: xdpRedirect, want: plain(notECT, 1), port: 1, cnt: cForwarded},
		{name: "below threshold not marked", setup: func(h *harness) { h.setModel(1, RoleFabric, slowModel(1000, 10000, 20000)) },
			in: ect, wantRet: xdpRedirect, want: plain(ect, 1), port: 1, cnt: cForwarded},
		{name: "host-facing port never marks", setup: func(h *harness) { h.setModel(4, RoleHostFacing, slowModel(100, 10000, 20000)) },
			in: host, wantRet: xdpRedirect, want: &hostOut, port: 4, cnt: cForwarded},
		{name: "host-facing port with HostECN marks", setup: func(h *harness) { h.setModel(4, RoleHostFacing, hostECN) },
			in: host, wantRet: xdpRedirect, want: &hostMarked, port: 4, cnt: cMarked},
		{name: "model off: no marking", in: ect, wantRet: xdpRedirect, want: plain(ect, 1), port: 1, cnt: cForwarded},
	})
	// The marked frame is also counted as forwarded.
	h := newHarness(t)
	fabric(h)
	h.run(ect.bytes())
	if c := h.counters(1); c.Forwarded != 1 || c.ECNMarked != 1 || c.TxPackets != 1 {
		t.Fatalf("marked frame counters %+v", c)
	}
}

func TestTrimming(t *testing.T) {
	trimPort1 := func(h *harness) { h.setModel(1, RoleFabric, slowModel(0, 1000, 20000)) }
	big := func(dscp uint8, m mrcHdr) testFrame { return dataFrame(dscp, ecnECT0, m) }
	w := mrcHdr{opcode: 0xCA, payload: 1400}
	wts := mrcHdr{opcode: 0xC6, ts: true, payload: 1400}
	wimm := mrcHdr{opcode: 0xCB, payload: 1400}
	wlastimm := mrcHdr{opcode: 0xC9, ts: true, payload: 1400}
	probe := mrcHdr{opcode: 0xDE, payload: 1400}
	trim := func(name string, f testFrame) fwdCase {
		g := trimmedOf(f, 1, 40)
		return fwdCase{name: name, setup: trimPort1, in: f, wantRet: xdpRedirect, want: &g, port: 1, cnt: cTrimmed}
	}
	unchanged := func(name string, f testFrame) fwdCase {
		g := sent(f, 1, "5f00:1:200::", 63)
		return fwdCase{name: name, setup: trimPort1, in: f, wantRet: xdpRedirect, want: &g, port: 1, cnt: cForwarded}
	}
	dropped := func(name string, f testFrame, setup func(*harness)) fwdCase {
		if setup == nil {
			setup = trimPort1
		}
		return fwdCase{name: name, setup: setup, in: f, wantRet: xdpDrop, port: 1, cnt: cBuffer}
	}
	// Host-facing: TRIMMED_LASTHOP, and plain IPv6 (no outer header) too.
	lastHop := big(10, w)
	lastHop.encap = false
	lastHop.dst = netip.MustParseAddr("fd00:4::9")
	lastHopOut := sent(lastHop, 4, "fd00:4::9", 63)
	lm := *lastHop.mrc
	lm.dmaLen, lm.payload, lm.noICRC = lm.payload, 0, true
	lastHopOut.mrc = &lm
	lastHopOut.tc = 41<<2 | ecnECT0

	runCases(t, []fwdCase{
		trim("WRITE_ONLY", big(10, w)),
		trim("WRITE_FIRST with TSETH", big(10, wts)),
		trim("WRITE_ONLY_IMM keeps ImmDt", big(10, wimm)),
		trim("WRITE_LAST_IMM with TSETH and ImmDt", big(10, wlastimm)),
		trim("retransmission class", big(12, w)),
		trim("CE kept", dataFrame(10, ecnCE, w)),
		{name: "host-facing: TRIMMED_LASTHOP", setup: func(h *harness) { h.setModel(4, RoleHostFacing, slowModel(0, 1000, 20000)) },
			in: lastHop, wantRet: xdpRedirect, want: &lastHopOut, port: 4, cnt: cTrimmed},
		unchanged("CONTROL bypasses the data threshold", big(46, w)),
		unchanged("TRIMMED is never trimmed again", big(40, w)),
		unchanged("TRIMMED_LASTHOP is never trimmed again", big(41, w)),
		unchanged("below the trim threshold", big(10, mrcHdr{opcode: 0xCA, payload: 500})),
		dropped("NO_TRIM is dropped", big(14, w), nil),
		dropped("probe is not a data opcode", big(10, probe), nil),
		dropped("non-MRC UDP port", func() testFrame { f := big(10, w); f.dport = 9999; return f }(), nil),
		dropped("trimmed copy does not fit the buffer", big(10, w), func(h *harness) { h.setModel(1, RoleFabric, slowModel(0, 100, 100)) }),
		dropped("priority above the buffer", big(46, w), func(h *harness) { h.setModel(1, RoleFabric, slowModel(0, 1000, 1000)) }),
	})
}

// TestThresholdOrder fills a port that does not drain: frames are first
// sent, then marked, then trimmed, then dropped, with counts that follow from
// the thresholds.
func TestThresholdOrder(t *testing.T) {
	h := newHarness(t)
	f := dataFrame(10, ecnECT0, mrcHdr{opcode: 0xCA, payload: 1000})
	L := uint32(len(f.bytes()))
	tl := uint32(len(trimmedOf(f, 1, 40).bytes()))
	mark, trim, buf := 3*L, 6*L, 6*L+15*tl+tl/2
	h.setModel(1, RoleFabric, slowModel(mark, trim, buf))
	var seq []byte
	for i := 0; i < 30; i++ {
		before := h.counters(1)
		ret, _ := h.run(f.bytes())
		after := h.counters(1)
		switch {
		case ret == xdpDrop && after.DropBuffer == before.DropBuffer+1:
			seq = append(seq, 'D')
		case after.Trimmed == before.Trimmed+1:
			seq = append(seq, 'T')
		case after.ECNMarked == before.ECNMarked+1:
			seq = append(seq, 'M')
		case after.Forwarded == before.Forwarded+1:
			seq = append(seq, 'S')
		default:
			t.Fatalf("frame %d: verdict %d, no outcome counted", i, ret)
		}
	}
	want := "SSS" + "MMM" + string(bytes.Repeat([]byte{'T'}, 15)) + string(bytes.Repeat([]byte{'D'}, 9))
	if string(seq) != want {
		t.Fatalf("outcome sequence\n got  %s\n want %s", seq, want)
	}
}

func TestFaults(t *testing.T) {
	in := usidFrame("5f00:1:100:200::", 64)
	ok := sent(in, 1, "5f00:1:200::", 63)
	fault := func(name string, p PortID, f Fault) fwdCase {
		return fwdCase{name: name, setup: func(h *harness) { must(h.t, h.d.SetFault(p, f)) }, in: in, wantRet: xdpDrop, port: p, cnt: cFault}
	}
	fine := func(name string, setup func(*harness)) fwdCase {
		return fwdCase{name: name, setup: setup, in: in, wantRet: xdpRedirect, want: &ok, port: 1, cnt: cForwarded}
	}
	runCases(t, []fwdCase{
		fault("egress down", 1, Fault{Down: true}),
		fault("egress blackhole", 1, Fault{Blackhole: true}),
		fault("egress loss 100%", 1, Fault{LossPPM: 1_000_000}),
		fault("egress flapped off", 1, Fault{FlapOn: time.Nanosecond, FlapOff: time.Hour}),
		fault("ingress down", ingressPort, Fault{Down: true}),
		fault("ingress blackhole", ingressPort, Fault{Blackhole: true}),
		{name: "switch hung", setup: func(h *harness) { must(h.t, h.d.SetHang(true)) }, in: in, wantRet: xdpDrop, port: ingressPort, cnt: cFault},
		fine("flapping, in the up phase", func(h *harness) { must(h.t, h.d.SetFault(1, Fault{FlapOn: time.Hour, FlapOff: time.Hour})) }),
		fine("loss 0", func(h *harness) { must(h.t, h.d.SetFault(1, Fault{})) }),
		fine("fault on another port", func(h *harness) { must(h.t, h.d.SetFault(2, Fault{Down: true})) }),
		fine("fault cleared", func(h *harness) {
			must(h.t, h.d.SetFault(1, Fault{Down: true}))
			must(h.t, h.d.SetFault(1, Fault{}))
		}),
		fine("hang cleared", func(h *harness) {
			must(h.t, h.d.SetHang(true))
			must(h.t, h.d.SetHang(false))
		}),
	})
}

// TestRandomLoss checks the loss probability statistically; the bounds are
// more than 10 standard deviations wide, so the test does not flake.
func TestRandomLoss(t *testing.T) {
	h := newHarness(t)
	must(t, h.d.SetFault(1, Fault{LossPPM: 250_000}))
	const n = 4000
	frame := usidFrame("5f00:1:100:200::", 64).bytes()
	for i := 0; i < n; i++ {
		h.run(frame)
	}
	c := h.counters(1)
	if c.DropFault+c.Forwarded != n {
		t.Fatalf("%d dropped + %d forwarded != %d sent", c.DropFault, c.Forwarded, n)
	}
	if c.DropFault < 700 || c.DropFault > 1300 {
		t.Fatalf("25%% loss dropped %d of %d", c.DropFault, n)
	}
}

// TestREDMarking: with MarkMaxBytes and MarkProb the port marks between the
// thresholds with a probability rising linearly from 0 at MarkBytes to
// MarkProb at MarkMaxBytes, and every frame above MarkMaxBytes. The port does
// not drain (1 B/s), so frame k is enqueued at a backlog of k frames; the
// count of marks over n frames is compared with its expectation (a sum of
// Bernoulli draws) within 6 standard deviations, which a step marker (every
// frame above MarkBytes) or a marker that ignores MarkProb misses by far.
func TestREDMarking(t *testing.T) {
	f := dataFrame(10, ecnECT0, mrcHdr{opcode: 0xCA, payload: 200})
	frame := f.bytes()
	l := uint64(len(frame))
	for _, c := range []struct {
		name          string
		mark, markMax uint32
		prob          float64
		n             int
	}{
		{"half of the way up, pmax 1", 100, uint32(4000 * l), 1, 2000},
		{"half of the way up, pmax 0.1", 100, uint32(4000 * l), 0.1, 2000},
		{"past the maximum, pmax 0.01", 100, uint32(500 * l), 0.01, 1500},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t)
			m := slowModel(c.mark, 0, 1<<30)
			m.MarkMaxBytes, m.MarkProb = c.markMax, c.prob
			h.setModel(1, RoleFabric, m)
			var want, variance float64
			for k := 1; k <= c.n; k++ {
				q := uint64(k) * l // backlog with frame k
				p := 0.0
				switch {
				case q >= uint64(c.markMax):
					p = 1
				case q > uint64(c.mark):
					p = c.prob * float64(q-uint64(c.mark)) / float64(c.markMax-c.mark)
				}
				want += p
				variance += p * (1 - p)
				if ret, _ := h.run(frame); ret != xdpRedirect {
					t.Fatalf("frame %d: XDP verdict %d, want redirect", k, ret)
				}
			}
			got := float64(h.counters(1).ECNMarked)
			sd := math.Sqrt(variance)
			t.Logf("%d frames of %d B: %v marked, expected %.1f ± %.1f", c.n, l, got, want, sd)
			if math.Abs(got-want) > 6*sd+1 {
				t.Errorf("%v frames marked, want %.1f ± %.1f (6 sd)", got, want, 6*sd)
			}
		})
	}
}

// TestPortModelValidateRED: RED's thresholds and probability are checked
// before anything reaches the map, and markPmax maps a probability onto the
// prandom threshold the program compares with.
func TestPortModelValidateRED(t *testing.T) {
	base := PortModel{CapacityBps: 8e6, MarkBytes: 1000, BufferBytes: 100000}
	for _, c := range []struct {
		name    string
		max     uint32
		prob    float64
		wantErr string
	}{
		{"step marking", 0, 0, ""},
		{"RED", 50000, 0.01, ""},
		{"RED up to the buffer, p 1", 100000, 1, ""},
		{"max at the marking threshold", 1000, 0.01, "must be above the marking threshold"},
		{"max above the buffer", 100001, 0.01, "above buffer"},
		{"probability 0 with a max", 50000, 0, "probability 0"},
		{"probability above 1", 50000, 1.5, "want 0 < p <= 1"},
		{"probability without a max", 0, 0.01, "must be above the marking threshold"},
	} {
		m := base
		m.MarkMaxBytes, m.MarkProb = c.max, c.prob
		err := m.validate()
		if c.wantErr == "" && err != nil || c.wantErr != "" && (err == nil || !strings.Contains(err.Error(), c.wantErr)) {
			t.Errorf("%s: validate() = %v, want %q", c.name, err, c.wantErr)
		}
	}
	noMark := base
	noMark.MarkBytes, noMark.MarkMaxBytes, noMark.MarkProb = 0, 50000, 0.01
	if err := noMark.validate(); err == nil {
		t.Error("RED without a marking threshold: no error")
	}
	for p, want := range map[float64]uint32{0.25: 1 << 30, 0.5: 1 << 31, 1: math.MaxUint32, 0.01: 42949673} {
		if got := markPmax(p); got != want {
			t.Errorf("markPmax(%v) = %d, want %d", p, got, want)
		}
	}
}
