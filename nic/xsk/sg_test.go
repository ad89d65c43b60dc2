package xsk

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestRxChain feeds descriptor sequences to the reassembly: a chain is handed
// out whole only at its last descriptor, an overrun chain is dropped (never
// handed out partly), and a chain cut between calls resumes.
func TestRxChain(t *testing.T) {
	type desc struct {
		n     int
		contd bool
	}
	tests := []struct {
		name      string
		descs     []desc
		wantLens  []int // frames handed out, in order
		wantDrops int
	}{
		{"single descriptor", []desc{{100, false}}, []int{100}, 0},
		{"two-chunk 4 KiB-MTU frame", []desc{{3840, true}, {380, false}}, []int{4220}, 0},
		{"three descriptors", []desc{{3000, true}, {3000, true}, {2000, false}}, []int{8000}, 0},
		{"exactly the buffer", []desc{{4096, true}, {4096, false}}, []int{MaxSGFrameLen}, 0},
		{"overrun is dropped", []desc{{4096, true}, {4096, true}, {1, false}}, nil, 1},
		{"frame after an overrun is whole", []desc{{4096, true}, {4097, false}, {64, false}, {10, true}, {20, false}}, []int{64, 30}, 1},
		{"back to back chains", []desc{{3840, true}, {1, false}, {3840, true}, {2, false}}, []int{3841, 3842}, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := rxChain{buf: make([]byte, MaxSGFrameLen)}
			var got []int
			var want []byte
			drops := 0
			for i, d := range tc.descs {
				p := payload(d.n, byte(i))
				want = append(want, p...)
				f, dropped := c.add(p, d.contd)
				if dropped {
					drops++
					want = want[:0]
				}
				if f != nil {
					if !bytes.Equal(f, want) {
						t.Fatalf("frame %d: bytes differ from the concatenated descriptors", len(got))
					}
					got = append(got, len(f))
				}
				if !d.contd {
					want = want[:0]
				}
				if c.pending() != d.contd {
					t.Errorf("after descriptor %d pending=%v, want %v", i, c.pending(), d.contd)
				}
			}
			if drops != tc.wantDrops || len(got) != len(tc.wantLens) {
				t.Fatalf("frames %v, drops %d; want %v, %d", got, drops, tc.wantLens, tc.wantDrops)
			}
			for i := range got {
				if got[i] != tc.wantLens[i] {
					t.Errorf("frame %d is %d bytes, want %d", i, got[i], tc.wantLens[i])
				}
			}
		})
	}
}

// TestJoinInPlace: a multi-buffer frame in adjacent chunks becomes one
// contiguous frame, byte for byte the concatenation of its descriptors, and
// only its own chunks are written; chunks apart, a frame too long or one
// past the UMEM are left to the copy.
func TestJoinInPlace(t *testing.T) {
	const hr = unix.XDP_PACKET_HEADROOM
	type desc struct {
		chunk, off, n int
	}
	tests := []struct {
		name  string
		descs []desc
		join  bool
	}{
		{"4 KiB-MTU frame in chunks 2 and 3", []desc{{2, hr, FrameSize - hr}, {3, hr, 354}}, true},
		{"three chunks", []desc{{1, hr, FrameSize - hr}, {2, hr, FrameSize - hr}, {3, hr, 100}}, true},
		{"short first descriptor", []desc{{4, hr, 100}, {5, hr, 200}}, true},
		{"second chunk no headroom", []desc{{0, hr, FrameSize - hr}, {1, 0, 500}}, true},
		{"chunks apart", []desc{{2, hr, FrameSize - hr}, {4, hr, 354}}, false},
		{"chunks backwards (the fill ring's wrap)", []desc{{5, hr, FrameSize - hr}, {0, hr, 354}}, false},
		{"longer than MaxSGFrameLen", []desc{{0, 0, FrameSize}, {1, 0, FrameSize}, {2, 0, 1}}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			umem := make([]byte, 6*FrameSize)
			for i := range umem {
				umem[i] = 0xee
			}
			var descs []unix.XDPDesc
			var want []byte
			for i, d := range tc.descs {
				p := payload(d.n, byte(i+1))
				a := uint64(d.chunk*FrameSize + d.off)
				copy(umem[a:], p)
				want = append(want, p...)
				descs = append(descs, unix.XDPDesc{Addr: a, Len: uint32(d.n)})
			}
			before := bytes.Clone(umem)
			f := joinInPlace(umem, descs)
			if !tc.join {
				if f != nil || !bytes.Equal(umem, before) {
					t.Fatalf("joined (or wrote the UMEM); want it left to the copy")
				}
				return
			}
			if !bytes.Equal(f, want) {
				t.Fatalf("frame of %d bytes differs from the %d bytes of its descriptors", len(f), len(want))
			}
			if cap(f) != len(f) {
				t.Errorf("frame cap %d, want its length %d", cap(f), len(f))
			}
			lo := tc.descs[0].chunk * FrameSize
			hi := (tc.descs[len(tc.descs)-1].chunk + 1) * FrameSize
			if !bytes.Equal(umem[:lo], before[:lo]) || !bytes.Equal(umem[hi:], before[hi:]) {
				t.Error("wrote outside the frame's chunks")
			}
		})
	}
}

// TestTxDescs: a frame is cut at chunk boundaries, XDP_PKT_CONTD on all but
// the last descriptor, lengths adding up to the frame.
func TestTxDescs(t *testing.T) {
	for _, l := range []uint32{1, 2048, FrameSize - 1, FrameSize, FrameSize + 1, 4220, MaxSGFrameLen} {
		var d [SGSlotChunks]unix.XDPDesc
		k := txDescs(d[:], 3*FrameSize, l)
		if want := int(chunksFor(int(l))); k != want {
			t.Fatalf("len %d: %d descriptors, want %d", l, k, want)
		}
		var sum uint32
		for i := range k {
			if d[i].Addr != uint64(3+i)*FrameSize {
				t.Errorf("len %d desc %d at %#x, want chunk %d", l, i, d[i].Addr, 3+i)
			}
			if contd := d[i].Options&unix.XDP_PKT_CONTD != 0; contd != (i < k-1) {
				t.Errorf("len %d desc %d: XDP_PKT_CONTD=%v", l, i, contd)
			}
			if d[i].Len > FrameSize {
				t.Errorf("len %d desc %d: %d bytes, more than a chunk", l, i, d[i].Len)
			}
			sum += d[i].Len
		}
		if sum != l {
			t.Errorf("len %d: descriptors hold %d bytes", l, sum)
		}
	}
}

// TestVethMultiBuffer sends 4 KiB-MTU RoCE-sized frames (about 4.2 KB, more
// than one chunk) between two multi-buffer sockets over a veth pair with an
// MTU above the non-frags limit of 3506, through the xdp.frags steering
// program, by all three transmit paths, mixed with small frames: every frame
// arrives whole, byte-exact and in order, and the counters count frames, not
// descriptors.
func TestVethMultiBuffer(t *testing.T) {
	requireXDP(t)
	const mtu = 4500
	n := newVethNet(t, mtu)
	open := func(ns int) *XDPPort {
		h, ifn, a, u := n.nsA, n.ifA, n.addrA, uint16(0xc000)
		if ns == 1 {
			h, ifn, a, u = n.nsB, n.ifB, n.addrB, 0xc100
		}
		return openIn(t, h, Config{Ifname: ifn, RingSize: 256, Attach: AttachNative, MultiBuffer: true,
			USIDPrefixes: []netip.Prefix{mustUSID(t, u)}, Addrs: []netip.Addr{a}})
	}
	a, b := open(0), open(1)
	if !a.MultiBuffer() || a.MaxFrame() != MaxSGFrameLen {
		t.Fatalf("MultiBuffer %v MaxFrame %d, want true %d", a.MultiBuffer(), a.MaxFrame(), MaxSGFrameLen)
	}
	const total = 600
	var want [][]byte
	for i := range total {
		size := 4096 + 12 + 16 + 4 // 4 KiB-MTU RDMA WRITE payload + BTH + RETH + ICRC
		if i%3 == 1 {
			size = 100 + i
		}
		p := payload(size, byte(i))
		binary.BigEndian.PutUint32(p, uint32(i))
		want = append(want, udpFrame(n.macB, n.macA, n.addrA, n.addrB, 49152, 4791, p))
	}
	transferInOrder(t, a, b, want, 32, func(sent, k int) (int, error) {
		var m int
		var err error
		switch (sent / 8) % 3 { // the three transmit paths, in turns
		case 0:
			m, err = a.Send(want[sent:k])
		case 1:
			j := sent
			m, err = a.SendFunc(k-sent, func(f []byte) int { j++; return copy(f, want[j-1]) })
		case 2:
			for ; sent+m < k; m++ {
				s := a.TxSlot()
				if s == nil {
					break
				}
				if err = a.TxCommit(copy(s, want[sent+m])); err != nil {
					break
				}
			}
			if err == nil {
				_, err = a.TxFlush()
			}
		}
		return m, err
	})
	waitFor(t, "all transmit completions", 5*time.Second, func() bool {
		_ = a.Wait(0)
		return a.Stats().TxCompleted == total
	})
	sa, sb := a.Stats(), b.Stats()
	if sa.TxFrames != total || sb.RxFrames != total || sb.RxPartial != 0 {
		t.Errorf("a tx %d completed %d, b rx %d partial %d; want %d, %d, %d, 0", sa.TxFrames, sa.TxCompleted, sb.RxFrames, sb.RxPartial, total, total, total)
	}
	// The fill ring hands the kernel its chunks in ascending order, so
	// nearly every 2-chunk frame lies in adjacent chunks and is joined
	// where it lies; the rest (a chain cut by a batch, the ring's wrap)
	// is copied. Before the join every one was copied.
	big := uint64(total - total/3)
	t.Logf("b: %d multi-buffer frames joined in place, %d copied", sb.RxJoined, sb.RxCopied)
	if sb.RxJoined+sb.RxCopied != big || sb.RxJoined < big*3/4 {
		t.Errorf("b's multi-buffer frames: %d joined in place, %d copied; want %d in all, at least %d joined", sb.RxJoined, sb.RxCopied, big, big*3/4)
	}
	if sa.TxInvalid != 0 || sb.RxDropped != 0 {
		t.Errorf("kernel: a tx invalid %d, b rx dropped %d; want 0", sa.TxInvalid, sb.RxDropped)
	}
	// Longer than a slot is an error, not a truncation.
	if _, err := a.Send([][]byte{make([]byte, MaxSGFrameLen+1)}); err == nil {
		t.Error("Send of a frame longer than MaxSGFrameLen succeeded")
	}
}
