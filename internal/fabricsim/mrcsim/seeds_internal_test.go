package mrcsim

import (
	"fmt"
	"slices"
	"testing"
)

// verdictTB records the verdict helpers' failures instead of failing.
type verdictTB struct {
	testing.TB
	errs []string
}

func (v *verdictTB) Helper()                   {}
func (v *verdictTB) Log(...any)                {}
func (v *verdictTB) Logf(string, ...any)       {}
func (v *verdictTB) Errorf(f string, a ...any) { v.errs = append(v.errs, fmt.Sprintf(f, a...)) }

// The verdict helpers fail exactly when the claim fails: on every seed, or
// on the (lower) median.
func TestDistVerdicts(t *testing.T) {
	for _, tc := range []struct {
		name    string
		vals    []float64
		median  float64
		failing []uint64 // seeds below 0.6
		each    bool     // eachAtLeast(0.6) fails
		med     bool     // medianAtLeast(0.6) fails
	}{
		{"all above", []float64{0.61, 0.7, 0.65}, 0.65, nil, false, false},
		{"one below", []float64{0.61, 0.58, 0.65}, 0.61, []uint64{2}, true, false},
		{"median below", []float64{0.59, 0.58, 0.65}, 0.59, []uint64{1, 2}, true, true},
		{"even count takes the lower middle", []float64{0.7, 0.5, 0.59, 0.8}, 0.59, []uint64{2, 3}, true, true},
		{"one seed", []float64{0.6}, 0.6, nil, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := dist{name: "x"}
			for i, v := range tc.vals {
				d.add(uint64(i+1), v)
			}
			if m := d.median(); m != tc.median {
				t.Errorf("median %v, want %v", m, tc.median)
			}
			if f := d.failing(0.6, inf); !slices.Equal(f, tc.failing) {
				t.Errorf("failing %v, want %v", f, tc.failing)
			}
			var each, med verdictTB
			d.eachAtLeast(&each, 0.6)
			d.medianAtLeast(&med, 0.6)
			if (len(each.errs) > 0) != tc.each {
				t.Errorf("eachAtLeast failed %v, want %v: %v", len(each.errs) > 0, tc.each, each.errs)
			}
			if (len(med.errs) > 0) != tc.med {
				t.Errorf("medianAtLeast failed %v, want %v: %v", len(med.errs) > 0, tc.med, med.errs)
			}
		})
	}
	var empty verdictTB
	(&dist{name: "none"}).eachWithin(&empty, 0, 1)
	if len(empty.errs) == 0 {
		t.Error("an empty sweep passed")
	}
}

// The verdict seeds are disjoint from the tuning seeds (1..testSeedBase);
// MRC_SEED_BASE=0 gives the tuning seeds, for tuning runs only.
func TestSeedsHeldOut(t *testing.T) {
	for _, tc := range []struct {
		n, base string
		want    []uint64
	}{
		{"", "", []uint64{101, 102, 103}},
		{"5", "", []uint64{101, 102, 103, 104, 105}},
		{"2", "0", []uint64{1, 2}},
		{"1", "1000", []uint64{1001}},
	} {
		t.Setenv("MRC_SEEDS", tc.n)
		t.Setenv("MRC_SEED_BASE", tc.base)
		if got := seeds(t); !slices.Equal(got, tc.want) {
			t.Errorf("MRC_SEEDS=%q MRC_SEED_BASE=%q: seeds %v, want %v", tc.n, tc.base, got, tc.want)
		}
	}
}
