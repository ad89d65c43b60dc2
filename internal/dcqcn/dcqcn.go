// Package dcqcn is DCQCN, the congestion control of RoCEv2 NICs (Zhu et al.,
// "Congestion Control for Large-Scale RDMA Deployments", SIGCOMM 2015), with
// the parameters NVIDIA/Mellanox ConnectX (mlx5) NICs ship with. It is pure
// and clock-injected: every call takes the current time in nanoseconds, and
// nothing here reads a clock, sleeps or does I/O.
//
// Three roles, as in the paper:
//
//   - the congestion point is the switch: it marks ECN CE (mrc-switchd does);
//   - the notification point (NP, the receiver) turns CE-marked data into
//     CNPs, at most one per MinCNPInterval per QP;
//   - the reaction point (RP, the sender) cuts its rate on a CNP and raises
//     it again with a timer and a byte counter: fast recovery, additive
//     increase, hyper increase.
//
// docs/roce.md lists the equations and every parameter with its source.
package dcqcn

import (
	"fmt"
	"math"
)

// Config holds the DCQCN parameters. Zero fields take the mlx5 defaults
// (Defaults; NVIDIA "DCQCN CC Parameters", ConnectX-4 and later).
type Config struct {
	// LineRate is the rate a QP starts at and never exceeds (rpg_max_rate =
	// 0 means the line rate), bits per second. Required.
	LineRate float64
	// MinRate is the floor (rpg_min_rate, 1 Mb/s).
	MinRate float64
	// AIRate and HAIRate are the additive and hyper increase steps of the
	// target rate (rpg_ai_rate 5 Mb/s, rpg_hai_rate 50 Mb/s).
	AIRate, HAIRate float64
	// TimeReset is the rate increase timer period (rpg_time_reset, 300 µs),
	// in ns.
	TimeReset int64
	// ByteReset is the byte counter period (rpg_byte_reset, 32767 bytes).
	ByteReset int64
	// Threshold is F, the number of timer or byte counter events spent in
	// fast recovery after a cut (rpg_threshold, 1).
	Threshold int
	// AlphaG is g of the α update in 1/1024 (dce_tcp_g, 1019): every
	// AlphaPeriod α ← α·g/1024 + (1 − g/1024) if a CNP arrived in the
	// period, else α ← α·g/1024.
	AlphaG int
	// AlphaPeriod is the α update period (dce_tcp_rtt, 1 µs), in ns.
	AlphaPeriod int64
	// InitialAlpha is α before the first CNP, in 1/1024 (initial_alpha_value,
	// 1023).
	InitialAlpha int
	// GD is log2 of the α-to-cut divisor (rpg_gd, 11): a cut multiplies the
	// rate by 1 − α·1024/2^GD, which at 11 is the paper's 1 − α/2.
	GD int
	// MinDecFac bounds one cut: the rate keeps at least this percentage
	// (rpg_min_dec_fac, 50).
	MinDecFac int
	// ReduceMonitorPeriod is the least time between two cuts
	// (rate_reduce_monitor_period, 4 µs), in ns: CNPs inside it are merged
	// into one cut at its end.
	ReduceMonitorPeriod int64
	// MinCNPInterval is the NP's least time between two CNPs of one QP
	// (min_time_between_cnps, 4 µs), in ns.
	MinCNPInterval int64
	// TargetOnTimerIncrease is mlx5's default target rule
	// (rp_clamp_tgt_rate 0, rp_clamp_tgt_rate_ati 1): a cut sets RT ← RC
	// only when the increase timer fired since the previous cut, so a burst
	// of CNPs closer together than TimeReset cuts RC again and again but
	// leaves RT at the rate before the burst, and fast recovery returns to
	// it. false is the paper's rule, RT ← RC on every cut (mlx5's
	// rp_clamp_tgt_rate 1), which the RoCE baseline uses: docs/roce.md says
	// why and what mlx5's rule does on S7.
	TargetOnTimerIncrease bool
}

// Defaults are the mlx5 defaults, LineRate left for the caller.
var Defaults = Config{
	MinRate:             1e6,
	AIRate:              5e6,
	HAIRate:             50e6,
	TimeReset:           300_000,
	ByteReset:           32767,
	Threshold:           1,
	AlphaG:              1019,
	AlphaPeriod:         1_000,
	InitialAlpha:        1023,
	GD:                  11,
	MinDecFac:           50,
	ReduceMonitorPeriod: 4_000,
	MinCNPInterval:      4_000,
}

// WithDefaults fills the zero fields of c from Defaults and checks it.
func (c Config) WithDefaults() (Config, error) {
	c = c.filled()
	return c, c.check()
}

// Scaled is c (zero fields from Defaults) slowed down k times: every period
// (α update, rate monitor, increase timer, CNP interval) k times longer and
// every rate step (additive, hyper, minimum) k times smaller; the byte
// counter is kept, since at a k times lower line rate it already takes k
// times longer. A fabric emulated at 1/k of a real one's speed (1 Gb/s
// links for 100 Gb/s ones, round trips k times longer) then sees the DCQCN
// dynamics of the real one, in its own time. k <= 0 means 1.
func (c Config) Scaled(k float64) Config {
	c = c.filled()
	if k <= 0 || k == 1 {
		return c
	}
	scaleT := func(v int64) int64 { return int64(math.Round(float64(v) * k)) }
	c.AlphaPeriod, c.ReduceMonitorPeriod = scaleT(c.AlphaPeriod), scaleT(c.ReduceMonitorPeriod)
	c.TimeReset, c.MinCNPInterval = scaleT(c.TimeReset), scaleT(c.MinCNPInterval)
	c.MinRate, c.AIRate, c.HAIRate = c.MinRate/k, c.AIRate/k, c.HAIRate/k
	return c
}

// filled returns c with its zero fields from Defaults (LineRate excepted).
func (c Config) filled() Config {
	d := Defaults
	if c.MinRate == 0 {
		c.MinRate = d.MinRate
	}
	if c.AIRate == 0 {
		c.AIRate = d.AIRate
	}
	if c.HAIRate == 0 {
		c.HAIRate = d.HAIRate
	}
	if c.TimeReset == 0 {
		c.TimeReset = d.TimeReset
	}
	if c.ByteReset == 0 {
		c.ByteReset = d.ByteReset
	}
	if c.Threshold == 0 {
		c.Threshold = d.Threshold
	}
	if c.AlphaG == 0 {
		c.AlphaG = d.AlphaG
	}
	if c.AlphaPeriod == 0 {
		c.AlphaPeriod = d.AlphaPeriod
	}
	if c.InitialAlpha == 0 {
		c.InitialAlpha = d.InitialAlpha
	}
	if c.GD == 0 {
		c.GD = d.GD
	}
	if c.MinDecFac == 0 {
		c.MinDecFac = d.MinDecFac
	}
	if c.ReduceMonitorPeriod == 0 {
		c.ReduceMonitorPeriod = d.ReduceMonitorPeriod
	}
	if c.MinCNPInterval == 0 {
		c.MinCNPInterval = d.MinCNPInterval
	}
	return c
}

func (c Config) check() error {
	switch {
	case !(c.LineRate > 0) || math.IsInf(c.LineRate, 0):
		return fmt.Errorf("dcqcn: line rate %v b/s: want a positive finite rate", c.LineRate)
	case c.MinRate > c.LineRate:
		return fmt.Errorf("dcqcn: min rate %v above the line rate %v", c.MinRate, c.LineRate)
	case c.AlphaG < 0 || c.AlphaG > 1024:
		return fmt.Errorf("dcqcn: dce_tcp_g %d: want 0..1024", c.AlphaG)
	case c.InitialAlpha < 0 || c.InitialAlpha > 1024:
		return fmt.Errorf("dcqcn: initial alpha %d: want 0..1024", c.InitialAlpha)
	case c.GD < 10 || c.GD > 30:
		return fmt.Errorf("dcqcn: rpg_gd %d: want 10..30 (10 lets one cut stop a flow)", c.GD)
	case c.MinDecFac < 0 || c.MinDecFac > 100:
		return fmt.Errorf("dcqcn: rpg_min_dec_fac %d: want 0..100", c.MinDecFac)
	case c.TimeReset < 0 || c.ByteReset < 0 || c.AlphaPeriod < 0 || c.ReduceMonitorPeriod < 0 || c.MinCNPInterval < 0 || c.Threshold < 0:
		return fmt.Errorf("dcqcn: negative period, byte count or threshold in %+v", c)
	}
	return nil
}

// Stage says which increase rule an event applied.
type Stage uint8

// Increase stages.
const (
	FastRecovery Stage = iota
	AdditiveIncrease
	HyperIncrease
)

func (s Stage) String() string {
	return [...]string{"fast-recovery", "additive", "hyper", "?"}[min(int(s), 3)]
}

// Counters count what an RP did.
type Counters struct {
	CNPs      uint64 // CNPs received
	Cuts      uint64 // rate decreases (CNPs merged per ReduceMonitorPeriod)
	Increases [3]uint64
}

// RP is the reaction point of one QP: its current rate RC, target rate RT,
// α, and the increase state. It also paces: NextSend is when the QP's next
// packet may leave at rate RC.
type RP struct {
	c Config

	rc, rt float64 // current and target rate, b/s
	alpha  float64 // 0..1

	// α update grid: ticks at alphaAt, alphaAt+AlphaPeriod, ...
	alphaAt  int64
	cnpInPer bool // a CNP arrived since the last α tick

	// rate decrease: at most one cut per ReduceMonitorPeriod
	lastCut    int64
	everCut    bool
	cutPending bool

	// rate increase: timer and byte counter, and their stage counts since
	// the last cut (T and BC in the paper)
	incAt   int64
	bytes   int64
	tStage  int
	bcStage int

	nextSend int64
	cnt      Counters
}

// NewRP returns an RP at line rate at time now.
func NewRP(c Config, now int64) (*RP, error) {
	c, err := c.WithDefaults()
	if err != nil {
		return nil, err
	}
	r := &RP{c: c, rc: c.LineRate, rt: c.LineRate, alpha: float64(c.InitialAlpha) / 1024,
		alphaAt: now + c.AlphaPeriod, incAt: now + c.TimeReset, nextSend: now}
	return r, nil
}

// Config returns the parameters in use (defaults filled in).
func (r *RP) Config() Config { return r.c }

// Rate is the current rate RC after processing the timers up to now.
func (r *RP) Rate(now int64) float64 { r.Advance(now); return r.rc }

// Target is the target rate RT after processing the timers up to now.
func (r *RP) Target(now int64) float64 { r.Advance(now); return r.rt }

// Alpha is α after processing the timers up to now.
func (r *RP) Alpha(now int64) float64 { r.Advance(now); return r.alpha }

// Counters returns the event counts.
func (r *RP) Counters() Counters { return r.cnt }

// OnCNP handles a CNP received at now: the rate is cut at once, or at the
// end of the current ReduceMonitorPeriod when a cut happened within it.
func (r *RP) OnCNP(now int64) {
	r.Advance(now)
	r.cnt.CNPs++
	r.cnpInPer = true
	if !r.everCut || now-r.lastCut >= r.c.ReduceMonitorPeriod {
		r.cut(now)
		return
	}
	r.cutPending = true
}

// cut is the rate decrease (paper eq. 1, with mlx5's rpg_gd and
// rpg_min_dec_fac): RT ← RC; RC ← RC·max(1 − α·1024/2^GD, MinDecFac%).
// With TargetOnTimerIncrease, RT ← RC only after a timer increase since
// the last cut (before the first cut RT = RC anyway). The increase state
// restarts.
func (r *RP) cut(now int64) {
	f := 1 - r.alpha*1024/float64(int64(1)<<r.c.GD)
	f = max(f, float64(r.c.MinDecFac)/100)
	if !r.c.TargetOnTimerIncrease || r.tStage > 0 || !r.everCut {
		r.rt = r.rc
	}
	r.rc = max(r.rc*f, r.c.MinRate)
	r.lastCut, r.everCut, r.cutPending = now, true, false
	r.incAt = now + r.c.TimeReset
	r.bytes, r.tStage, r.bcStage = 0, 0, 0
	r.cnt.Cuts++
}

// OnSend records n bytes sent at now (the byte counter) and advances the
// pacer: the next packet may leave n·8/RC seconds after this one.
func (r *RP) OnSend(now int64, n int) {
	r.Advance(now)
	start := max(now, r.nextSend)
	r.nextSend = start + int64(math.Ceil(float64(n)*8e9/r.rc))
	if r.c.ByteReset <= 0 {
		return
	}
	r.bytes += int64(n)
	for r.bytes >= r.c.ByteReset {
		r.bytes -= r.c.ByteReset
		r.bcStage++
		r.increase()
	}
}

// NextSend is the earliest time the pacer lets the next packet go.
func (r *RP) NextSend() int64 { return r.nextSend }

// Ready reports whether a packet may be sent at now.
func (r *RP) Ready(now int64) bool { return now >= r.nextSend }

// Idle tells the pacer the QP had nothing to send: credit does not
// accumulate over idle time (a paced NIC does not burst after a pause).
func (r *RP) Idle(now int64) {
	if r.nextSend < now {
		r.nextSend = now
	}
}

// increase applies one increase event (timer or byte counter; the firing
// counter already incremented). With F = Threshold: fast recovery while
// max(T, BC) ≤ F, hyper increase once min(T, BC) > F (step HAIRate·(min −
// F)), additive increase in between; then RC ← (RT + RC)/2 (paper §3.1).
func (r *RP) increase() {
	f := r.c.Threshold
	hi, lo := max(r.tStage, r.bcStage), min(r.tStage, r.bcStage)
	var s Stage
	switch {
	case hi <= f:
		s = FastRecovery
	case lo > f:
		s = HyperIncrease
		r.rt += r.c.HAIRate * float64(lo-f)
	default:
		s = AdditiveIncrease
		r.rt += r.c.AIRate
	}
	r.rt = min(r.rt, r.c.LineRate)
	r.rc = min((r.rt+r.rc)/2, r.c.LineRate)
	r.cnt.Increases[s]++
}

// Advance processes the α ticks, a pending cut and the increase timer up to
// now, in time order.
func (r *RP) Advance(now int64) {
	for {
		next, ev := r.incAt, 0
		if r.c.TimeReset <= 0 {
			next = math.MaxInt64
		}
		if r.cutPending {
			if at := r.lastCut + r.c.ReduceMonitorPeriod; at <= next {
				next, ev = at, 1
			}
		}
		if next > now {
			r.alphaTo(now)
			return
		}
		r.alphaTo(next)
		if ev == 1 {
			r.cut(next)
			continue
		}
		r.incAt += r.c.TimeReset
		if r.rc >= r.c.LineRate && r.rt >= r.c.LineRate {
			// At line rate nothing more can happen until a CNP: skip
			// the remaining timer events in one step.
			if now >= r.incAt {
				k := (now-r.incAt)/r.c.TimeReset + 1
				r.incAt += k * r.c.TimeReset
			}
			continue
		}
		r.tStage++
		r.increase()
	}
}

// alphaTo applies the α ticks at or before t: the first after a CNP raises
// α, the others decay it (closed form, so a long idle costs nothing).
func (r *RP) alphaTo(t int64) {
	if r.c.AlphaPeriod <= 0 || t < r.alphaAt {
		return
	}
	k := (t-r.alphaAt)/r.c.AlphaPeriod + 1
	r.alphaAt += k * r.c.AlphaPeriod
	g := float64(r.c.AlphaG) / 1024
	if r.cnpInPer {
		r.alpha = g*r.alpha + (1 - g)
		r.cnpInPer = false
		k--
	}
	if k > 0 {
		r.alpha *= math.Pow(g, float64(k))
	}
}

// NP is the notification point of one QP: it decides which CE-marked
// packets produce a CNP.
type NP struct {
	// Interval is the least time between two CNPs (MinCNPInterval).
	Interval int64
	last     int64
	sent     bool
}

// OnCE reports whether a CE-marked packet arriving at now produces a CNP.
func (n *NP) OnCE(now int64) bool {
	if n.sent && now-n.last < n.Interval {
		return false
	}
	n.last, n.sent = now, true
	return true
}
