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
