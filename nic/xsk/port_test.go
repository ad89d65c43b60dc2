package xsk

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"testing"
	"time"
)

// portPair returns two connected Ports of the given kind and a function that
// builds a frame from a to b: the same contract tests run on the in-memory
// twin and on real AF_XDP sockets over a veth.
func portPair(t *testing.T, kind string) (a, b Port, frame func(payload []byte) []byte) {
	switch kind {
	case "pipe":
		pa, pb := NewPipe("a", "b", 0)
		t.Cleanup(func() { pa.Close(); pb.Close() })
		return pa, pb, func(p []byte) []byte { return udpFrame(macB, macA, outerSrc, outerSrc, 1, 4791, p) }
	case "xdp":
		requireXDP(t)
		n := newVethNet(t, 3000)
		xa, xb := openPair(t, n, 256)
		return xa, xb, func(p []byte) []byte { return udpFrame(n.macB, n.macA, n.addrA, n.addrB, 1, 4791, p) }
	}
	t.Fatalf("unknown port kind %q", kind)
	return nil, nil, nil
}

// transferInOrder sends want from a to b, at most window frames ahead of
// what b has received, through send(sent, k) (queue want[sent:k], report how
// many were queued), and checks that b received every frame, in order and
// byte-exact, within 20 s.
func transferInOrder(t *testing.T, a, b Port, want [][]byte, window int, send func(sent, k int) (int, error)) {
	t.Helper()
	total := len(want)
	var got [][]byte
	deadline := time.Now().Add(20 * time.Second)
	for sent := 0; len(got) < total; {
		if time.Now().After(deadline) {
			t.Fatalf("got %d of %d frames; a %+v b %+v", len(got), total, a.Stats(), b.Stats())
		}
		if k := min(total, len(got)+window); sent < k {
			m, err := send(sent, k)
			if err != nil {
				t.Fatal(err)
			}
			sent += m
		}
		if _, err := b.RecvFunc(64, func(f []byte) { got = append(got, bytes.Clone(f)) }); err != nil {
			t.Fatal(err)
		}
		_ = b.Wait(time.Millisecond)
	}
	for i := range want {
		if !bytes.Equal(got[i], want[i]) {
			t.Fatalf("frame %d differs (got %d bytes, want %d)", i, len(got[i]), len(want[i]))
		}
	}
}

func TestPortContract(t *testing.T) {
	for _, kind := range []string{"pipe", "xdp"} {
		t.Run(kind, func(t *testing.T) {
			a, b, mk := portPair(t, kind)

			// In order and byte-exact, sizes from minimal to 2 KiB-MTU frames,
			// with at most 64 frames in flight.
			const total = 2000
			var want [][]byte
			for i := range total {
				p := payload(4+(i*37)%2100, byte(i))
				binary.BigEndian.PutUint32(p, uint32(i))
				want = append(want, mk(p))
			}
			transferInOrder(t, a, b, want, 64, func(sent, k int) (int, error) { return a.Send(want[sent:k]) })
			if sa, sb := a.Stats(), b.Stats(); sa.TxFrames != total || sb.RxFrames != total {
				t.Errorf("a tx %d, b rx %d, want %d", sa.TxFrames, sb.RxFrames, total)
			}

			// Oversize frames are an error, not a truncation.
			if _, err := a.Send([][]byte{make([]byte, FrameSize+1)}); err == nil {
				t.Error("Send of a frame longer than FrameSize succeeded")
			}
			// Recv into a too-small buffer drops and counts.
			if err := sendAll(a, [][]byte{mk(payload(100, 1))}, 5*time.Second); err != nil {
				t.Fatal(err)
			}
			small := [][]byte{make([]byte, 10)}
			waitFor(t, "the oversize frame", 5*time.Second, func() bool {
				_, _ = b.Recv(small)
				return b.Stats().RxOversize == 1
			})

			// Wake ends an unbounded Wait.
			done := make(chan error, 1)
			go func() { done <- b.Wait(-1) }()
			b.Wake()
			select {
			case err := <-done:
				if err != nil {
					t.Fatal(err)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("Wait did not return after Wake")
			}

			// After Close, calls fail with an error matching net.ErrClosed.
			if err := b.Close(); err != nil {
				t.Fatal(err)
			}
			for name, call := range map[string]func() error{
				"Recv": func() error { _, err := b.Recv(make([][]byte, 1)); return err },
				"Send": func() error { _, err := b.Send([][]byte{mk(nil)}); return err },
				"Wait": func() error { return b.Wait(0) },
			} {
				if err := call(); !errors.Is(err, net.ErrClosed) {
					t.Errorf("%s after Close: %v, want net.ErrClosed", name, err)
				}
			}
			b.Wake() // no effect, no panic
			_ = fmt.Sprint(b.Stats())
		})
	}
}

// TestPortSendFunc builds frames in place on both kinds of port.
func TestPortSendFunc(t *testing.T) {
	for _, kind := range []string{"pipe", "xdp"} {
		t.Run(kind, func(t *testing.T) {
			a, b, mk := portPair(t, kind)
			var want [][]byte
			for i := range 10 {
				want = append(want, mk(payload(50+i*200, byte(i))))
			}
			next := 0
			build := func(f []byte) int {
				if next == len(want) {
					return 0
				}
				next++
				return copy(f, want[next-1])
			}
			deadline := time.Now().Add(5 * time.Second)
			for sent := 0; sent < len(want); {
				n, err := a.SendFunc(4, build)
				if err != nil {
					t.Fatal(err)
				}
				sent += n
				if time.Now().After(deadline) {
					t.Fatalf("sent %d of %d", sent, len(want))
				}
			}
			if n, err := a.SendFunc(4, build); n != 0 || err != nil {
				t.Errorf("SendFunc with nothing to build = %d, %v", n, err)
			}
			got, err := recvN(b, len(want), 5*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			for i := range want {
				if !bytes.Equal(got[i], want[i]) {
					t.Errorf("frame %d differs", i)
				}
			}
			if full := a.Stats().TxFull; full != 0 {
				t.Errorf("TxFull = %d with room to spare", full)
			}
		})
	}
}

// TestPortTxSlot builds frames in the port's own buffers (TxSlot,
// TxCommit, TxFlush): in order with frames sent by Send in between (those
// go after what was committed before them), a slot not committed is handed
// out again, and a full port returns nil slots, counted, until it drains.
func TestPortTxSlot(t *testing.T) {
	for _, kind := range []string{"pipe", "xdp"} {
		t.Run(kind, func(t *testing.T) {
			a, b, mk := portPair(t, kind)
			var want [][]byte
			for i := range 12 {
				want = append(want, mk(payload(60+i*150, byte(i))))
			}
			build := func(f []byte) {
				t.Helper()
				slot := a.TxSlot()
				if len(slot) != FrameSize {
					t.Fatalf("TxSlot gave %d bytes, want %d", len(slot), FrameSize)
				}
				if again := a.TxSlot(); &again[0] != &slot[0] {
					t.Fatal("a second TxSlot before TxCommit gave another buffer")
				}
				if err := a.TxCommit(copy(slot, f)); err != nil {
					t.Fatal(err)
				}
			}
			for _, f := range want[:4] {
				build(f)
			}
			if n, err := a.Send(want[4:6]); n != 2 || err != nil { // publishes 0..3 first
				t.Fatalf("Send = %d, %v", n, err)
			}
			for _, f := range want[6:] {
				build(f)
			}
			if n, err := a.TxFlush(); n != 6 || err != nil {
				t.Fatalf("TxFlush = %d, %v; want the 6 frames committed since the Send", n, err)
			}
			if n, err := a.TxFlush(); n != 0 || err != nil {
				t.Fatalf("second TxFlush = %d, %v", n, err)
			}
			got, err := recvN(b, len(want), 5*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			for i := range want {
				if !bytes.Equal(got[i], want[i]) {
					t.Fatalf("frame %d differs (got %d bytes, want %d)", i, len(got[i]), len(want[i]))
				}
			}
			if err := a.TxCommit(FrameSize + 1); err == nil {
				t.Error("TxCommit of more than FrameSize succeeded")
			}

			// Bounded: without a flush the port runs out of slots.
			full0, slots := a.Stats().TxFull, 0
			for a.TxSlot() != nil {
				if err := a.TxCommit(len(want[0])); err != nil {
					t.Fatal(err)
				}
				if slots++; slots > 1<<16 {
					t.Fatal("TxSlot never ran out")
				}
			}
			if a.Stats().TxFull != full0+1 {
				t.Errorf("TxFull rose by %d for one refused slot", a.Stats().TxFull-full0)
			}
			if n, err := a.TxFlush(); n != slots || err != nil {
				t.Fatalf("TxFlush = %d, %v; want %d", n, err, slots)
			}
			waitFor(t, "a free slot after the port drained", 10*time.Second, func() bool {
				_, _ = b.RecvFunc(256, func([]byte) {})
				_ = a.Wait(0)
				return a.TxSlot() != nil
			})
		})
	}
}

// TestWaitAny waits on two ports at once: a frame on the second, or Wake on
// the first, ends the wait.
func TestWaitAny(t *testing.T) {
	for _, kind := range []string{"pipe", "xdp"} {
		t.Run(kind, func(t *testing.T) {
			a1, b1, _ := portPair(t, kind)
			a2, b2, mk2 := portPair(t, kind)
			done := make(chan error, 1)
			go func() { done <- WaitAny(-1, b1, b2) }()
			if err := sendAll(a2, [][]byte{mk2(payload(64, 1))}, 5*time.Second); err != nil {
				t.Fatal(err)
			}
			select {
			case err := <-done:
				if err != nil {
					t.Fatal(err)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("WaitAny did not return for a frame on the second port")
			}
			if got, err := recvN(b2, 1, 5*time.Second); err != nil || len(got) != 1 {
				t.Fatalf("frame on the second port: %v", err)
			}
			go func() { done <- WaitAny(-1, b1, b2) }()
			b1.Wake()
			select {
			case err := <-done:
				if err != nil {
					t.Fatal(err)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("WaitAny did not return after Wake on the first port")
			}
			if err := WaitAny(time.Millisecond, b1, b2); err != nil {
				t.Errorf("WaitAny with a timeout: %v", err)
			}
			_ = a1
		})
	}
	p, _ := NewPipe("p", "q", 0)
	x := &XDPPort{name: "x"}
	if err := WaitAny(0, p, x); err == nil {
		t.Error("WaitAny over mixed port kinds succeeded")
	}
}
