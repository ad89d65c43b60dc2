package series

import (
	"math"
	"strings"
	"testing"
	"time"
)

func TestRate(t *testing.T) {
	var c Counters
	// 1000 bytes per ms on a, sampled every 3 ms with jitter; b sampled
	// every 2 ms at 500 bytes/ms and restarts (counter back to 0) at 10 ms.
	for _, tt := range []int64{0, 3, 6, 10, 13, 16, 19, 22} {
		c.Add(Sample{T: tt * 1e6, Source: "s", ID: "a", Values: map[string]float64{"tx": float64(tt) * 1000}})
	}
	for tt := int64(0); tt <= 22; tt += 2 {
		v := float64(tt) * 500
		if tt >= 10 {
			v = float64(tt-10) * 500
		}
		c.Add(Sample{T: tt * 1e6, Source: "s", ID: "b", Values: map[string]float64{"tx": v}})
	}
	s, err := c.Rate("sum", "B/s", []string{Key("s", "a", "tx"), Key("s", "b", "tx")}, 0, 20e6, 2*time.Millisecond, 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Points) != 10 {
		t.Fatalf("%d points, want 10", len(s.Points))
	}
	for _, p := range s.Points {
		want := 1.5e6 // bytes/s
		if p.T == 10*time.Millisecond {
			want = 1e6 // b went backwards in (8, 10]: counted as 0
		}
		if math.Abs(p.V-want) > 1 {
			t.Errorf("t=%v rate %v, want %v", p.T, p.V, want)
		}
	}
	if k := c.Keys("s", "tx"); len(k) != 2 || k[0] != "s:a/tx" || k[1] != "s:b/tx" {
		t.Errorf("keys %v", k)
	}
	if v := c.Values([]string{"s:a/tx"}, 5e6, 13e6); len(v) != 3 || v[0] != 6000 || v[2] != 13000 {
		t.Errorf("values %v", v)
	}
	if _, err := c.Rate("x", "", []string{"x:nope/tx"}, 0, 1e6, time.Millisecond, 1); err == nil || !strings.Contains(err.Error(), "x:nope/tx was not sampled") {
		t.Errorf("missing counter: %v", err)
	}
}

func TestStats(t *testing.T) {
	s := Series{}
	for i := 1; i <= 10; i++ {
		v := 10.0
		if i > 5 {
			v = float64(i)
		}
		s.Points = append(s.Points, Point{T: time.Duration(i) * time.Second, V: v})
	}
	if m := s.Mean(0, 5*time.Second); m != 10 {
		t.Errorf("mean %v", m)
	}
	if m := s.Mean(5*time.Second, 7*time.Second); m != 6.5 {
		t.Errorf("mean %v", m)
	}
	if !math.IsNaN(s.Mean(20*time.Second, 30*time.Second)) {
		t.Error("empty window is not NaN")
	}
	if m := s.Median(0, 7*time.Second); m != 10 {
		t.Errorf("median %v", m)
	}
	if m := s.Median(5*time.Second, 9*time.Second); m != 7.5 {
		t.Errorf("median %v", m)
	}
	if m := s.Min(0, 10*time.Second); m != 6 {
		t.Errorf("min %v", m)
	}
	if at, ok := s.FirstReach(5*time.Second, 8); !ok || at != 8*time.Second {
		t.Errorf("reach %v %v", at, ok)
	}
	if _, ok := s.FirstReach(0, 11); ok {
		t.Error("reached 11")
	}
	sm := s.Smooth(2)
	if sm.Points[0].V != 10 || sm.Points[5].V != 8 || sm.Points[6].V != 6.5 {
		t.Errorf("smooth %v", sm.Points)
	}
}

// TestGrowth: a QP's counter created at 100 ns, first sampled at 150 ns
// with 4 already counted (its first packets went before its first sample).
func TestGrowth(t *testing.T) {
	var c Counters
	for _, s := range []struct {
		t int64
		v float64
	}{{150, 4}, {250, 6}, {350, 10}} {
		c.Add(Sample{T: s.t, Source: "h0", Kind: "qp", ID: "0x0101", Values: map[string]float64{"losses": s.v}})
	}
	k := Key("h0", "0x0101", "losses")
	for _, tc := range []struct {
		name         string
		from, to     int64
		fromCreation bool
		want         float64
	}{
		{"from creation", 0, 400, true, 10},
		{"from creation, to mid-step", 0, 300, true, 8},
		{"from the first sample", 150, 400, false, 6},
		{"before the first sample: clamped, misses the first 4", 0, 400, false, 6},
		{"a window of one step", 250, 350, false, 4},
		{"ends before the object existed", 0, 100, true, 0},
	} {
		if g, ok := c.Growth(k, tc.from, tc.to, tc.fromCreation); !ok || g != tc.want {
			t.Errorf("%s: %v %v, want %v", tc.name, g, ok, tc.want)
		}
	}
	if _, ok := c.Growth(Key("h0", "0x0102", "losses"), 0, 400, true); ok {
		t.Error("a QP never sampled has a growth")
	}
	if ids := c.IDs("h0", "losses"); len(ids) != 1 || ids[0] != "0x0101" {
		t.Errorf("IDs %v", ids)
	}
}

// TestDrained: a modelled port at 8000 bit/s (1000 B/s) whose sender
// stalls, then sends a burst that the virtual queue admits at once. The
// admitted rate (Rate) shows the burst at 3× the capacity; the drained
// rate never exceeds the capacity and carries the same bytes once the
// queue is empty again.
func TestDrained(t *testing.T) {
	var c Counters
	sec := int64(time.Second)
	// t(s): admitted bytes, backlog. 0-1 s: 1000 B/s, queue empty; 1-2 s:
	// stall; 2-3 s: 3000 B admitted, 2000 of them queued; 3-4 s: 1000 B
	// more, the backlog stays; 4-6 s: the sender idles, the queue drains.
	for _, p := range []struct{ t, tx, q int64 }{{0, 0, 0}, {1, 1000, 0}, {2, 1000, 0}, {3, 4000, 2000}, {4, 5000, 2000}, {5, 5000, 1000}, {6, 5000, 0}} {
		c.Add(Sample{T: p.t * sec, Source: "sw", Kind: "swport", ID: "d0", Values: map[string]float64{"tx_bytes": float64(p.tx), "queue_bytes": float64(p.q)}})
	}
	port := Port{Tx: Key("sw", "d0", "tx_bytes"), Queue: Key("sw", "d0", "queue_bytes")}
	adm, err := c.Rate("a", "B/s", []string{port.Tx}, 0, 6*sec, time.Second, 1)
	if err != nil {
		t.Fatal(err)
	}
	dr, err := c.Drained("d", "B/s", []Port{port}, 0, 6*sec, time.Second, 1)
	if err != nil {
		t.Fatal(err)
	}
	wantAdm := []float64{1000, 0, 3000, 1000, 0, 0}
	wantDr := []float64{1000, 0, 1000, 1000, 1000, 1000}
	for i := range wantDr {
		if adm.Points[i].V != wantAdm[i] || dr.Points[i].V != wantDr[i] {
			t.Errorf("step %d: admitted %v drained %v, want %v %v", i, adm.Points[i].V, dr.Points[i].V, wantAdm[i], wantDr[i])
		}
	}
	if a, d := adm.Mean(0, 6*time.Second), dr.Mean(0, 6*time.Second); a != d {
		t.Errorf("over the whole run admitted %v and drained %v must agree (the queue is empty at both ends)", a, d)
	}
	// Without a queue gauge (no model) the drained rate is the admitted.
	plain, _ := c.Drained("p", "B/s", []Port{{Tx: port.Tx}}, 0, 6*sec, time.Second, 1)
	if plain.Points[2].V != 3000 {
		t.Errorf("no queue: %v", plain.Points[2].V)
	}
}
