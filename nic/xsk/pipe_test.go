package xsk

import (
	"bytes"
	"errors"
	"testing"
	"time"
)

func TestPipeRoundTrip(t *testing.T) {
	a, b := NewPipe("a", "b", 8)
	if a.Name() != "a" || b.Name() != "b" {
		t.Fatalf("names %q %q", a.Name(), b.Name())
	}
	frames := [][]byte{payload(60, 1), payload(2100, 2), payload(MaxFrameLen, 3)}
	n, err := a.Send(frames)
	if n != 3 || err != nil {
		t.Fatalf("Send = %d, %v", n, err)
	}
	frames[0][0] ^= 0xff // the pipe must have copied
	frames[0][0] ^= 0xff
	got, err := recvN(b, 3, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	for i := range frames {
		if !bytes.Equal(got[i], frames[i]) {
			t.Errorf("frame %d differs", i)
		}
	}
	if st := b.Stats(); st.RxFrames != 3 || st.RxBytes != uint64(60+2100+MaxFrameLen) {
		t.Errorf("b stats %+v", st)
	}
	if k, _ := a.Recv(make([][]byte, 4)); k != 0 {
		t.Errorf("a received its own frames: %d", k)
	}
}

func TestPipeBounded(t *testing.T) {
	tests := []struct {
		depth, send, wantSent int
	}{
		{4, 3, 3},
		{4, 4, 4},
		{4, 10, 4},
		{1, 2, 1},
	}
	for _, tc := range tests {
		a, b := NewPipe("a", "b", tc.depth)
		frames := make([][]byte, tc.send)
		for i := range frames {
			frames[i] = []byte{byte(i)}
		}
		n, err := a.Send(frames)
		if n != tc.wantSent || err != nil {
			t.Errorf("depth %d send %d: Send = %d, %v; want %d", tc.depth, tc.send, n, err, tc.wantSent)
		}
		if full := a.Stats().TxFull; full != uint64(tc.send-tc.wantSent) {
			t.Errorf("depth %d send %d: TxFull %d", tc.depth, tc.send, full)
		}
		if k, _ := b.Recv(make([][]byte, 16)); k != 0 {
			// zero-cap buffers: every frame is oversize and dropped
			t.Errorf("received %d frames into zero-capacity buffers", k)
		}
		if over := b.Stats().RxOversize; over != uint64(tc.wantSent) {
			t.Errorf("RxOversize %d, want %d", over, tc.wantSent)
		}
	}
}

func TestPipeRecvFuncAndDrop(t *testing.T) {
	a, b := NewPipe("a", "b", 0)
	a.Drop = func(f []byte) bool { return f[0]%2 == 1 }
	var frames [][]byte
	for i := range 10 {
		frames = append(frames, []byte{byte(i), 0xaa})
	}
	if n, err := a.Send(frames); n != 10 || err != nil {
		t.Fatalf("Send = %d, %v", n, err)
	}
	var seen []byte
	n, err := b.RecvFunc(100, func(f []byte) { seen = append(seen, f[0]) })
	if err != nil || n != 5 || !bytes.Equal(seen, []byte{0, 2, 4, 6, 8}) {
		t.Fatalf("RecvFunc = %d, %v, seen %v", n, err, seen)
	}
}

func TestPipeWaitAndClose(t *testing.T) {
	a, b := NewPipe("a", "b", 0)
	done := make(chan error, 1)
	go func() { done <- b.Wait(-1) }()
	if _, err := a.Send([][]byte{{1}}); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Wait did not return after a Send")
	}
	if err := b.Wait(time.Millisecond); err != nil { // a frame is queued: returns at once
		t.Fatal(err)
	}
	if _, err := b.Recv(make([][]byte, 1)); err != nil {
		t.Fatal(err)
	}
	go func() { done <- b.Wait(-1) }()
	b.Close()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Wait did not return after Close")
	}
	if _, err := a.Send([][]byte{{1}}); !errors.Is(err, ErrClosed) {
		t.Errorf("Send to a closed end: %v", err)
	}
	if _, err := b.Recv(make([][]byte, 1)); !errors.Is(err, ErrClosed) {
		t.Errorf("Recv on a closed end: %v", err)
	}
	if _, err := a.Send([][]byte{make([]byte, FrameSize+1)}); err == nil {
		t.Error("oversize frame accepted")
	}
}

func BenchmarkPipe(b *testing.B) {
	x, y := NewPipe("x", "y", 0)
	frames := make([][]byte, 64)
	for i := range frames {
		frames[i] = payload(2100, byte(i))
	}
	b.SetBytes(64 * 2100)
	for b.Loop() {
		if n, err := x.Send(frames); n != 64 || err != nil {
			b.Fatal(n, err)
		}
		if n, _ := y.RecvFunc(64, func([]byte) {}); n != 64 {
			b.Fatal(n)
		}
	}
}

func TestPipeWake(t *testing.T) {
	_, b := NewPipe("a", "b", 0)
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
}

func TestPipeRxPending(t *testing.T) {
	a, b := NewPipe("a", "b", 0)
	for _, step := range []struct{ send, take, want int }{{0, 0, 0}, {10, 0, 10}, {0, 4, 6}, {5, 64, 0}} {
		for i := 0; i < step.send; i++ {
			if _, err := a.Send([][]byte{{1, 2, 3}}); err != nil {
				t.Fatal(err)
			}
		}
		if step.take > 0 {
			if _, err := b.RecvFunc(step.take, func([]byte) {}); err != nil {
				t.Fatal(err)
			}
		}
		if got := b.RxPending(); got != step.want {
			t.Fatalf("after sending %d and reading %d: RxPending %d, want %d", step.send, step.take, got, step.want)
		}
	}
}
