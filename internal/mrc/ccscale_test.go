package mrc

import "testing"

// TestCCConfigScaled: cc.scale k makes the target queueing delay k times
// longer (the default's when unset) and leaves every other constant alone.
func TestCCConfigScaled(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   CCConfig
		k    float64
		want Time
	}{
		{"default target, S7's 1250", CCConfig{}, 1250, 7500 * Microsecond},
		{"default target, S8's 1000", CCConfig{}, 1000, 6 * Millisecond},
		{"explicit target", CCConfig{TargetQDelay: 10 * Microsecond}, 100, Millisecond},
		{"k = 1: unchanged", CCConfig{}, 1, 0},
		{"k = 0: unchanged", CCConfig{TargetQDelay: 3}, 0, 3},
	} {
		got := tc.in.Scaled(tc.k)
		if got.TargetQDelay != tc.want {
			t.Errorf("%s: TargetQDelay %v, want %v", tc.name, got.TargetQDelay, tc.want)
		}
		got.TargetQDelay = tc.in.TargetQDelay
		if got != tc.in {
			t.Errorf("%s: Scaled changed more than TargetQDelay: %+v", tc.name, got)
		}
	}
	var c CCConfig
	c.setDefaults(2048)
	if c.TargetQDelay != DefaultTargetQDelay {
		t.Errorf("default TargetQDelay %v, want DefaultTargetQDelay %v", c.TargetQDelay, DefaultTargetQDelay)
	}
}
