package dataplane

import "testing"

func TestDrained(t *testing.T) {
	const G = 1_000_000_000
	for _, c := range []struct {
		name                     string
		backlog, last, rate, now uint64
		want                     uint64
	}{
		{"never used", 0, 0, 1000, 5, 0},
		{"no time passed", 3000 * G, 100, 1000, 100, 3000},
		{"reading older than the program's", 3000 * G, 100, 1000, 50, 3000},
		{"1.5 s at 1000 B/s leaves half", 3000 * G, G, 1000, G + G + G/2, 1500},
		{"1 ms at 1 MB/s drains 1000 bytes", 3000 * G, G, 1_000_000, G + 1_000_000, 2000},
		{"exactly empty", 1000 * G, G, 1_000_000, G + 1_000_000, 0},
		{"2.001 s at 1 MB/s", 5_000_000 * G, G, 1_000_000, G + 2*G + 1_000_000, 2_999_000},
		{"idle for ages", 5 * G, 1, 1, 1 << 62, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := drained(c.backlog, c.last, c.rate, c.now); got != c.want {
				t.Errorf("drained(%d, %d, %d, %d) = %d, want %d", c.backlog, c.last, c.rate, c.now, got, c.want)
			}
		})
	}
}
