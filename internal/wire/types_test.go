package wire

import "testing"

func TestPSNArithmetic(t *testing.T) {
	cases := []struct {
		p      PSN
		n      int
		sum    PSN
		before bool // p before sum (n > 0)
	}{
		{0, 1, 1, true},
		{PSNMask, 1, 0, true},
		{PSNMask - 1, 3, 1, true},
		{0, -1, PSNMask, false},
		{5, -10, PSNMask - 4, false},
		{1 << 23, 1 << 23, 0, true}, // exactly half the space (outside the valid range): Diff is -2^23
	}
	for _, c := range cases {
		s := c.p.Add(c.n)
		if s != c.sum {
			t.Errorf("%v.Add(%d) = %v, want %v", c.p, c.n, s, c.sum)
		}
		if !s.Valid() {
			t.Errorf("%v.Add(%d) is not 24-bit", c.p, c.n)
		}
		if got := c.p.Before(s); got != c.before {
			t.Errorf("%v.Before(%v) = %v, want %v", c.p, s, got, c.before)
		}
	}
	if d := PSN(2).Diff(PSNMask); d != 3 {
		t.Errorf("2 - 0xFFFFFF = %d, want 3 across the wrap", d)
	}
	if d := PSN(PSNMask).Diff(2); d != -3 {
		t.Errorf("0xFFFFFF - 2 = %d, want -3", d)
	}
	if !PSN(1).After(PSNMask) || PSN(1).Before(PSNMask) || PSN(7).After(7) || PSN(7).Before(7) {
		t.Error("After/Before wrong around the wrap or at equality")
	}
	if PSN(1 << 24).Valid() {
		t.Error("2^24 reported valid")
	}
}
