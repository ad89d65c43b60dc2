package daemon

import (
	"testing"

	"github.com/softmrc/softmrc/internal/mrc"
	"github.com/softmrc/softmrc/internal/wire"
)

func frameFor(t testing.TB, encap bool, qpn wire.QPN) []byte {
	t.Helper()
	p := wire.Packet{Encap: encap, Opcode: wire.OpWriteOnly, DestQP: qpn, PSN: 5, RKey: 1, VA: 2, DMALen: 4,
		Payload: []byte{1, 2, 3, 4}, EV: 0x10000001}
	b := make([]byte, p.Len())
	n, err := p.Encode(b)
	if err != nil {
		t.Fatal(err)
	}
	return b[:n]
}

func TestDestQP(t *testing.T) {
	for _, tc := range []struct {
		name  string
		frame []byte
		qpn   wire.QPN
		ok    bool
	}{
		{"plain IPv6/UDP", frameFor(t, false, 0x123456), 0x123456, true},
		{"IPv6-in-IPv6", frameFor(t, true, 0x101), 0x101, true},
		{"truncated", frameFor(t, true, 0x101)[:80], 0, false},
		{"empty", nil, 0, false},
		{"not IPv6", append([]byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x08, 0x00}, make([]byte, 100)...), 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q, ok := destQP(tc.frame)
			if ok != tc.ok || q != tc.qpn {
				t.Fatalf("destQP = %v, %v; want %v, %v", q, ok, tc.qpn, tc.ok)
			}
		})
	}
}

func FuzzDestQP(f *testing.F) {
	f.Add(frameFor(f, true, 0x101))
	f.Add(frameFor(f, false, 0x202))
	f.Fuzz(func(t *testing.T, b []byte) {
		q, ok := destQP(b)
		var p wire.Packet
		var d wire.Decoder
		// Whenever the full decoder accepts a frame, destQP agrees with it.
		if d.Decode(b, &p) == nil && (!ok || q != p.DestQP) {
			t.Fatalf("destQP = %v, %v; decoder says %v", q, ok, p.DestQP)
		}
	})
}

func BenchmarkDestQP(b *testing.B) {
	f := frameFor(b, true, 0x101)
	for b.Loop() {
		destQP(f)
	}
}

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
