package daemon

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"testing"

	"github.com/softmrc/softmrc/internal/mrc"
	"github.com/softmrc/softmrc/internal/wire"
	"github.com/softmrc/softmrc/nic/config"
	"github.com/softmrc/softmrc/nic/xsk"
)

// burstEngine is the part of an engine transmit uses: each PollInto emits
// burst frames on plane 0, numbered in order, into the daemon's buffers
// (dst, commit), as the MRC engine's PollInto does. A frame without a
// buffer is dropped, as the engine drops it (TxNoBuffer).
type burstEngine struct {
	Engine // nil: transmit calls PollInto only
	burst  int
	polls  int
	seq    uint32
	noBuf  int
}

func (e *burstEngine) PollInto(_ mrc.Time, dst func(wire.Plane) []byte, commit func(wire.Plane, int)) {
	e.polls++
	for range e.burst {
		b := dst(0)
		if len(b) < 64 {
			e.noBuf++
		} else {
			binary.BigEndian.PutUint32(b, e.seq)
			commit(0, 64)
		}
		e.seq++
	}
}

// txDaemon is the transmit half of a Daemon over one port.
func txDaemon(p xsk.Port, eng Engine) *Daemon {
	d := &Daemon{eng: eng, ports: []xsk.Port{p}, txq: make([]portTx, 1)}
	for i := range d.byPlane {
		d.byPlane[i] = -1
	}
	d.byPlane[0] = 0
	d.txSlot, d.txCommit = d.txSlotFn, d.txCommitFn
	d.txq[0].init(p)
	return d
}

// TestTransmitRoom: the engine encodes into the port's own transmit frames
// and is polled only while the port has free frames for a burst (half its
// pool, at most pollRoom); a port short of them is not polled (counted in
// tx_room_waits) and is retried soon; frames that find no free frame
// mid-burst are dropped and counted (tx_queue_full); and what leaves, leaves
// in the order it was built, with no frame leaked from the pool.
func TestTransmitRoom(t *testing.T) {
	type step struct {
		burst     int  // frames the engine emits if polled
		drain     bool // the far end takes everything first
		wantPoll  bool
		wantSent  int // frames flushed to the port
		wantNoBuf int // frames the engine found no buffer for, cumulative
	}
	// A pipe of 256 frames: the engine needs 128 free.
	for _, tc := range []struct {
		name  string
		steps []step
	}{
		{"polled while a burst fits, not once the pool is short", []step{
			{burst: 100, wantPoll: true, wantSent: 100}, // 156 free left
			{burst: 100, wantPoll: true, wantSent: 100}, // 56 free left
			{burst: 100, wantPoll: false, wantSent: 0},  // 56 < 128: wait
			{burst: 100, drain: true, wantPoll: true, wantSent: 100},
		}},
		{"a burst larger than the room drops the rest, counted", []step{
			{burst: 120, wantPoll: true, wantSent: 120},                // 136 free left
			{burst: 200, wantPoll: true, wantSent: 136, wantNoBuf: 64}, // pool exhausted mid-burst
			{burst: 10, drain: true, wantPoll: true, wantSent: 10, wantNoBuf: 64},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, b := xsk.NewPipe("a", "b", 256)
			eng := &burstEngine{}
			d := txDaemon(a, eng)
			room0 := a.TxRoom()
			var got []uint32
			drain := func() {
				_, _ = b.RecvFunc(1<<16, func(f []byte) { got = append(got, binary.BigEndian.Uint32(f)) })
			}
			var sent, waits uint64
			for i, s := range tc.steps {
				if s.drain {
					drain()
				}
				eng.burst = s.burst
				polls := eng.polls
				n := d.transmit(mrc.Time(i))
				if polled := eng.polls > polls; polled != s.wantPoll {
					t.Fatalf("step %d: polled %v, want %v (room %d)", i, polled, s.wantPoll, a.TxRoom())
				}
				if n != s.wantSent || eng.noBuf != s.wantNoBuf {
					t.Fatalf("step %d: sent %d, %d without a buffer; want %d, %d", i, n, eng.noBuf, s.wantSent, s.wantNoBuf)
				}
				if !s.wantPoll {
					waits++
				}
				sent += uint64(n)
				if next := d.txq[0].next(100); (next != mrc.Never) != !s.wantPoll {
					t.Fatalf("step %d: retry at %v after polled=%v", i, next, s.wantPoll)
				}
			}
			if d.c.txRoomWaits.Load() != waits || d.c.txBacklogFull.Load() != uint64(eng.noBuf) || d.c.txFrames.Load() != sent {
				t.Fatalf("counters: %d room waits, %d no-frame drops, %d frames; want %d, %d, %d",
					d.c.txRoomWaits.Load(), d.c.txBacklogFull.Load(), d.c.txFrames.Load(), waits, eng.noBuf, sent)
			}
			drain()
			if uint64(len(got)) != sent {
				t.Fatalf("far end got %d frames, %d were sent", len(got), sent)
			}
			for k := 1; k < len(got); k++ {
				if got[k] <= got[k-1] {
					t.Fatalf("frame %d is #%d after #%d: order lost", k, got[k], got[k-1])
				}
			}
			if r := a.TxRoom(); r != room0 {
				t.Fatalf("room %d after the far end drained everything, want %d: a frame leaked", r, room0)
			}
		})
	}
}

// TestTransmitDelayedPort: on a delayed port the engine encodes into the
// delay line's pool (the one extra copy is the line's, into the port when
// due), the line never holds the engine back, a full line drops (counted)
// after moving out what is due, and frames leave in order after the delay.
func TestTransmitDelayedPort(t *testing.T) {
	a, b := xsk.NewPipe("a", "b", 256)
	now := int64(0)
	dp, err := newDelayPort(a, config.Port{Name: "p0", Delay: 1000, DelayFrames: 150}, func() int64 { return now })
	if err != nil {
		t.Fatal(err)
	}
	eng := &burstEngine{}
	d := txDaemon(dp, eng)
	var got []uint32
	drain := func() {
		_, _ = b.RecvFunc(1<<16, func(f []byte) { got = append(got, binary.BigEndian.Uint32(f)) })
	}
	for i, s := range []struct {
		at, burst int
		recv      bool // a loop turn's receive first (it moves due frames out)
		wantGot   int  // frames at the far end afterwards
		wantDrop  uint64
	}{
		{at: 0, burst: 100, wantGot: 0},                   // #0-99 held
		{at: 1, burst: 100, wantGot: 0, wantDrop: 50},     // #100-149 held, #150-199 dropped: the line holds 150
		{at: 1000, burst: 10, wantGot: 100, wantDrop: 50}, // #0-99 due: moved out for #200-209
		{at: 1001, burst: 0, recv: true, wantGot: 150, wantDrop: 50},
		{at: 2000, burst: 0, recv: true, wantGot: 160, wantDrop: 50},
	} {
		now = int64(s.at)
		if s.recv {
			_, _ = dp.RecvFunc(64, func([]byte) {})
		}
		eng.burst = s.burst
		polls := eng.polls
		if n := d.transmit(mrc.Time(now)); n != s.burst || eng.polls != polls+1 || eng.noBuf != 0 {
			t.Fatalf("step %d: sent %d (%d polls, %d without a buffer), want %d in one poll: a delayed port never holds the engine back",
				i, n, eng.polls-polls, eng.noBuf, s.burst)
		}
		drain()
		if c := dp.tx.Counters(); len(got) != s.wantGot || c.Dropped != s.wantDrop {
			t.Fatalf("step %d: far end has %d frames, line %+v; want %d and %d dropped", i, len(got), c, s.wantGot, s.wantDrop)
		}
	}
	for k, v := range got {
		want := uint32(k)
		if k >= 150 {
			want = uint32(200 + k - 150)
		}
		if v != want {
			t.Fatalf("frame %d is #%d, want #%d", k, v, want)
		}
	}
}

// ringPort is an in-memory port that allocates nothing: a ring of
// preallocated transmit frames, which the benchmark's wire hands to the
// receiving engine in place. Only the transmit half of xsk.Port is used.
type ringPort struct {
	xsk.Port // nil: transmit uses TxRoom, TxSlot, TxCommit, TxFlush only
	bufs     [][]byte
	head     int // oldest frame on the wire
	wire     int // frames flushed, not yet taken by the receiver
	pend     int // frames committed, not yet flushed
}

func newRingPort(n int) *ringPort {
	p := &ringPort{bufs: make([][]byte, n)}
	for i := range p.bufs {
		p.bufs[i] = make([]byte, xsk.FrameSize)
	}
	return p
}

func (p *ringPort) TxRoom() int { return len(p.bufs) - p.wire - p.pend }
func (p *ringPort) TxSlot() []byte {
	if p.TxRoom() == 0 {
		return nil
	}
	b := p.bufs[(p.head+p.wire+p.pend)%len(p.bufs)]
	return b[:cap(b)]
}
func (p *ringPort) TxCommit(n int) error {
	i := (p.head + p.wire + p.pend) % len(p.bufs)
	p.bufs[i] = p.bufs[i][:n]
	p.pend++
	return nil
}
func (p *ringPort) TxFlush() (int, error) {
	n := p.pend
	p.wire += n
	p.pend = 0
	return n, nil
}

// take hands every frame on the wire to fn, oldest first.
func (p *ringPort) take(fn func([]byte)) {
	for ; p.wire > 0; p.wire-- {
		fn(p.bufs[p.head])
		p.head = (p.head + 1) % len(p.bufs)
	}
}

// transmitHarness is a daemon's transmit path (transmit over a ringPort)
// driving a real MRC engine that writes 1 MiB messages to a second engine
// (MTU 2048), whose SACKs go straight back. step is one loop turn and
// returns the frames transmit sent; done counts the completed writes.
func transmitHarness(tb testing.TB) (step func() int, done *int) {
	var engs [2]*mrc.Engine
	var qps [2]wire.QPN
	var mems [2]*mrc.MemTable
	for i := range engs {
		var c mrc.Config
		c.Planes, c.MTU, c.Mode = 1, 2048, mrc.ECMP
		c.Addrs[0] = wire.Addr128FromNetip(netip.MustParseAddr(fmt.Sprintf("fd00:7::%d", i+1)))
		mems[i] = mrc.NewMemTable()
		e, err := mrc.New(c, mems[i], rand.New(rand.NewPCG(1, uint64(i))))
		if err != nil {
			tb.Fatal(err)
		}
		engs[i] = e
		if qps[i], err = e.CreateQP(mrc.QPConfig{}); err != nil {
			tb.Fatal(err)
		}
	}
	for i := range engs {
		info, _ := engs[1-i].Info(qps[1-i])
		if err := engs[i].Connect(qps[i], info); err != nil {
			tb.Fatal(err)
		}
	}
	const region = 16 << 20
	mems[0].Register(1, 0, make([]byte, region), mrc.AccessLocalRead)
	mems[1].Register(2, 0, make([]byte, region), mrc.AccessRemoteWrite)
	port := newRingPort(2048)
	d := txDaemon(port, engs[0])
	cq := make([]mrc.Completion, 256)
	var now mrc.Time
	var va uint64
	done = new(int)
	toSender := func(_ wire.Plane, f []byte) { engs[0].HandlePacket(now, 0, f) }
	toReceiver := func(f []byte) { engs[1].HandlePacket(now, 0, f) }
	post := func() {
		for engs[0].PostWrite(qps[0], mrc.WR{LKey: 1, Addr: va, Len: 1 << 20, RemoteVA: va, RKey: 2}) == nil {
			va = (va + 1<<20) % region
		}
	}
	return func() int {
		now += 2 * mrc.Microsecond
		port.take(toReceiver)
		engs[1].Poll(now, toSender)
		n := d.transmit(now)
		for k := engs[0].PollCQ(cq); k > 0; k = engs[0].PollCQ(cq) {
			for _, c := range cq[:k] {
				if c.Status != mrc.StatusOK {
					tb.Fatalf("write completed with %v", c.Status)
				}
			}
			*done += k
		}
		post()
		return n
	}, done
}

// TestTransmitNoAlloc: a loop turn of transmit, with the engine encoding
// data frames into the port's frames, allocates nothing.
func TestTransmitNoAlloc(t *testing.T) {
	step, done := transmitHarness(t)
	for range 2000 { // windows open, queues sized
		step()
	}
	sent, done0 := 0, *done
	allocs := testing.AllocsPerRun(500, func() { sent += step() })
	// 501 turns of 2 us at 2048 B per frame: about 1 GB/s of writes.
	if allocs != 0 || sent < 100 || *done == done0 {
		t.Fatalf("%v allocations per loop turn (%d frames sent, %d writes completed), want 0 with frames and writes flowing", allocs, sent, *done-done0)
	}
	t.Logf("%d frames, %d 1 MiB writes completed in 501 turns", sent, *done-done0)
}

// BenchmarkTransmit is the daemon's transmit (PollInto into the port's
// frames, the payload copied once from registered memory) with a real MRC
// engine, per data frame, the receiving engine's work included; allocs/op
// is per frame.
//
//	go test -run '^$' -bench Transmit -benchmem ./nic/daemon/
func BenchmarkTransmit(b *testing.B) {
	step, _ := transmitHarness(b)
	for range 2000 {
		step()
	}
	b.ReportAllocs()
	b.SetBytes(2048)
	b.ResetTimer()
	for sent := 0; sent < b.N; {
		sent += step()
	}
}
