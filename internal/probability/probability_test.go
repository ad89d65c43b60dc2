package probability

import "testing"

func TestParse(t *testing.T) {
	for _, c := range []struct {
		in   string
		want float64
		ok   bool
	}{
		{"0.01", 0.01, true},
		{"1%", 0.01, true},
		{" 2.5% ", 0.025, true},
		{"0", 0, true},
		{"1", 1, true},
		{"100%", 1, true},
		{"150%", 0, false},
		{"1.5", 0, false},
		{"-0.1", 0, false},
		{"NaN", 0, false},
		{"often", 0, false},
		{"%", 0, false},
	} {
		got, err := Parse(c.in)
		if (err == nil) != c.ok || c.ok && got != c.want {
			t.Errorf("Parse(%q) = %v, %v; want %v (ok %v)", c.in, got, err, c.want, c.ok)
		}
	}
}
