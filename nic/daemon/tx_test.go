package daemon

import (
	"testing"

	"github.com/softmrc/softmrc/internal/mrc"
)

// The pacing bucket releases frames at its rate.
func TestPortTxPacing(t *testing.T) {
	var tx portTx
	tx.init(8e9) // 1 byte per ns
	frame := make([]byte, 1000)
	for i := 0; i < 100; i++ {
		b := tx.slot()
		if b == nil {
			t.Fatal("queue full")
		}
		tx.push(copy(b, frame))
	}
	tx.last = 0
	tx.tokens = 0
	// After 10 µs, 10 000 bytes = 10 frames may go.
	tx.refill(10 * mrc.Microsecond)
	n := 0
	for tx.n > 0 && tx.tokens >= float64(len(tx.bufs[tx.head])) {
		tx.tokens -= float64(len(tx.bufs[tx.head]))
		tx.head = (tx.head + 1) % len(tx.bufs)
		tx.n--
		n++
	}
	if n != 10 {
		t.Fatalf("%d frames released after 10 µs at 8 Gb/s, want 10", n)
	}
	if next := tx.next(10 * mrc.Microsecond); next != 10*mrc.Microsecond+1000+1 {
		t.Fatalf("next = %d, want the time one more frame's tokens take", next)
	}
}
