package dcqcn

import (
	"math"
	"testing"
)

const us = 1000 // ns

func near(got, want float64) bool {
	return math.Abs(got-want) <= 1e-9*math.Max(1, math.Abs(want))
}

// TestRPRateTable drives one RP through a scripted CNP and send sequence at
// the mlx5 defaults on a 10 Gb/s line and checks RC, RT and α after each
// step against values computed by hand from the equations (docs/roce.md):
//
//	α tick (every 1 µs):   α ← g·α + (1−g) if a CNP came in the period, else g·α; g = 1019/1024
//	cut:                   RT ← RC; RC ← RC·(1 − α/2)   (rpg_gd = 11)
//	fast recovery:         RC ← (RT + RC)/2
//	additive increase:     RT ← RT + 5 Mb/s;  RC ← (RT + RC)/2
//	hyper increase:        RT ← RT + 50 Mb/s·(min(T,BC) − F); RC ← (RT + RC)/2
//
// The expected numbers were computed with a separate few-line script of
// these equations (they are not read back from the code).
func TestRPRateTable(t *testing.T) {
	rp, err := NewRP(Config{LineRate: 10e9}, 0)
	if err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		what   string
		at     int64 // µs
		cnp    bool
		send   int // bytes sent at once
		rc, rt float64
		alpha  float64 // 0: not checked
	}{
		{what: "line rate before any CNP", at: 5, rc: 10e9, rt: 10e9},
		// α decayed over 10 ticks from 1023/1024, then the first cut.
		{what: "first CNP cuts by α/2", at: 10, cnp: true, rc: 5243495027.768169, rt: 10e9, alpha: 0.9513009944463662},
		// Inside the 4 µs rate_reduce_monitor_period: the cut waits.
		{what: "second CNP inside the monitor period", at: 12, cnp: true, rc: 5243495027.768169, rt: 10e9},
		{what: "still waiting at 13 µs", at: 13, rc: 5243495027.768169, rt: 10e9},
		{what: "merged cut at the period's end", at: 14, rc: 2772426827.5474067, rt: 5243495027.768169, alpha: 0.9425271454000188},
		{what: "before the first timer event", at: 313, rc: 2772426827.5474067, rt: 5243495027.768169},
		{what: "timer T=1 <= F: fast recovery", at: 314, rc: 4007960927.6577883, rt: 5243495027.768169},
		{what: "timer T=2 > F, BC=0: additive", at: 614, rc: 4628227977.712978, rt: 5248495027.768169},
		{what: "timer T=3: additive", at: 914, rc: 4940861502.740574, rt: 5253495027.768169, alpha: 0},
		// Three byte-counter events at once: BC=1 additive, BC=2 and 3 hyper.
		{what: "byte counter: additive, hyper x1, hyper x2", at: 1000, send: 3 * 32767, rc: 5306290837.13972, rt: 5408495027.768169, alpha: 0.007555827780317662},
	}
	for _, s := range steps {
		now := s.at * us
		if s.cnp {
			rp.OnCNP(now)
		}
		if s.send > 0 {
			rp.OnSend(now, s.send)
		}
		rc, rt, a := rp.Rate(now), rp.Target(now), rp.Alpha(now)
		if !near(rc, s.rc) || !near(rt, s.rt) || (s.alpha != 0 && !near(a, s.alpha)) {
			t.Fatalf("%s (t=%d µs): RC %.6f RT %.6f α %.12f; want RC %.6f RT %.6f α %.12f",
				s.what, s.at, rc, rt, a, s.rc, s.rt, s.alpha)
		}
	}
	c := rp.Counters()
	if c.CNPs != 2 || c.Cuts != 2 || c.Increases != [3]uint64{1, 3, 2} {
		t.Fatalf("counters %+v, want 2 CNPs, 2 cuts, increases FR 1, AI 3, HAI 2", c)
	}
}

// TestRPRecoversToLineRate: without CNPs the timer alone brings the rate
// back to the line rate and keeps it there (no overshoot), and a long idle
// is processed in closed form.
func TestRPRecoversToLineRate(t *testing.T) {
	rp, _ := NewRP(Config{LineRate: 1e9}, 0)
	rp.OnCNP(0)
	if got := rp.Rate(0); !near(got, 1e9*(1-1023.0/2048)) {
		t.Fatalf("rate after the first CNP %v", got)
	}
	prev := rp.Rate(0)
	for ms := int64(1); ms <= 200; ms++ {
		r := rp.Rate(ms * 1_000_000)
		if r < prev || r > 1e9 {
			t.Fatalf("at %d ms rate %v after %v: must rise monotonically up to the line rate", ms, r, prev)
		}
		prev = r
	}
	if prev != 1e9 {
		t.Fatalf("after 200 ms without CNPs the rate is %v, want the line rate", prev)
	}
	if a := rp.Alpha(3_600_000_000_000); a > 1e-300 {
		t.Fatalf("α after an hour idle %v, want ~0", a)
	}
}

func TestPacer(t *testing.T) {
	rp, _ := NewRP(Config{LineRate: 8e9}, 0) // 1 byte per ns
	for _, s := range []struct {
		at, n    int64
		wantNext int64
	}{
		{0, 1000, 1000},   // back-to-back from now
		{0, 1000, 2000},   // queued behind the first
		{5000, 500, 5500}, // idle gap: no credit carried
	} {
		if s.at < rp.NextSend() && rp.Ready(s.at) {
			t.Fatalf("Ready(%d) with next send %d", s.at, rp.NextSend())
		}
		rp.OnSend(s.at, int(s.n))
		if rp.NextSend() != s.wantNext {
			t.Fatalf("after %d bytes at %d: next send %d, want %d", s.n, s.at, rp.NextSend(), s.wantNext)
		}
	}
	// The cut at 6 µs: α decayed over 6 ticks, rate 8 Gb/s·(1 − α/2).
	rp.OnCNP(6000)
	rp.OnSend(6000, 1000)
	alpha := 1023.0 / 1024 * math.Pow(1019.0/1024, 6)
	want := int64(math.Ceil(8000 / (8 * (1 - alpha/2))))
	if got := rp.NextSend() - 6000; got != want {
		t.Fatalf("1000 bytes after a cut take %d ns, want %d", got, want)
	}
}

func TestNPInterval(t *testing.T) {
	np := NP{Interval: 4 * us}
	for _, s := range []struct {
		at   int64
		want bool
	}{{0, true}, {1 * us, false}, {3999, false}, {4 * us, true}, {5 * us, false}, {100 * us, true}} {
		if got := np.OnCE(s.at); got != s.want {
			t.Fatalf("CE at %d ns: CNP %v, want %v", s.at, got, s.want)
		}
	}
}

func TestConfigErrors(t *testing.T) {
	for _, c := range []Config{{}, {LineRate: -1}, {LineRate: 1e9, MinRate: 2e9}, {LineRate: 1e9, GD: 5}, {LineRate: 1e9, AlphaG: 2000}} {
		if _, err := NewRP(c, 0); err == nil {
			t.Errorf("config %+v accepted", c)
		}
	}
}

// TestScaled: a run at 1/k of the speed with Scaled(k) is the same run,
// k times slower: the rates relative to the line rate at time k·t equal
// those of the unscaled run at t.
func TestScaled(t *testing.T) {
	const k = 100
	fast, _ := NewRP(Config{LineRate: 100e9}, 0)
	slow, _ := NewRP(Config{LineRate: 1e9}.Scaled(k), 0)
	if c := slow.Config(); c.TimeReset != 30_000_000 || c.AIRate != 50e3 || c.ByteReset != 32767 || c.MinCNPInterval != 400_000 {
		t.Fatalf("Scaled(100): %+v", c)
	}
	// The same script: CNPs at 10, 12, 30 µs, then 2 ms of recovery;
	// no bytes sent (the byte counter is scale-free only with traffic).
	for _, at := range []int64{10, 12, 30, 500, 2000} {
		if at <= 30 {
			fast.OnCNP(at * us)
			slow.OnCNP(at * us * k)
		}
		f, s := fast.Rate(at*us)/100e9, slow.Rate(at*us*k)/1e9
		if math.Abs(f-s) > 1e-9 {
			t.Fatalf("at %d µs (x%d): rate/line %v unscaled, %v scaled", at, k, f, s)
		}
	}
	if c := (Config{}).Scaled(0); c != Defaults {
		t.Fatalf("Scaled(0) = %+v, want the defaults", c)
	}
}

// TestRPTargetOnTimerIncrease: mlx5's target rule (rp_clamp_tgt_rate 0,
// rp_clamp_tgt_rate_ati 1) against the paper's, on one scripted CNP
// sequence at the mlx5 defaults on a 10 Gb/s line. A cut moves RT to RC
// only when the increase timer fired since the previous cut: the merged
// cut at 14 µs (no timer since the cut at 10 µs) leaves RT at the line
// rate, the cut at 400 µs (after the timer's fast recovery at 314 µs)
// moves it, the merged cut at 404 µs does not. The expected values come
// from a separate few-line script of the equations (as TestRPRateTable's).
func TestRPTargetOnTimerIncrease(t *testing.T) {
	type step struct {
		what   string
		at     int64 // µs
		cnp    bool
		rc, rt float64
	}
	for _, tc := range []struct {
		name  string
		mlx5  bool
		steps []step
	}{
		{"mlx5: RT only after a timer increase", true, []step{
			{what: "first CNP", at: 10, cnp: true, rc: 5243495027.768169, rt: 10e9},
			{what: "second CNP, merged", at: 12, cnp: true, rc: 5243495027.768169, rt: 10e9},
			{what: "merged cut, no timer since: RT kept", at: 14, rc: 2772426827.5474067, rt: 10e9},
			{what: "timer: fast recovery towards the kept RT", at: 314, rc: 6386213413.773704, rt: 10e9},
			{what: "cut after a timer increase: RT ← RC", at: 400, cnp: true, rc: 5931268239.69689, rt: 6386213413.773704},
			{what: "CNP inside the monitor period", at: 402, cnp: true, rc: 5931268239.69689, rt: 6386213413.773704},
			{what: "merged cut: RT kept", at: 404, rc: 5488245661.139657, rt: 6386213413.773704},
			{what: "timer: fast recovery", at: 704, rc: 5937229537.45668, rt: 6386213413.773704},
		}},
		{"paper: RT on every cut", false, []step{
			{what: "first CNP", at: 10, cnp: true, rc: 5243495027.768169, rt: 10e9},
			{what: "second CNP, merged", at: 12, cnp: true, rc: 5243495027.768169, rt: 10e9},
			{what: "merged cut: RT ← RC", at: 14, rc: 2772426827.5474067, rt: 5243495027.768169},
			{what: "timer: fast recovery", at: 314, rc: 4007960927.6577883, rt: 5243495027.768169},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rp, err := NewRP(Config{LineRate: 10e9, TargetOnTimerIncrease: tc.mlx5}, 0)
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range tc.steps {
				now := s.at * us
				if s.cnp {
					rp.OnCNP(now)
				}
				if rc, rt := rp.Rate(now), rp.Target(now); !near(rc, s.rc) || !near(rt, s.rt) {
					t.Fatalf("%s (t=%d µs): RC %.6f RT %.6f; want RC %.6f RT %.6f", s.what, s.at, rc, rt, s.rc, s.rt)
				}
			}
		})
	}
}
