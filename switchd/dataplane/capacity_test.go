package dataplane

import (
	"testing"
	"time"
)

// TestCapacityModel offers twice the capacity of one port for one second,
// paced on the real clock (the model drains by bpf_ktime_get_ns), and checks
// that the bytes the port drained (admitted bytes minus the final backlog)
// are within ±5% of capacity × time, and that marks come before trims and
// drops. The queue is deep (trim at 1 MiB = 168 ms of capacity) so that the
// scheduling stalls of a loaded 2-CPU machine do not idle the virtual link. One frame in ten is NO_TRIM, so drops
// appear too. The pacing is checked, not assumed: on a machine too slow to
// offer 1.5× the capacity the test skips and says so.
func TestCapacityModel(t *testing.T) {
	if testing.Short() {
		t.Skip("skipping 1 s capacity run in -short mode")
	}
	h := newHarness(t)
	const capBps = 50_000_000 // 6.25 MB/s
	h.setModel(1, RoleFabric, PortModel{CapacityBps: capBps, MarkBytes: 512 << 10, TrimBytes: 1 << 20, BufferBytes: 2 << 20})
	data := dataFrame(10, ecnECT0, mrcHdr{opcode: 0xCA, payload: 1400}).bytes()
	noTrim := dataFrame(14, ecnECT0, mrcHdr{opcode: 0xCA, payload: 1400}).bytes()
	frameBits := float64(len(data) * 8)
	interval := time.Duration(frameBits / (2 * capBps) * 1e9)

	firstMark, firstTrim, firstDrop := -1, -1, -1
	var offered int
	start := time.Now()
	var last time.Time
	for i := 0; ; i++ {
		next := start.Add(time.Duration(i) * interval)
		if next.Sub(start) >= time.Second {
			break
		}
		for time.Now().Before(next) {
		}
		in := data
		if i%10 == 9 {
			in = noTrim
		}
		ret, out := h.run(in)
		last = time.Now()
		offered += len(in)
		switch {
		case ret == xdpDrop:
			if firstDrop < 0 {
				firstDrop = i
			}
		case len(out) < len(in):
			if firstTrim < 0 {
				firstTrim = i
			}
		case frameTC(out)&3 == ecnCE:
			if firstMark < 0 {
				firstMark = i
			}
		}
	}
	elapsed := last.Sub(start).Seconds()
	offeredBps := float64(offered*8) / elapsed
	if offeredBps < 1.5*capBps {
		t.Skipf("skipping: this machine offered only %.0f Mbit/s of the 100 Mbit/s wanted (BPF_PROG_RUN too slow)", offeredBps/1e6)
	}
	c := h.counters(1)
	var q SwitchSwVq
	must(t, h.d.objs.Vqs.Lookup(uint32(1), &q))
	backlog := q.Backlog / 1e9
	sentBps := float64((c.TxBytes-backlog)*8) / elapsed
	t.Logf("offered %.1f Mbit/s for %.3f s; drained %.1f Mbit/s (capacity %d Mbit/s); forwarded %d, marked %d, trimmed %d, dropped %d; first mark/trim/drop at frame %d/%d/%d",
		offeredBps/1e6, elapsed, sentBps/1e6, capBps/1_000_000, c.Forwarded, c.ECNMarked, c.Trimmed, c.DropBuffer, firstMark, firstTrim, firstDrop)
	t.Logf("admitted %d bytes, final backlog %d bytes", c.TxBytes, backlog)
	if r := sentBps / capBps; r < 0.95 || r > 1.05 {
		t.Errorf("port drained %.1f Mbit/s, want %d Mbit/s ±5%%", sentBps/1e6, capBps/1_000_000)
	}
	if firstMark < 0 || firstTrim < 0 || firstDrop < 0 {
		t.Fatalf("missing outcome: first mark %d, trim %d, drop %d", firstMark, firstTrim, firstDrop)
	}
	if firstMark > firstTrim || firstMark > firstDrop {
		t.Errorf("marks must start before trims and drops: first mark %d, trim %d, drop %d", firstMark, firstTrim, firstDrop)
	}
}
