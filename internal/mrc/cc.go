package mrc

import "cmp"

// Congestion control in the spirit of UET NSCC (MRC-PUBLIC-FACTS §1.15): a
// sender-side window in bytes per destination, clocked by acknowledged bytes,
// steered by the ECN echo of the triggering packet and by the queueing delay
// (RTT above the lowest RTT seen) against a target:
//
//	no ECN, delay < target  -> proportional increase (faster the emptier the queue):
//	                           multiplicative in the start phase (until the first
//	                           congestion signal), additive (PropInc MTU per RTT ×
//	                           headroom) after it, so that competing flows converge
//	                           to a fair share (AIMD) instead of the largest one
//	                           growing fastest
//	no ECN, delay >= target -> fair increase (+FairInc MTU per RTT)
//	ECN,    delay >= target -> multiplicative decrease, at most once per RTT
//	ECN,    delay < target  -> hold (ECN here is a load-balancing hint: the EV goes SKIP)
//
// A trim (NACK TRIMMED or TRIMMED_LASTHOP) is congestion too: the window is
// multiplied by TrimDecrease (LastHopDecrease), at most once per RTT; the
// first TRIMMED_LASTHOP after a quiet spell caps it at the delivery rate ×
// base RTT instead (onTrim). Untrimmed loss is not congestion (it is a
// broken path) and leaves the window alone.
//
// While receiver-limited the window may fall below one packet (minCwnd);
// it is then a paced rate (sent), grows by at most subMTUInc per byte
// acknowledged and is cut by the recently marked share (docs/engine.md,
// "Below one packet").

func (c *CCConfig) setDefaults(mtu int) {
	c.InitCwnd = cmp.Or(c.InitCwnd, 64*mtu)
	c.MinCwnd = cmp.Or(c.MinCwnd, mtu)
	c.TargetQDelay = cmp.Or(c.TargetQDelay, DefaultTargetQDelay)
	c.PropGain = cmp.Or(c.PropGain, 0.5)
	c.PropInc = cmp.Or(c.PropInc, 8)
	c.FairInc = cmp.Or(c.FairInc, 1)
	c.MDGain = cmp.Or(c.MDGain, 0.5)
	c.MDFloor = cmp.Or(c.MDFloor, 0.5)
	c.TrimDecrease = cmp.Or(c.TrimDecrease, 1)
	c.LastHopDecrease = cmp.Or(c.LastHopDecrease, 0.7)
	c.LastHopInc = cmp.Or(c.LastHopInc, 1)
	c.LastHopHold = cmp.Or(c.LastHopHold, 128)
}

type ccState struct {
	cfg      *CCConfig
	mtu      int
	started  bool // the start phase is over (a congestion signal was seen)
	cwnd     float64
	maxCwnd  float64
	inflight int
	baseRTT  Time
	lastDec  Time
	lastTrim Time
	lastHop  Time // latest TRIMMED_LASTHOP NACK (receiver-limited until LastHopHold RTTs after it)
	// Delivery rate: bytes acknowledged per ns over the last complete
	// measuring interval (one srtt long), for the last-hop cap.
	dlvBytes int
	dlvStart Time
	dlvRate  float64
	dlvOn    bool
	// dlvFull: the window was full at some send of the interval in
	// progress (window-limited, not application-limited: sent).
	dlvFull bool
	// nextSend paces a window below one packet (sent): no packet leaves
	// before it.
	nextSend Time
	// marked is the EWMA (gain markGain per acknowledgement) of the share
	// of acknowledgements that echoed a CE mark: the decrease below one
	// packet (onAck).
	marked float64
}

// deliveryRate is the latest measured rate, or the rate over the interval
// in progress when no interval has completed yet (the first RTT of a flow).
func (c *ccState) deliveryRate(now Time) float64 {
	if c.dlvRate > 0 {
		return c.dlvRate
	}
	if c.dlvOn && now > c.dlvStart && c.dlvBytes > 0 {
		return float64(c.dlvBytes) / float64(now-c.dlvStart)
	}
	return 0
}

func (c *ccState) init(cfg *CCConfig, mtu int) {
	c.cfg, c.mtu = cfg, mtu
	c.cwnd = float64(cfg.InitCwnd)
	c.maxCwnd = float64(cfg.MaxCwnd)
}

// setMax raises the ceiling to a QP's window (MaxCwnd default: Window×MTU).
func (c *ccState) setMax(window int) {
	if c.cfg.MaxCwnd == 0 {
		if m := float64(window * c.mtu); m > c.maxCwnd {
			c.maxCwnd = m
		}
	}
}

// canSend reports whether a packet of n bytes may leave at now: it fits
// the window, or nothing is in flight and the pacer of a window below one
// packet (sent) allows it.
func (c *ccState) canSend(now Time, n int) bool {
	return c.windowOpen(n) && (c.inflight > 0 || now >= c.nextSend)
}

// windowOpen is canSend without the pacer (whose time the deadline
// computation folds in from nextSend).
func (c *ccState) windowOpen(n int) bool {
	return c.inflight == 0 || float64(c.inflight+n) <= c.cwnd
}

// sent accounts a packet of n bytes sent at now. A window below the packet
// (cwnd < n) goes out as one packet every baseRTT·n/cwnd: the rate
// cwnd/baseRTT the window stands for. Why: a window is enforced only while something is
// in flight, so without the pacer a sender sends at least one packet per
// RTT. Where the RTT is tens of µs and the bottleneck a few Mbit/s (the
// netns testbed's port models add no queueing delay, docs/engine.md) one
// packet per RTT is several times a flow's share, and no congestion signal
// could slow it down (mrc-lab S8: seven incast senders at their NIC rate).
//
// The RTT it paces on is the base RTT (srtt until there is one), as the
// last-hop cap's window (delivery rate × base RTT) is: a rate the
// scheduling noise in the RTT samples does not move.
func (c *ccState) sent(now Time, n int, srtt Time) {
	c.inflight += n
	if float64(c.inflight) >= c.cwnd-float64(c.mtu) {
		c.dlvFull = true
	}
	rtt := cmp.Or(c.baseRTT, srtt)
	if c.cfg.Disable || rtt <= 0 || float64(n) <= c.cwnd {
		return
	}
	c.nextSend = now + Time(float64(rtt)*float64(n)/c.cwnd)
}

func (c *ccState) clamp(now, srtt Time) {
	if m := c.minCwnd(now, srtt); c.cwnd < m {
		c.cwnd = m
	}
	if c.maxCwnd > 0 && c.cwnd > c.maxCwnd {
		c.cwnd = c.maxCwnd
	}
}

// minCwnd is the window's floor: MinCwnd, or MTU/lastHopMinDiv while
// receiver-limited (when that is lower). Why only then: in an N:1 incast
// each sender's share of the receiver's downlink can be a fraction of one
// packet per RTT (mrc-lab S8 on the netns testbed: 14 Mbit/s each at an RTT
// of tens of µs), so a floor of one packet per RTT overfills the downlink
// N-fold whatever the marks and trims say, and the excess crosses the
// fabric beside other flows. Elsewhere a window below one packet starved
// a flow that shared a marked link with a multipath one (mrc-lab S6 on the
// testbed: 0.05 of the link), because per-destination marks count only on
// the shared path's share of the multipath flow's packets.
func (c *ccState) minCwnd(now, srtt Time) float64 {
	m := float64(c.cfg.MinCwnd)
	if c.receiverLimited(now, srtt) {
		m = min(m, float64(max(c.mtu/lastHopMinDiv, 1)))
	}
	return m
}

// receiverLimited reports whether the destination's own downlink trimmed a
// packet of ours in the last LastHopHold RTTs: an incast, where the receiver's
// link and not the fabric is the bottleneck.
func (c *ccState) receiverLimited(now, srtt Time) bool {
	return c.lastHop > 0 && now-c.lastHop < srtt*Time(c.cfg.LastHopHold)
}

// onAck applies one SACK: acked newly acknowledged bytes, ecn whether the
// triggering packet was CE-marked, rtt the sample (0 if none), srtt the
// smoothed RTT for the once-per-RTT limits.
func (c *ccState) onAck(now Time, acked int, ecn bool, rtt, srtt Time) {
	if c.cfg.Disable {
		return
	}
	if rtt > 0 && (c.baseRTT == 0 || rtt < c.baseRTT) {
		c.baseRTT = rtt
	}
	// Only acknowledged data clocks the delivery rate. A SACK that
	// acknowledges nothing (a probe's answer, on any QP to this peer:
	// the state is the peer's) started and closed intervals too: the rate
	// then covered time before the data began, and an S7 all-to-all QP
	// entering receiver-limited mode was capped at 2-20 % of its share
	// (TestDeliveryRateIgnoresEmptyAcks).
	switch {
	case acked == 0:
	case !c.dlvOn:
		c.dlvOn, c.dlvStart = true, now
	default:
		c.dlvBytes += acked
	}
	if acked > 0 && srtt > 0 && now-c.dlvStart >= srtt {
		// An interval stretched by an idle spell says nothing about what
		// the receiver takes: keep the previous rate.
		//
		// An interval in which the window was never full measured the
		// application (a collective between its steps, a message's
		// tail), not the path: it may raise the rate, never lower it, as
		// in delivery rate estimation's app-limited samples (Cheng et
		// al., draft-cheng-iccrg-delivery-rate-estimation). Lowered by
		// such samples, the last-hop cap cut S7 all-to-all QPs from
		// 28 KB to 200-400 B, where the increase below one packet held
		// them for 1.4 s (TestDeliveryRateAppLimited).
		if now-c.dlvStart <= 4*srtt {
			if r := float64(c.dlvBytes) / float64(now-c.dlvStart); c.dlvFull || r > c.dlvRate {
				c.dlvRate = r
			}
		}
		c.dlvBytes, c.dlvStart, c.dlvFull = 0, now, false
	}
	if acked > 0 {
		m := 0.0
		if ecn {
			m = 1
		}
		c.marked += markGain * (m - c.marked)
	}
	if rtt == 0 {
		rtt = srtt
	}
	if rtt == 0 || c.baseRTT == 0 {
		return
	}
	delay := rtt - c.baseRTT
	target := c.cfg.TargetQDelay
	before := c.cwnd
	switch {
	case !ecn && delay < target:
		if acked > 0 {
			head := float64(target-delay) / float64(target)
			switch {
			case c.receiverLimited(now, srtt):
				// The queue that matters is the receiver's downlink, which
				// no switch marks and whose delay the trims cap: a
				// proportional increase by each of N senders refills it N
				// times as fast as it drains (docs/engine.md, incast).
				c.cwnd += c.cfg.LastHopInc * float64(c.mtu) * float64(acked) / c.cwnd
			case c.started:
				c.cwnd += c.cfg.PropInc * float64(c.mtu) * float64(acked) / c.cwnd * head
			default:
				c.cwnd += float64(acked) * c.cfg.PropGain * head
			}
		}
	case !ecn:
		if acked > 0 {
			c.cwnd += c.cfg.FairInc * float64(c.mtu) * float64(acked) / c.cwnd
		}
	case delay >= target:
		c.started = true
		if now-c.lastDec >= srtt {
			f := 1 - c.cfg.MDGain*float64(delay-target)/float64(delay)
			if c.cwnd < float64(c.mtu) {
				// Below one packet each packet is an RTT or more apart,
				// so once per RTT is every marked packet, while the queue
				// that marks them drains for many RTTs: cut by the
				// share of packets marked lately instead, as DCTCP does.
				f = 1 - c.cfg.MDGain*c.marked
			}
			c.cwnd *= max(f, c.cfg.MDFloor)
			c.lastDec = now
		}
	}
	if before < float64(c.mtu) && c.cwnd > before {
		// Below one packet the increases above, per MTU of window, would
		// add many packets per acknowledgement (one arrives every
		// MTU/cwnd RTTs): add at most subMTUInc per byte acknowledged
		// instead, the same for every sender, so that senders marked
		// alike converge to the same window (AIMD per packet).
		//
		// From a quarter packet up the bound rises as (cwnd/MTU)^4 to
		// the whole increase at one packet, where the window rule takes
		// over. A flat 1/256 up to one packet and a packet per RTT above
		// it trapped a sender just below: in an S8 incast (7 senders,
		// 7 Mbit/s and ~5 packets each at a 12 ms RTT) one fell under a
		// packet early, grew 8 B a packet while the others grew a packet
		// an RTT, and kept 1.2 Mbit/s for the whole run (Jain 0.84). The
		// shares of a few percent of a packet that subMTUInc is for (an
		// incast at an RTT of tens of µs) stay below a quarter packet.
		x := before / float64(c.mtu)
		c.cwnd = min(c.cwnd, before+max(subMTUInc, x*x*x*x)*float64(acked))
	}
	c.clamp(now, srtt)
}

// lastHopMinDiv sets the floor while receiver-limited, MTU/lastHopMinDiv:
// low enough that the window (paced, sent) can hold a sender to a share of
// a few Mbit/s at an RTT of tens of µs (7:1 incast into 100 Mbit/s at a
// 50 µs RTT: 87 B each).
const lastHopMinDiv = 64

// markGain is the EWMA gain of the marked share (DCTCP's g).
const markGain = 1.0 / 16

// subMTUInc bounds the increase of a window below one packet: bytes of
// window per byte acknowledged.
const subMTUInc = 1.0 / 256

// onTrim applies a trim NACK: lastHop for TRIMMED_LASTHOP (the receiver's
// downlink), else TRIMMED (a fabric queue; the EV goes SKIP as well).
func (c *ccState) onTrim(now Time, srtt Time, lastHop bool) {
	if c.cfg.Disable {
		return
	}
	first := lastHop && !c.receiverLimited(now, srtt)
	c.started = true
	if lastHop {
		c.lastHop = now
	}
	if first {
		// Entering receiver-limited mode (an incast): what the receiver
		// takes from us is what we were just delivered; more than that
		// times the base RTT only queues at its downlink or is trimmed
		// there, after crossing the fabric.
		if lim := c.deliveryRate(now) * float64(c.baseRTT) * lastHopCapGain; lim > 0 && c.cwnd > lim {
			c.cwnd = lim
			c.lastTrim = now
			c.clamp(now, srtt)
			return
		}
	}
	if now-c.lastTrim >= srtt {
		if lastHop {
			c.cwnd *= c.cfg.LastHopDecrease
		} else {
			c.cwnd *= c.cfg.TrimDecrease
		}
		c.lastTrim = now
		c.clamp(now, srtt)
	}
}

// lastHopCapGain scales the cap on entering receiver-limited mode (delivery
// rate × base RTT). In the fabric simulator's incast, over seeds 1–5 and 13:
// 0.75 gave the victim 96.7–98.2 % of its rate with the incast at 93.6–94.3 %
// of the receiver; 1.0 96.7–97.7 % / 94.5–95.5 %; 1.5 95.9–97.6 % / 96–97 %.
// Applied at every last-hop cut (not only on entry) it cost fairness:
// Jain 0.90–0.99 instead of 0.99.
const lastHopCapGain = 1.0
