package daemon_test

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/softmrc/softmrc/nic/config"
	"github.com/softmrc/softmrc/nic/daemon/daemontest"
	"github.com/softmrc/softmrc/nic/verbs"
	"github.com/softmrc/softmrc/nic/vproto"
)

// twoNICs runs two daemons joined by in-memory pipes, one per plane.
func twoNICs(t *testing.T, planes int) (sock1, sock2 string, stop1 func()) {
	p := daemontest.Start(t, planes)
	return p.Sock[0], p.Sock[1], func() { p.Stop(0) }
}

type side struct {
	dev *verbs.Device
	qp  *verbs.QP
	mr  *verbs.MR
}

func open(t *testing.T, sock string, size int) *side {
	t.Helper()
	d, err := verbs.Open(sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	qp, err := d.CreateQP(verbs.QPConfig{})
	if err != nil {
		t.Fatal(err)
	}
	mr, err := d.RegMR(size, verbs.AccessLocalWrite|verbs.AccessRemoteWrite)
	if err != nil {
		t.Fatal(err)
	}
	return &side{dev: d, qp: qp, mr: mr}
}

func connect(t *testing.T, a, b *side) {
	t.Helper()
	if err := a.qp.Connect(b.qp.ConnectInfo()); err != nil {
		t.Fatal(err)
	}
	if err := b.qp.Connect(a.qp.ConnectInfo()); err != nil {
		t.Fatal(err)
	}
}

// qpRow is s's QP's row of mrcctl qps (its counters).
func qpRow(t *testing.T, s *side) vproto.QPRow {
	t.Helper()
	var rows []vproto.QPRow
	if err := s.dev.Ctl(vproto.CtlRequest{Cmd: vproto.CtlQPs}, &rows); err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		if r.QPN == s.qp.QPN {
			return r
		}
	}
	t.Fatalf("QP %#x not in mrcctl qps", s.qp.QPN)
	return vproto.QPRow{}
}

func waitCQE(t *testing.T, d *verbs.Device) verbs.Completion {
	t.Helper()
	c, err := d.NextCompletion(10 * time.Second)
	if err != nil {
		t.Fatalf("waiting for a completion: %v", err)
	}
	return c
}

func fill(b []byte, seed uint32) {
	x := seed*2654435761 + 1
	for i := range b {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		b[i] = byte(x)
	}
}

func TestWriteEndToEnd(t *testing.T) {
	s1, s2, _ := twoNICs(t, 2)
	const size = 1 << 20
	a, b := open(t, s1, size), open(t, s2, size)
	connect(t, a, b)
	fill(a.mr.Buf, 1)
	sizes := []uint32{0, 1, 2, 100, 2047, 2048, 2049, 65536, 300001, size}
	off := uint64(0)
	for i, n := range sizes {
		if n == size {
			off = 0
		}
		dst := b.mr.Addr + off
		if err := a.qp.PostSend(verbs.Write(uint64(i), a.mr, off, n, dst, b.mr.RKey)); err != nil {
			t.Fatal(err)
		}
		c := waitCQE(t, a.dev)
		if c.Status != verbs.StatusSuccess || c.ID != uint64(i) {
			t.Fatalf("size %d: completion %+v: %v", n, c, c.Status)
		}
		if !bytes.Equal(b.mr.Buf[off:off+uint64(n)], a.mr.Buf[off:off+uint64(n)]) {
			t.Fatalf("size %d: bytes at the receiver differ from the sender's", n)
		}
		off += uint64(n)
	}
	// Write-with-Immediate: the receiver's CQ reports it after the data.
	fill(a.mr.Buf[:5000], 9)
	if err := a.qp.PostSend(verbs.WriteImm(77, a.mr, 0, 5000, b.mr.Addr, b.mr.RKey, 0xabcd1234)); err != nil {
		t.Fatal(err)
	}
	if c := waitCQE(t, a.dev); c.Status != verbs.StatusSuccess || c.ID != 77 {
		t.Fatalf("sender completion %+v", c)
	}
	c := waitCQE(t, b.dev)
	if c.Op != verbs.CQRecvImm || c.Imm != 0xabcd1234 || c.QPN != b.qp.QPN || c.Status != verbs.StatusSuccess {
		t.Fatalf("receiver completion %+v, want RecvImm imm 0xabcd1234 on QP %#x", c, b.qp.QPN)
	}
	if !bytes.Equal(b.mr.Buf[:5000], a.mr.Buf[:5000]) {
		t.Fatal("WriteImm bytes differ")
	}
}

func TestManyPostsBatched(t *testing.T) {
	s1, s2, _ := twoNICs(t, 2)
	a, b := open(t, s1, 1<<16), open(t, s2, 1<<16)
	connect(t, a, b)
	fill(a.mr.Buf, 3)
	const n = 2000 // more than the engine's send queue: the daemon queues the rest
	wrs := make([]verbs.SendWR, n)
	for i := range wrs {
		off := uint64(i*32) % (1 << 16)
		wrs[i] = verbs.Write(uint64(i), a.mr, off, 32, b.mr.Addr+off, b.mr.RKey)
	}
	if err := a.qp.PostSend(wrs...); err != nil {
		t.Fatal(err)
	}
	seen := make([]bool, n)
	cs := make([]verbs.Completion, 256)
	got := 0
	deadline := time.Now().Add(20 * time.Second)
	for got < n && time.Now().Before(deadline) {
		k, err := a.dev.PollCQ(cs)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range cs[:k] {
			if c.Status != verbs.StatusSuccess || c.ID >= n || seen[c.ID] {
				t.Fatalf("completion %+v", c)
			}
			seen[c.ID] = true
			got++
		}
		if k == 0 {
			a.dev.WaitCQ(50 * time.Millisecond)
		}
	}
	if got != n {
		t.Fatalf("%d of %d completions", got, n)
	}
	if !bytes.Equal(a.mr.Buf[:n*32], b.mr.Buf[:n*32]) {
		t.Fatal("receiver memory differs")
	}
}

// completionFor waits for the completion of WR id, skipping asynchronous
// QP-error events, which it returns too.
func completionFor(t *testing.T, d *verbs.Device, id uint64) (c verbs.Completion, qpErr bool) {
	t.Helper()
	for {
		c = waitCQE(t, d)
		if c.Op == vproto.CQQPError {
			qpErr = true
			continue
		}
		if c.ID == id {
			return c, qpErr
		}
		t.Fatalf("unexpected completion %+v", c)
	}
}

func TestBadRequestsEndToEnd(t *testing.T) {
	s1, s2, _ := twoNICs(t, 1)
	zero := make([]byte, 8192)
	for _, tc := range []struct {
		name string
		wr   func(a, b, other *side) (*verbs.Device, vproto.WR)
		want verbs.Status
	}{
		{"unregistered rkey", func(a, b, _ *side) (*verbs.Device, vproto.WR) {
			return a.dev, vproto.WR{Op: vproto.OpWrite, Len: 64, RemoteAddr: b.mr.Addr, RKey: b.mr.RKey + 1}
		}, verbs.StatusRemAccessErr},
		{"VA out of bounds", func(a, b, _ *side) (*verbs.Device, vproto.WR) {
			return a.dev, vproto.WR{Op: vproto.OpWrite, Len: 64, RemoteAddr: b.mr.Addr + 8190, RKey: b.mr.RKey}
		}, verbs.StatusRemAccessErr},
		{"rkey of another application on the target host", func(a, b, other *side) (*verbs.Device, vproto.WR) {
			return a.dev, vproto.WR{Op: vproto.OpWrite, Len: 64, RemoteAddr: other.mr.Addr, RKey: other.mr.RKey}
		}, verbs.StatusRemAccessErr},
		{"unsupported opcode", func(a, b, _ *side) (*verbs.Device, vproto.WR) {
			return a.dev, vproto.WR{Op: vproto.OpRead, Len: 64, RemoteAddr: b.mr.Addr, RKey: b.mr.RKey}
		}, verbs.StatusLocQPOpErr},
		{"another application's QP", func(a, b, other *side) (*verbs.Device, vproto.WR) {
			// other (on host 2) posts on a's QP number: host 2 has a QP
			// with that number only by chance, and never owned by other.
			w := vproto.WR{Op: vproto.OpWrite, Len: 64, RemoteAddr: b.mr.Addr, RKey: b.mr.RKey, QPN: b.qp.QPN}
			return other.dev, w
		}, verbs.StatusLocQPOpErr},
		{"another application's lkey", func(a, b, other *side) (*verbs.Device, vproto.WR) {
			return a.dev, vproto.WR{Op: vproto.OpWrite, Len: 64, RemoteAddr: b.mr.Addr, RKey: b.mr.RKey,
				LKey: b.mr.LKey, LocalAddr: b.mr.Addr}
		}, verbs.StatusLocProtErr},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, b := open(t, s1, 8192), open(t, s2, 8192)
			connect(t, a, b)
			other := open(t, s2, 8192) // a second application on the target host
			fill(a.mr.Buf, 5)
			fill(b.mr.Buf, 6) // b's own lkey region must not be sent from
			want := append([]byte(nil), b.mr.Buf...)
			dev, w := tc.wr(a, b, other)
			w.ID, w.Flags = 1234, vproto.FlagSignaled
			if w.QPN == 0 {
				w.QPN = a.qp.QPN
			}
			if w.LKey == 0 {
				w.LKey, w.LocalAddr = a.mr.LKey, a.mr.Addr
			}
			if err := dev.PostRaw([]vproto.WR{w}); err != nil {
				t.Fatal(err)
			}
			c, _ := completionFor(t, dev, 1234)
			if c.Status != tc.want {
				t.Fatalf("completion %+v (%v), want %v", c, c.Status, tc.want)
			}
			if !bytes.Equal(b.mr.Buf, want) || !bytes.Equal(other.mr.Buf, zero) {
				t.Fatal("a refused request wrote into a region")
			}
		})
	}
}

func TestDaemonStopGivesClearError(t *testing.T) {
	s1, s2, stop1 := twoNICs(t, 1)
	a, b := open(t, s1, 4096), open(t, s2, 4096)
	connect(t, a, b)
	start := time.Now()
	stop1()
	_, err := a.dev.WaitCQ(5 * time.Second)
	if !errors.Is(err, verbs.ErrDeviceGone) {
		t.Fatalf("WaitCQ after the daemon stopped: %v, want ErrDeviceGone", err)
	}
	if el := time.Since(start); el > 5*time.Second {
		t.Fatalf("took %v to notice", el)
	}
	if err := a.qp.PostSend(verbs.Write(1, a.mr, 0, 1, b.mr.Addr, b.mr.RKey)); !errors.Is(err, verbs.ErrDeviceGone) {
		t.Fatalf("PostSend on a dead device: %v", err)
	}
	if !strings.Contains(err.Error(), "shutting down") {
		t.Errorf("error does not say why: %v", err)
	}
}

// A paced daemon completes verified writes, its port sending at most
// pacing_bps (the engine paces each plane at its port's rate: the one
// pacer) and, on a lossless pipe, retransmitting (next to) nothing.
func TestPacedPorts(t *testing.T) {
	pr := daemontest.StartWith(t, 1, func(_ int, c *config.Config) {
		c.Ports[0].PacingBps = 200e6
		// Both daemons run in this process, on 2 vCPUs shared with the race
		// detector and the tests beside it. Busy polling made their loops
		// take the CPUs from each other: a receiving loop kept off for
		// 5-10 ms while the sender paced on, and every packet then in
		// flight timed out at once (74-98 per attempt, then probes and
		// stalls), in every attempt of about 1 run in 2 here (CI 2026-12-06
		// 16:05: 9-87 retransmitted in each of 12), with or without this
		// session's changes. Sleeping loops, and an RTO floor above a time
		// slice, leave 0 in most attempts even beside two CPU hogs (worst
		// 3-7 in 5 runs). The defect this test guards against held frames
		// the engine had counted as sent for up to the window's line time
		// (12 ms at this rate): a 5 ms floor still sees it.
		zero := time.Duration(0)
		c.BusyPoll = &zero
		c.QP.MinRTO = 5 * time.Millisecond
	})
	cfgs, a := pr.Configs, pr.Pipes[0][0]
	x, y := open(t, cfgs[0].DeviceSocket, 1<<20), open(t, cfgs[1].DeviceSocket, 1<<20)
	connect(t, x, y)
	rateBps := float64(cfgs[0].Ports[0].PacingBps)
	// The rate is the port's own byte count over the time a 1 MiB write
	// took. Too fast is a hard bound, checked on every attempt: whatever the
	// machine's load, a working pacer cannot send faster than its rate after
	// its initial burst (the engine's PortQueue, 32 KiB of line time here), so the time can
	// only be longer; 5 % is left for clock granularity. Too slow (below
	// half the rate) can also be the machine's load delaying the loop's
	// wake-ups, so one attempt of six within the band suffices; a pacer
	// off by a large factor (bits taken for bytes: 8x) fails them all.
	const burst = 32 << 10
	// Twelve attempts of about 45 ms: under make test's parallel load three
	// were not enough for one without a stall (2026-12-03: 4 / 11 / 33
	// retransmitted, all spurious timeouts; the pacer defect gave 4-40 in
	// every attempt), and six were not either once (CI 2026-12-05 09:36:
	// 8-22 in each). With three CPU hogs beside it about one attempt in
	// four stays at 3 or fewer; stall_clock on both daemons did not change
	// that (1 run of 4 failed with six attempts).
	const attempts = 12
	inBand := false
	bestRtx := uint64(1 << 62)
	for attempt := 1; attempt <= attempts; attempt++ {
		fill(x.mr.Buf, uint32(11+attempt))
		before, rtxBefore := a.Stats(), qpRow(t, x)
		start := time.Now()
		if err := x.qp.PostSend(verbs.Write(uint64(attempt), x.mr, 0, 1<<20, y.mr.Addr, y.mr.RKey)); err != nil {
			t.Fatal(err)
		}
		if c := waitCQE(t, x.dev); c.Status != verbs.StatusSuccess {
			t.Fatalf("completion %+v", c)
		}
		el := time.Since(start)
		if !bytes.Equal(x.mr.Buf, y.mr.Buf) {
			t.Fatal("paced write: bytes differ")
		}
		st := a.Stats()
		frames, sent := st.TxFrames-before.TxFrames, st.TxBytes-before.TxBytes
		if frames < 512 {
			t.Fatalf("port sent %d frames for 1 MiB", frames)
		}
		row := qpRow(t, x)
		data, rtx, tmo := row.TxData-rtxBefore.TxData, row.TxRtx-rtxBefore.TxRtx, row.Timeouts-rtxBefore.Timeouts
		minTime := time.Duration((float64(sent) - burst) * 8 / rateBps * float64(time.Second))
		got := float64(sent) * 8 / el.Seconds()
		t.Logf("attempt %d: %d frames (%d data, %d retransmitted, %d timeouts), %d bytes in %v: %.0f Mb/s for pacing at %.0f Mb/s (at least %v)", attempt, frames, data, rtx, tmo, sent, el, got/1e6, rateBps/1e6, minTime)
		// The pipe loses nothing, so every retransmission is spurious: an
		// ACK timer that fired before the SACK was handled. Two pacers
		// caused them (the daemon's bucket held frames the engine had
		// counted as sent: 4-40 per attempt, 2026-12-03); the machine's
		// load still can (a loop descheduled past the RTO), so the best of
		// the attempts counts, like the rate band below.
		bestRtx = min(bestRtx, rtx)
		inBand = inBand || got >= rateBps/2
		if el < minTime*95/100 {
			t.Errorf("attempt %d: %d bytes left the port in %v, at %.0f Mb/s: pacing at %.0f Mb/s takes at least %v (after a %d-byte burst); the pacer is off or too fast",
				attempt, sent, el, got/1e6, rateBps/1e6, minTime, burst)
		}
	}
	if bestRtx > 3 {
		t.Errorf("at least %d data packets retransmitted in each of %d paced 1 MiB writes over a lossless pipe (want at most 3 in one): a pacer holds frames the engine counted as sent", bestRtx, attempts)
	}
	if !inBand {
		t.Errorf("port sent below half its pacing rate %.0f Mb/s in all %d attempts", rateBps/1e6, attempts)
	}
}

// More Write-with-Immediates than the peer's WriteImm cap (and two QPs'
// worth of them at once) wait in the daemon's backlog and enter the engine
// as earlier ones complete: every one completes, in order, each immediate
// arrives in order, and no backlog is left.
func TestBacklogBeyondWImmCap(t *testing.T) {
	s1, s2, _ := twoNICs(t, 1)
	var senders [2]*side
	var receivers [2]*side
	for i := range senders {
		senders[i], receivers[i] = open(t, s1, 4096), open(t, s2, 4096)
		connect(t, senders[i], receivers[i])
	}
	n := 4 * int(senders[0].qp.MaxWImm)
	for i, s := range senders {
		var wrs []verbs.SendWR
		for k := range n {
			wrs = append(wrs, verbs.WriteImm(uint64(k), s.mr, 0, 64, receivers[i].mr.Addr, receivers[i].mr.RKey, uint32(i<<16|k)))
		}
		if err := s.qp.PostSend(wrs...); err != nil {
			t.Fatal(err)
		}
	}
	for i := range senders {
		for k := range n {
			if c := waitCQE(t, senders[i].dev); c.Status != verbs.StatusSuccess || c.ID != uint64(k) {
				t.Fatalf("QP %d: completion %+v, want WR %d done", i, c, k)
			}
			if c := waitCQE(t, receivers[i].dev); c.Op != verbs.CQRecvImm || c.Imm != uint32(i<<16|k) {
				t.Fatalf("QP %d: receive %+v, want immediate %#x", i, c, i<<16|k)
			}
		}
		if r := qpRow(t, senders[i]); r.Backlog != 0 {
			t.Errorf("QP %d: backlog %d after every WR completed", i, r.Backlog)
		}
	}
}
