package xsk

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// Multi-buffer (XDP_USE_SG) frames.
//
// A frame longer than one UMEM chunk travels as a chain of descriptors: every
// descriptor but the last carries XDP_PKT_CONTD in its options
// (Documentation/networking/af_xdp.rst, "Multi-Buffer Support"). On receive
// the kernel fills each chunk with at most FrameSize-XDP_PACKET_HEADROOM
// bytes (copy mode), so a 4 KiB-MTU RoCE frame (about 4.2 KB) arrives in two
// chunks; on transmit a descriptor may use its whole chunk.
//
// A socket opened with SocketConfig.MultiBuffer keeps the single-chunk fast
// path for frames that fit one chunk: only a chain costs a copy on receive
// (into one reassembly buffer, so RecvFunc still hands out one contiguous
// frame) and nothing extra on transmit, where each transmit slot is
// SGSlotChunks adjacent chunks and a frame built in it is cut into
// descriptors at the chunk boundaries.

// MaxLinearMTU is the largest veth MTU whose frames a native XDP program
// sees in one buffer (x86-64, 4 KiB pages; SRV6-XDP-FACTS §3): 3506. Above
// it only an xdp.frags program may attach, and frames arrive in fragments.
const MaxLinearMTU = 3506

// SGSlotChunks is the number of adjacent UMEM chunks of one transmit slot of
// a multi-buffer socket.
const SGSlotChunks = 2

// MaxSGFrameLen is the longest frame a multi-buffer socket sends or
// receives: one transmit slot. A 4096-byte RoCE MTU frame with both IPv6
// headers is about 4.2 KB.
const MaxSGFrameLen = SGSlotChunks * FrameSize

// rxChain reassembles one multi-descriptor frame. It is pure (no kernel) so
// the descriptor logic is tested on its own.
type rxChain struct {
	buf     []byte // MaxSGFrameLen bytes
	n       int    // bytes of the frame so far
	active  bool   // a chain has started and its last descriptor is still to come
	overrun bool   // the chain outgrew buf: drop it when it ends
}

// add takes one received descriptor's bytes. It returns the whole frame when
// p ends a chain that fit (valid until the next add), and dropped=true when
// p ends a chain that did not fit the buffer (a partial frame is never
// handed out).
func (c *rxChain) add(p []byte, contd bool) (frame []byte, dropped bool) {
	if !c.active {
		c.active, c.n, c.overrun = true, 0, false
	}
	if !c.overrun {
		if c.n+len(p) > len(c.buf) {
			c.overrun = true
		} else {
			c.n += copy(c.buf[c.n:], p)
		}
	}
	if contd {
		return nil, false
	}
	c.active = false
	if c.overrun {
		return nil, true
	}
	return c.buf[:c.n:c.n], false
}

// joinChain tries to hand out the multi-buffer frame whose first descriptor
// is rx ring entry cons+i without the reassembly copy. It returns the frame
// and its number of descriptors, or 0 when the chain does not end before
// entry cons+n or its chunks are not adjacent (then the caller copies).
func (s *Socket) joinChain(cons, i, n uint32) ([]byte, uint32) {
	var descs [MaxSGFrameLen/unix.XDP_PACKET_HEADROOM + 1]unix.XDPDesc
	k := 0
	for j := i; j < n && k < len(descs); j++ {
		descs[k] = s.rx.descs[(cons+j)&s.rx.mask]
		k++
		if descs[k-1].Options&unix.XDP_PKT_CONTD == 0 {
			if f := joinInPlace(s.umem, descs[:k]); f != nil {
				return f, uint32(k)
			}
			return nil, 0
		}
	}
	return nil, 0
}

// joinInPlace makes the descriptors of one multi-buffer frame one
// contiguous frame inside the UMEM when their chunks are adjacent, and
// returns it (nil when they are not, or the frame would outgrow
// MaxSGFrameLen). In copy mode the kernel fills a chunk from
// XDP_PACKET_HEADROOM to its end, so a 4 KiB-MTU frame lies in two
// adjacent chunks with a 256-byte gap where the second chunk's headroom
// is: moving the second descriptor's bytes back over that gap (a few
// hundred bytes) replaces copying the whole frame into the reassembly
// buffer. Only the frame's own chunks are written, and they are the
// caller's until they go back to the fill ring. Pure: the descriptor logic
// is tested without a kernel.
func joinInPlace(umem []byte, descs []unix.XDPDesc) []byte {
	first := descs[0]
	end := first.Addr + uint64(first.Len)
	chunk := first.Addr &^ (FrameSize - 1)
	for _, d := range descs[1:] {
		next := d.Addr &^ (FrameSize - 1)
		if next != chunk+FrameSize {
			return nil
		}
		chunk = next
	}
	total := end - first.Addr
	for _, d := range descs[1:] {
		total += uint64(d.Len)
	}
	if total > MaxSGFrameLen || first.Addr+total > uint64(len(umem)) {
		return nil
	}
	// Each descriptor's bytes start at or after the end of the ones
	// before (the previous chunk ends where this one begins), so copy
	// (memmove) moves them back or leaves them where they are.
	for _, d := range descs[1:] {
		end += uint64(copy(umem[end:], umem[d.Addr:d.Addr+uint64(d.Len)]))
	}
	return umem[first.Addr:end:end]
}

// pending reports whether a chain is waiting for its next descriptor (the rx
// ring ran dry or RecvFunc's max cut the batch mid-chain).
func (c *rxChain) pending() bool { return c.active }

// txDescs writes the descriptors of a frame of l bytes that starts at addr
// (a slot of adjacent chunks) into descs, cut at chunk boundaries, and
// returns how many it wrote. Every descriptor but the last has
// XDP_PKT_CONTD. descs must have room for (l+FrameSize-1)/FrameSize entries.
func txDescs(descs []unix.XDPDesc, addr uint64, l uint32) int {
	k := 0
	for l > FrameSize {
		descs[k] = unix.XDPDesc{Addr: addr, Len: FrameSize, Options: unix.XDP_PKT_CONTD}
		addr += FrameSize
		l -= FrameSize
		k++
	}
	descs[k] = unix.XDPDesc{Addr: addr, Len: l}
	return k + 1
}

// chunksFor is the number of descriptors a frame of l bytes takes.
func chunksFor(l int) uint32 { return uint32((l + FrameSize - 1) / FrameSize) }

// MaxFrame is the longest frame the socket sends: one transmit slot
// (FrameSize, or MaxSGFrameLen with MultiBuffer). TxSlot's buffers have this
// length.
func (s *Socket) MaxFrame() int { return int(s.slotLen) }

// MultiBuffer reports whether the socket is bound with XDP_USE_SG.
func (s *Socket) MultiBuffer() bool { return s.sg }

// putChain writes the descriptors of a frame of l bytes at addr from tx ring
// index idx on, cut at chunk boundaries.
func (s *Socket) putChain(idx uint32, addr uint64, l uint32) uint32 {
	var d [SGSlotChunks]unix.XDPDesc
	k := txDescs(d[:], addr, l)
	for j := range k {
		s.tx.descs[(idx+uint32(j))&s.tx.mask] = d[j]
	}
	return uint32(k)
}

// sendSG is Send on a multi-buffer socket: each frame is copied into one
// slot and queued as one descriptor per chunk it covers.
func (s *Socket) sendSG(frames [][]byte) (int, error) {
	prod := s.tx.cachedProd
	var used uint32
	var bytes uint64
	n := 0
	var err error
	for _, f := range frames {
		if len(f) == 0 || uint64(len(f)) > s.slotLen {
			err = fmt.Errorf("xsk: frame %d is %d bytes: must be 1..%d", n, len(f), s.slotLen)
			break
		}
		k := chunksFor(len(f))
		if len(s.txFree) == 0 || s.tx.free(used+k) < used+k {
			s.c.txFull.Add(uint64(len(frames) - n))
			break
		}
		addr := s.txFree[len(s.txFree)-1]
		s.txFree = s.txFree[:len(s.txFree)-1]
		copy(s.umem[addr:addr+s.slotLen], f)
		used += s.putChain(prod+used, addr, uint32(len(f)))
		bytes += uint64(len(f))
		n++
	}
	if used > 0 {
		s.tx.submit(used)
		s.c.txFrames.Add(uint64(n))
		s.c.txBytes.Add(bytes)
	}
	if kerr := s.kick(); err == nil {
		err = kerr
	}
	return n, err
}

// sendFuncSG is SendFunc on a multi-buffer socket: build gets a whole slot.
func (s *Socket) sendFuncSG(max int, build func(frame []byte) int) (int, error) {
	prod := s.tx.cachedProd
	slotChunks := uint32(s.slotLen / FrameSize)
	var used uint32
	var bytes uint64
	n := 0
	stopped := false
	for n < max && len(s.txFree) > 0 && s.tx.free(used+slotChunks) >= used+slotChunks {
		addr := s.txFree[len(s.txFree)-1]
		l := build(s.umem[addr : addr+s.slotLen : addr+s.slotLen])
		if l <= 0 || uint64(l) > s.slotLen {
			stopped = true
			break
		}
		s.txFree = s.txFree[:len(s.txFree)-1]
		used += s.putChain(prod+used, addr, uint32(l))
		bytes += uint64(l)
		n++
	}
	if !stopped && n < max {
		s.c.txFull.Add(uint64(max - n))
	}
	if used > 0 {
		s.tx.submit(used)
		s.c.txFrames.Add(uint64(n))
		s.c.txBytes.Add(bytes)
	}
	return n, s.kick()
}

// reclaimSG returns completed slots to the pool. The kernel completes a
// frame's descriptors together and in order, so a slot is free once the
// completion of its first chunk (the slot's base) is seen; the completions
// of its other chunks are skipped.
func (s *Socket) reclaimSG(cons, n uint32) {
	var frames uint64
	for i := range n {
		a := s.comp.addrs[(cons+i)&s.comp.mask] &^ (FrameSize - 1)
		if (a-s.txBase)%s.slotLen == 0 {
			s.txFree = append(s.txFree, a)
			frames++
		}
	}
	s.comp.release(n)
	s.c.txCompleted.Add(frames)
}
