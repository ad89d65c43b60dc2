package daemon

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/softmrc/softmrc/nic/config"
	"github.com/softmrc/softmrc/nic/xsk"
)

// TestDelayPort: the port wrapper delays both directions of the wire by the
// port's delay on an injected clock, keeps order, and drops (counting) what
// its pool cannot hold; the metrics show the lines.
func TestDelayPort(t *testing.T) {
	const delay = 5 * time.Millisecond
	a, b := xsk.NewPipe("a", "b", 64)
	now := int64(0)
	dp, err := newDelayPort(a, config.Port{Name: "p0", Delay: delay, DelayFrames: 2}, func() int64 { return now })
	if err != nil {
		t.Fatal(err)
	}
	var atB, atEngine []string
	recvB := func() {
		_, _ = b.RecvFunc(64, func(f []byte) { atB = append(atB, string(f)) })
	}
	recvEngine := func() {
		_, _ = dp.RecvFunc(64, func(f []byte) { atEngine = append(atEngine, string(f)) })
	}
	for _, step := range []struct {
		at           time.Duration
		send, answer []string // the engine sends on dp; the far end sends on b
		wantB, wantE string   // everything each side has received by then
	}{
		{at: 0, send: []string{"t1", "t2", "t3"}}, // t3 finds the pool (2) full
		{at: delay - time.Microsecond, answer: []string{"r1"}},
		{at: delay, wantB: "t1,t2"},
		{at: 2*delay - 2*time.Microsecond, wantB: "t1,t2"},
		{at: 2*delay - time.Microsecond, wantB: "t1,t2", wantE: "r1"},
	} {
		now = int64(step.at)
		if len(step.send) > 0 {
			var fs [][]byte
			for _, s := range step.send {
				fs = append(fs, []byte(s))
			}
			if n, err := dp.Send(fs); n != len(fs) || err != nil {
				t.Fatalf("Send = %d, %v: a delayed port takes every frame (a full line drops)", n, err)
			}
		}
		for _, s := range step.answer {
			if _, err := b.Send([][]byte{[]byte(s)}); err != nil {
				t.Fatal(err)
			}
		}
		recvEngine()
		recvB()
		if got := strings.Join(atB, ","); got != step.wantB {
			t.Fatalf("at %v the far end has %q, want %q", step.at, got, step.wantB)
		}
		if got := strings.Join(atEngine, ","); got != step.wantE {
			t.Fatalf("at %v the engine has %q, want %q", step.at, got, step.wantE)
		}
	}
	tc, rc := dp.tx.Counters(), dp.rx.Counters()
	if tc.Dropped != 1 || tc.PeakHeld != 2 || tc.Out != 2 || rc.Out != 1 || rc.Held != 0 {
		t.Fatalf("tx %+v rx %+v: want tx 1 dropped, peak 2, 2 out; rx 1 out", tc, rc)
	}
	if at, ok := dp.due(); ok {
		t.Fatalf("a frame still due at %d with both lines empty", at)
	}
	// SendFunc goes through the line too.
	now = int64(20 * time.Millisecond)
	built := 0
	if n, err := dp.SendFunc(4, func(f []byte) int {
		if built++; built > 1 {
			return 0 // one frame, then stop
		}
		return copy(f, "s1")
	}); n != 1 || err != nil {
		t.Fatalf("SendFunc = %d, %v: want 1 frame", n, err)
	}
	recvEngine()
	recvB()
	now += int64(delay)
	recvEngine()
	recvB()
	if got := strings.Join(atB, ","); got != "t1,t2,s1" {
		t.Fatalf("after SendFunc and the delay the far end has %q", got)
	}
	// The metrics.
	d := &Daemon{delayed: []*delayPort{dp}}
	ch := make(chan prometheus.Metric, 64)
	d.collectDelay(ch)
	close(ch)
	got := map[string]float64{}
	for m := range ch {
		var pb dto.Metric
		_ = m.Write(&pb)
		name := m.Desc().String()
		name = name[strings.Index(name, `fqName: "`)+9:]
		name = name[:strings.Index(name, `"`)]
		dir := ""
		for _, l := range pb.GetLabel() {
			if l.GetName() == "dir" {
				dir = l.GetValue()
			}
		}
		v := pb.GetCounter().GetValue() + pb.GetGauge().GetValue()
		got[name+"/"+dir] = v
	}
	for k, want := range map[string]float64{"mrc_port_delay_dropped_total/tx": 1, "mrc_port_delay_peak_held/tx": 2,
		"mrc_port_delay_frames_total/tx": 3, "mrc_port_delay_frames_total/rx": 1, "mrc_port_delay_held/rx": 0} {
		if v, ok := got[k]; !ok || v != want {
			t.Errorf("metric %s = %v (present %v), want %v; all: %v", k, v, ok, want, got)
		}
	}
}

// TestDelayPortStampsBacklogOnce: frames waiting in the port when the loop
// looks (after a stall: more than one receive batch) all enter the receive
// line at that look, so they leave it one delay later, not a delay after
// the later call that would have taken each batch.
func TestDelayPortStampsBacklogOnce(t *testing.T) {
	const delay = 5 * time.Millisecond
	for _, tc := range []struct {
		name          string
		backlog, pool int
		wantOut       int // frames at the engine one delay after the look
	}{
		{"one batch", 40, 256, 40},
		{"a stall's backlog", 150, 256, 150},
		{"more than the pool", 300, 256, 256},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, b := xsk.NewPipe("a", "b", 0)
			now := int64(0)
			dp, err := newDelayPort(a, config.Port{Name: "p0", Delay: delay, DelayFrames: tc.pool}, func() int64 { return now })
			if err != nil {
				t.Fatal(err)
			}
			for i := 0; i < tc.backlog; i++ {
				if _, err := b.Send([][]byte{{byte(i), byte(i >> 8)}}); err != nil {
					t.Fatal(err)
				}
			}
			got := 0
			count := func(f []byte) { got++ }
			// The look: nothing is due yet.
			if n, err := dp.RecvFunc(64, count); n != 0 || err != nil {
				t.Fatalf("RecvFunc at 0 = %d, %v: want nothing due", n, err)
			}
			if held := dp.rx.Len(); held != min(tc.backlog, tc.pool) {
				t.Fatalf("the receive line holds %d of %d waiting frames after one look (pool %d)", held, tc.backlog, tc.pool)
			}
			if p := dp.RxPending(); p != 0 {
				t.Fatalf("RxPending %d before the delay: no frame has arrived on the delayed wire", p)
			}
			// One delay later, the loop drains in batches.
			now = int64(delay)
			if p, want := dp.RxPending(), min(tc.wantOut, rxBatch); p != want {
				t.Fatalf("RxPending %d one delay later, want %d (up to a batch)", p, want)
			}
			for k := 0; k < 10; k++ {
				if n, _ := dp.RecvFunc(64, count); n < 64 {
					break
				}
			}
			if got != tc.wantOut {
				t.Fatalf("%d frames reached the engine one delay after %d were waiting, want %d", got, tc.backlog, tc.wantOut)
			}
		})
	}
}
