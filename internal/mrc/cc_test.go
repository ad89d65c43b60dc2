package mrc

import "testing"

// TestLastHopCap: the first TRIMMED_LASTHOP NACK (entering
// receiver-limited mode) caps the window at the delivery rate × base RTT;
// later ones within LastHopHold RTTs multiply it by LastHopDecrease once
// per RTT; an in-fabric trim does not cap.
func TestLastHopCap(t *testing.T) {
	const mtu = 2048
	const srtt = 10 * Microsecond
	for _, tc := range []struct {
		name    string
		lastHop bool
		want    float64 // cwnd after the trim (0: unchanged)
	}{
		// 8 000 B per µs acknowledged over one srtt = 8 B/ns; base RTT
		// 8 µs: cap 64 000 B, below 0.7 × 256 KiB.
		{"last hop caps", true, 64000},
		{"fabric trim does not", false, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newTestCC(CCConfig{InitCwnd: 256 << 10}, mtu)
			c.setMax(1024)
			now := Time(100 * Microsecond)
			for i := 0; i <= 10; i++ { // one ack per µs, 8 000 B each, RTT 8 µs
				c.onAck(now, 8000, false, 8*Microsecond, srtt)
				now += Microsecond
			}
			if r := c.deliveryRate(now); r < 7.9 || r > 8.1 {
				t.Fatalf("delivery rate %.2f B/ns, want 8", r)
			}
			before := c.cwnd
			if before*c.cfg.LastHopDecrease <= 64000 {
				t.Fatalf("cwnd %.0f before the trim: too small for the cap to show", before)
			}
			c.onTrim(now, srtt, tc.lastHop)
			if tc.want == 0 {
				tc.want = before // TrimDecrease 1
			}
			if c.cwnd != tc.want {
				t.Fatalf("cwnd %.0f after the trim, want %.0f", c.cwnd, tc.want)
			}
			if !tc.lastHop {
				return
			}
			// Receiver-limited now: the next last-hop trim an RTT later
			// is the ordinary multiplicative decrease, not a new cap.
			c.onTrim(now+srtt, srtt, true)
			if want := 64000 * c.cfg.LastHopDecrease; c.cwnd != want {
				t.Fatalf("cwnd %.0f after the second trim, want %.0f", c.cwnd, want)
			}
		})
	}
}

// TestSubPacketWindow: while receiver-limited (a TRIMMED_LASTHOP NACK in
// the last LastHopHold RTTs) the window may fall below one packet, to
// MTU/64; such a window is a rate, cwnd per base RTT, kept by spacing
// packets baseRTT·n/cwnd apart (a window alone lets one packet per RTT go
// whenever nothing is in flight); it grows by at most 1/256 byte per byte
// acknowledged and is cut by the recently marked share (DCTCP). Otherwise
// the floor stays MinCwnd (one packet) and nothing is paced.
func TestSubPacketWindow(t *testing.T) {
	const mtu = 2048
	const srtt = 50 * Microsecond
	const base = 40 * Microsecond
	for _, tc := range []struct {
		name     string
		lastHop  bool    // a last-hop trim first
		cwnd     float64 // set before sending
		want     float64 // cwnd after the clamp of the first ack
		gap      Time    // earliest next send after one MTU packet (0: none)
		afterAck float64 // cwnd after a clean ack of one MTU with a queue above target
	}{
		// 512 B per 40 µs: one 2 KiB packet per 160 µs; +2048/256 B.
		{"receiver-limited, quarter packet", true, 512, 512, 160 * Microsecond, 512 + 8},
		{"receiver-limited, floor", true, 1, mtu / 64, 64 * base, mtu/64 + 8},
		// Not receiver-limited: the floor is one packet, the window rule.
		{"fabric, quarter packet", false, 512, mtu, 0, mtu + mtu},
		{"receiver-limited, eight packets", true, 8 * mtu, 8 * mtu, 0, 8*mtu + mtu/8},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newTestCC(CCConfig{InitCwnd: 64 * mtu}, mtu)
			c.setMax(1024)
			now := Time(Millisecond)
			c.onAck(now, 0, false, base, srtt)
			c.started = true
			if tc.lastHop {
				c.onTrim(now, srtt, true)
			}
			c.cwnd = tc.cwnd
			c.onAck(now, 0, false, base, srtt) // clamps
			if c.cwnd != tc.want {
				t.Fatalf("cwnd %.0f after the clamp, want %.0f", c.cwnd, tc.want)
			}
			if !c.canSend(now, mtu) {
				t.Fatal("nothing in flight, never sent: the first packet must go")
			}
			c.sent(now, mtu, srtt)
			c.inflight -= mtu // acknowledged (or trimmed) at once
			if tc.gap == 0 {
				if !c.canSend(now, mtu) {
					t.Fatalf("cwnd %.0f: paced, want only the window", c.cwnd)
				}
			} else {
				if c.canSend(now+tc.gap-1, mtu) {
					t.Fatalf("cwnd %.0f: a packet may leave %v after the last, want ≥ %v", c.cwnd, tc.gap-1, tc.gap)
				}
				if !c.canSend(now+tc.gap, mtu) || c.nextSend != now+tc.gap {
					t.Fatalf("cwnd %.0f: next send at %v, want %v (the deadline waits for it)", c.cwnd, c.nextSend-now, tc.gap)
				}
			}
			// A clean ack with the RTT 20 µs above the base (above the
			// 6 µs target): the fair increase, bounded below one packet.
			c.onAck(now+tc.gap, mtu, false, base+20*Microsecond, srtt)
			if c.cwnd != tc.afterAck {
				t.Fatalf("cwnd %.0f after a clean ack, want %.0f", c.cwnd, tc.afterAck)
			}
		})
	}
}

// TestSubPacketDecrease: below one packet a CE echo with a queue above
// target cuts the window by MDGain × the marked share (EWMA 1/16 per ack),
// not by the delay-scaled factor (which halves it on every marked packet,
// each an RTT or more apart, while the marking queue drains for many).
func TestSubPacketDecrease(t *testing.T) {
	const mtu = 2048
	const srtt = 50 * Microsecond
	c := newTestCC(CCConfig{}, mtu)
	c.setMax(1024)
	now := Time(Millisecond)
	c.onAck(now, 0, false, 40*Microsecond, srtt)
	c.onTrim(now, srtt, true)
	c.cwnd = 1024
	// Three marked acks, an RTT apart, the RTT 400 µs above the base.
	want := 1024.0
	marked := 0.0
	for i := 1; i <= 3; i++ {
		now += srtt
		c.onAck(now, mtu, true, 440*Microsecond, srtt)
		marked += (1 - marked) / 16
		want *= 1 - c.cfg.MDGain*marked
		if d := c.cwnd - want; d > 1e-9 || d < -1e-9 {
			t.Fatalf("after %d marked acks: cwnd %.3f, want %.3f (marked share %.3f)", i, c.cwnd, want, marked)
		}
	}
	// The delay-scaled factor would have halved it three times (MDFloor).
	if c.cwnd < 1024*0.8 {
		t.Fatalf("cwnd %.0f after three marks: cut like the window rule", c.cwnd)
	}
}

// TestDeliveryRateIgnoresEmptyAcks: SACKs that acknowledge nothing (probe
// answers, on any QP to the peer) neither start nor close a delivery-rate
// interval. Before, a probe answer 9 µs before the data began started an
// interval that the first data acknowledged closed: its rate, 1.6 B/ns of
// a flow delivering 8, stood as the measured rate for the next srtt, and
// the last-hop cap cut the window to it.
func TestDeliveryRateIgnoresEmptyAcks(t *testing.T) {
	const mtu = 2048
	const srtt = 10 * Microsecond
	c := newTestCC(CCConfig{InitCwnd: 256 << 10}, mtu)
	now := Time(100 * Microsecond)
	for i := 0; i < 5; i++ { // probe answers an srtt apart
		c.onAck(now, 0, false, 0, srtt)
		now += srtt
	}
	now -= Microsecond       // the data begins 9 µs after the last answer
	for i := 0; i < 6; i++ { // one ack per µs, 8 000 B each: 8 B/ns
		c.onAck(now, 8000, false, 8*Microsecond, srtt)
		now += Microsecond
	}
	if r := c.deliveryRate(now); r < 6 || r > 8.1 {
		t.Fatalf("after 6 µs of data at 8 B/ns: delivery rate %.2f B/ns", r)
	}
}

// TestDeliveryRateAppLimited: an interval in which the window was never
// full (the application had little to send) may raise the delivery rate
// but not lower it, so the last-hop cap does not cut a sender to what it
// happened to send while idle. Before, a collective's quiet spell between
// steps measured 0.2 Mbit/s, and the first last-hop trim of the next step
// cut the window from 28 KB to 225 B (mrc-lab S7).
func TestDeliveryRateAppLimited(t *testing.T) {
	const mtu = 2048
	const srtt = 10 * Microsecond
	for _, tc := range []struct {
		name     string
		fill     bool    // the quiet interval's sends fill the window
		wantRate float64 // B/ns after it
	}{
		{"application-limited: the busy rate stays", false, 8},
		{"window-limited: the low rate counts", true, 0.18},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newTestCC(CCConfig{InitCwnd: 64 * mtu}, mtu)
			now := Time(100 * Microsecond)
			// A busy srtt: the window full, 8 B/ns acknowledged.
			c.sent(now, int(c.cwnd), srtt)
			for i := 0; i <= 10; i++ {
				c.inflight -= 8000
				c.onAck(now, 8000, false, 8*Microsecond, srtt)
				now += Microsecond
			}
			c.inflight = 0
			if r := c.deliveryRate(now); r < 7.9 || r > 8.1 {
				t.Fatalf("busy interval: delivery rate %.2f B/ns, want 8", r)
			}
			// A quiet srtt: 200 B acknowledged per µs, 0.18 B/ns over the interval.
			if tc.fill {
				c.sent(now, int(c.cwnd), srtt)
			} else {
				c.sent(now, 2000, srtt)
			}
			for i := 0; i < 10; i++ {
				now += Microsecond
				c.onAck(now, 200, false, 8*Microsecond, srtt)
			}
			if r := c.deliveryRate(now); r < tc.wantRate*0.95 || r > tc.wantRate*1.05 {
				t.Fatalf("after the quiet interval: delivery rate %.2f B/ns, want %.2f", r, tc.wantRate)
			}
		})
	}
}

// TestSubPacketIncreaseNearOnePacket: a receiver-limited window just below
// one packet grows nearly as one just above it does, so a sender pushed
// under a packet in an incast whose shares are several packets (S8:
// ~5 packets at a 12 ms RTT) climbs back within an RTT or two. With the
// flat 1/256 bound it grew 8 B per 2 KiB acknowledged and stayed at 0.93
// packet for the whole run, a seventh of its share.
func TestSubPacketIncreaseNearOnePacket(t *testing.T) {
	const mtu = 2048
	const srtt = 12 * Millisecond
	const base = 10 * Millisecond
	c := newTestCC(CCConfig{}, mtu)
	c.setMax(1024)
	now := Time(Second)
	c.onAck(now, 0, false, base, srtt)
	c.started = true
	c.onTrim(now, srtt, true) // receiver-limited
	c.cwnd = 0.93 * mtu
	// Clean acks, the queue below target and above it, an RTT apart.
	for i, rtt := range []Time{base + Microsecond, base + 2*Millisecond} {
		now += srtt
		c.onAck(now, mtu, false, rtt, srtt)
		if i == 0 && c.cwnd < mtu {
			t.Fatalf("cwnd %.0f after one clean ack from 0.93 packet, want ≥ one packet (%d)", c.cwnd, mtu)
		}
	}
	// A quarter packet and below keep the flat bound: +2048/256 B.
	c.cwnd = mtu / 4
	now += srtt
	c.onAck(now, mtu, false, base+Microsecond, srtt)
	if c.cwnd != mtu/4+8 {
		t.Fatalf("cwnd %.2f after a clean ack from a quarter packet, want %d", c.cwnd, mtu/4+8)
	}
}

// newTestCC is a window on cfg, its zero fields at the defaults for mtu.
func newTestCC(cfg CCConfig, mtu int) *ccState {
	cfg.setDefaults(mtu)
	c := &ccState{}
	c.init(&cfg, mtu)
	return c
}
