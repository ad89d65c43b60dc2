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
			cfg := CCConfig{InitCwnd: 256 << 10}
			cfg.setDefaults(mtu)
			var c ccState
			c.init(&cfg, mtu)
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
			if before*cfg.LastHopDecrease <= 64000 {
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
			if want := 64000 * cfg.LastHopDecrease; c.cwnd != want {
				t.Fatalf("cwnd %.0f after the second trim, want %.0f", c.cwnd, want)
			}
		})
	}
}

// TestSubPacketWindow: a window below one packet is a rate, cwnd per srtt,
// kept by spacing packets srtt·n/cwnd apart (a window alone lets one packet
// per RTT go whenever nothing is in flight); its increase is bounded per
// byte acknowledged; a window of a packet or more is not paced.
func TestSubPacketWindow(t *testing.T) {
	const mtu = 2048
	const srtt = 50 * Microsecond
	for _, tc := range []struct {
		name     string
		cwnd     float64
		gap      Time    // earliest next send after one MTU packet (0: no pacing)
		afterAck float64 // cwnd after a clean ack of one MTU with a queue above target
	}{
		// 512 B per 50 µs: one 2 KiB packet per 200 µs; +2048/256 B.
		{"quarter packet", 512, 200 * Microsecond, 512 + 8},
		{"MinCwnd", mtu / 64, 64 * srtt, mtu/64 + 8},
		// At one packet and above: the window rule, +FairInc MTU per RTT.
		{"one packet", mtu, 0, mtu + mtu},
		{"eight packets", 8 * mtu, 0, 8*mtu + mtu/8},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := CCConfig{InitCwnd: 64 * mtu}
			cfg.setDefaults(mtu)
			if cfg.MinCwnd != mtu/64 {
				t.Fatalf("MinCwnd default %d, want MTU/64 = %d", cfg.MinCwnd, mtu/64)
			}
			var c ccState
			c.init(&cfg, mtu)
			c.setMax(1024)
			now := Time(Millisecond)
			c.onAck(now, 0, false, 40*Microsecond, srtt) // base RTT 40 µs
			c.cwnd = tc.cwnd
			if !c.canSend(now, mtu) {
				t.Fatal("nothing in flight, never sent: the first packet must go")
			}
			c.sent(now, mtu, srtt)
			c.inflight -= mtu // acknowledged (or trimmed) at once
			if tc.gap == 0 {
				if !c.canSend(now, mtu) {
					t.Fatalf("cwnd %.0f: paced, want only the window", tc.cwnd)
				}
			} else {
				if c.canSend(now+tc.gap-1, mtu) {
					t.Fatalf("cwnd %.0f: a packet may leave %v after the last, want ≥ %v", tc.cwnd, tc.gap-1, tc.gap)
				}
				if !c.canSend(now+tc.gap, mtu) {
					t.Fatalf("cwnd %.0f: no packet %v after the last", tc.cwnd, tc.gap)
				}
				if c.nextSend != now+tc.gap {
					t.Fatalf("nextSend %v, want %v (the deadline waits for it)", c.nextSend, now+tc.gap)
				}
			}
			// A clean ack with the RTT 20 µs above the base (above the
			// 6 µs target): the fair increase, bounded below one packet.
			c.started = true
			c.onAck(now+tc.gap, mtu, false, 60*Microsecond, srtt)
			if c.cwnd != tc.afterAck {
				t.Fatalf("cwnd %.0f after a clean ack, want %.0f", c.cwnd, tc.afterAck)
			}
		})
	}
}
