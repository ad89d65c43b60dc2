package xsk

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// FrameSize is the size of one UMEM chunk. The kernel places a received frame
// XDP_PACKET_HEADROOM (256) bytes into its chunk in copy mode, so 4096 leaves
// room for a 3506-byte MTU (the veth native-XDP limit); 2048 would not hold a
// 2 KiB-MTU frame.
const FrameSize = 4096

// MaxFrameLen is the longest frame a Port can receive.
const MaxFrameLen = FrameSize - unix.XDP_PACKET_HEADROOM

// DefaultRingSize is the size of each of the four rings when Config leaves it 0.
const DefaultRingSize = 2048

// ErrClosed is returned by calls on a closed port; it matches net.ErrClosed
// under errors.Is.
var ErrClosed = fmt.Errorf("xsk: port is closed: %w", net.ErrClosed)

// SocketConfig configures NewSocket.
type SocketConfig struct {
	// Ifindex and Queue name the interface queue to bind, in the network
	// namespace of the calling thread.
	Ifindex int
	Queue   int
	// RingSize is the number of entries of each ring (fill, rx, tx,
	// completion), a power of two; 0 means DefaultRingSize. The UMEM holds
	// RingSize frames for receive and RingSize for transmit, so the frame
	// pool is bounded at 2*RingSize*FrameSize bytes.
	RingSize int
	// BindTimeout bounds the retries of bind while the queue is still busy
	// from a socket being torn down (EBUSY); 0 means 3 s.
	BindTimeout time.Duration
	// Logger receives bind retries; nil means slog.Default().
	Logger *slog.Logger
	// MultiBuffer binds with XDP_USE_SG: frames up to MaxSGFrameLen (a
	// 4096-byte RoCE MTU) are received and sent as descriptor chains, and
	// each transmit slot is SGSlotChunks chunks. Without it a frame must
	// fit one chunk (MaxFrameLen on receive, FrameSize on transmit).
	MultiBuffer bool
	// KickThread makes the transmit kicks (sendto) on a thread of the
	// socket's own instead of the caller's (kicker.go): in copy mode the
	// kick is the transmit, so the caller's encode and the kernel's copy
	// run on two cores. Send, TxFlush and Wait then only publish and poke.
	KickThread bool
}

// Socket is one AF_XDP socket with its own UMEM. Recv, RecvFunc, Send, Wait
// and Close must be called from one goroutine (the port's run loop); Stats may
// be called from any goroutine.
type Socket struct {
	fd       int
	efd      int // eventfd: Wake makes Wait return
	ifindex  int
	queue    int
	zerocopy bool

	umem     []byte
	fill     *ring
	comp     *ring
	rx       *ring
	tx       *ring
	txFree   []uint64 // free transmit chunks: the bounded transmit pool
	rxFree   []uint64 // free receive chunks not yet back on the fill ring
	txBudget bool     // XDP_MAX_TX_SKB_BUDGET was raised to the ring size
	// txPend frames were committed by TxCommit into tx descriptors after
	// cachedProd but not yet published to the kernel (TxFlush does).
	txPend    uint32
	txPendLen uint64 // their bytes

	// Multi-buffer (sg.go): slotLen is the transmit slot (FrameSize, or
	// SGSlotChunks chunks), txBase the UMEM offset of the transmit pool,
	// txPendFrames the frames of txPend's descriptors, chain the receive
	// reassembly.
	sg           bool
	slotLen      uint64
	txBase       uint64
	txPendFrames uint32
	chain        rxChain

	c counters

	kicker *kicker // nil: the caller kicks (SocketConfig.KickThread)

	mu     sync.Mutex // guards closed and fd against Stats racing Close
	closed bool
}

type counters struct {
	rxFrames, rxBytes, rxOversize atomic.Uint64
	txFrames, txBytes, txFull     atomic.Uint64
	txCompleted, kicks, polls     atomic.Uint64
	txKickErrors                  atomic.Uint64
	rxPartial, rxJoined, rxCopied atomic.Uint64
}

// NewSocket creates, maps and binds an AF_XDP socket on one interface queue in
// the calling thread's network namespace. Frames reach it only once an XDP
// program redirects them into it (Steer.Register).
func NewSocket(cfg SocketConfig) (_ *Socket, err error) {
	size := cfg.RingSize
	if size == 0 {
		size = DefaultRingSize
	}
	if size < 64 || size > 1<<16 || size&(size-1) != 0 {
		return nil, fmt.Errorf("xsk: ring size %d: must be a power of two between 64 and 65536", size)
	}
	if cfg.Ifindex <= 0 {
		return nil, fmt.Errorf("xsk: ifindex %d: must name an interface (> 0)", cfg.Ifindex)
	}
	if cfg.Queue < 0 {
		return nil, fmt.Errorf("xsk: queue %d: must be >= 0", cfg.Queue)
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	fd, err := unix.Socket(unix.AF_XDP, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("xsk: socket(AF_XDP): %w (kernel without CONFIG_XDP_SOCKETS, or not root)", err)
	}
	s := &Socket{fd: fd, efd: -1, ifindex: cfg.Ifindex, queue: cfg.Queue, sg: cfg.MultiBuffer, slotLen: FrameSize}
	slotChunks := 1
	if s.sg {
		slotChunks = SGSlotChunks
		s.slotLen = MaxSGFrameLen
		s.chain.buf = make([]byte, MaxSGFrameLen)
	}
	defer func() {
		if err != nil {
			s.release()
		}
	}()

	if s.efd, err = unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC); err != nil {
		return nil, fmt.Errorf("xsk: eventfd: %w", err)
	}
	nframes := size + size*slotChunks
	s.umem, err = unix.Mmap(-1, 0, nframes*FrameSize, unix.PROT_READ|unix.PROT_WRITE,
		unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_POPULATE)
	if err != nil {
		return nil, fmt.Errorf("xsk: mmap UMEM of %d frames: %w", nframes, err)
	}
	reg := unix.XDPUmemReg{
		Addr: uint64(uintptr(unsafe.Pointer(&s.umem[0]))),
		Len:  uint64(len(s.umem)),
		Size: FrameSize,
	}
	if err := setsockopt(fd, unix.XDP_UMEM_REG, unsafe.Pointer(&reg), unsafe.Sizeof(reg)); err != nil {
		return nil, fmt.Errorf("xsk: XDP_UMEM_REG (%d frames of %d bytes): %w", nframes, FrameSize, err)
	}
	for _, o := range []int{unix.XDP_UMEM_FILL_RING, unix.XDP_UMEM_COMPLETION_RING, unix.XDP_RX_RING, unix.XDP_TX_RING} {
		if err := unix.SetsockoptInt(fd, unix.SOL_XDP, o, size); err != nil {
			return nil, fmt.Errorf("xsk: set ring size %d (option %d): %w", size, o, err)
		}
	}
	var off unix.XDPMmapOffsets
	if err := getsockopt(fd, unix.XDP_MMAP_OFFSETS, unsafe.Pointer(&off), unsafe.Sizeof(off)); err != nil {
		return nil, fmt.Errorf("xsk: XDP_MMAP_OFFSETS: %w", err)
	}
	u32 := uint32(size)
	if s.fill, err = mapRing(fd, off.Fr, unix.XDP_UMEM_PGOFF_FILL_RING, u32, 8, true); err != nil {
		return nil, fmt.Errorf("xsk: fill ring: %w", err)
	}
	if s.comp, err = mapRing(fd, off.Cr, unix.XDP_UMEM_PGOFF_COMPLETION_RING, u32, 8, true); err != nil {
		return nil, fmt.Errorf("xsk: completion ring: %w", err)
	}
	if s.rx, err = mapRing(fd, off.Rx, unix.XDP_PGOFF_RX_RING, u32, unsafe.Sizeof(unix.XDPDesc{}), false); err != nil {
		return nil, fmt.Errorf("xsk: rx ring: %w", err)
	}
	if s.tx, err = mapRing(fd, off.Tx, unix.XDP_PGOFF_TX_RING, u32, unsafe.Sizeof(unix.XDPDesc{}), false); err != nil {
		return nil, fmt.Errorf("xsk: tx ring: %w", err)
	}

	// The first half of the UMEM receives: every chunk starts on the fill
	// ring, and RecvFunc hands each chunk straight back after use. The second
	// half is the transmit pool.
	for i := range size {
		s.fill.addrs[i] = uint64(i * FrameSize)
	}
	s.fill.submit(u32)
	s.rxFree = make([]uint64, 0, size)
	s.txFree = make([]uint64, 0, size)
	s.txBase = uint64(size * FrameSize)
	for i := range size {
		s.txFree = append(s.txFree, s.txBase+uint64(i)*s.slotLen)
	}

	// Copy-mode transmit sends at most XDP_MAX_TX_SKB_BUDGET (32 by default)
	// frames per sendto; raising it to the ring size makes one kick drain a
	// whole batch. Kernels before 6.17 lack the option: then Send kicks again.
	s.txBudget = unix.SetsockoptInt(fd, unix.SOL_XDP, unix.XDP_MAX_TX_SKB_BUDGET, size) == nil

	if err := s.bind(cfg, log); err != nil {
		return nil, err
	}
	if cfg.KickThread {
		s.kicker = newKicker(s)
	}
	var opts struct{ Flags uint32 }
	if getsockopt(fd, unix.XDP_OPTIONS, unsafe.Pointer(&opts), unsafe.Sizeof(opts)) == nil {
		s.zerocopy = opts.Flags&unix.XDP_OPTIONS_ZEROCOPY != 0
	}
	return s, nil
}

// bind binds the socket, retrying while the queue is busy. A queue stays busy
// for a moment after its previous socket is closed (the kernel releases the
// binding when the last reference, including the ring mmaps, goes away).
func (s *Socket) bind(cfg SocketConfig, log *slog.Logger) error {
	timeout := cfg.BindTimeout
	if timeout == 0 {
		timeout = 3 * time.Second
	}
	sa := &unix.SockaddrXDP{Flags: unix.XDP_USE_NEED_WAKEUP, Ifindex: uint32(cfg.Ifindex), QueueID: uint32(cfg.Queue)}
	if cfg.MultiBuffer {
		sa.Flags |= unix.XDP_USE_SG
	}
	deadline := time.Now().Add(timeout)
	backoff := 5 * time.Millisecond
	for {
		err := unix.Bind(s.fd, sa)
		if err == nil {
			return nil
		}
		if !errors.Is(err, unix.EBUSY) || time.Now().After(deadline) {
			hint := ""
			switch {
			case errors.Is(err, unix.EBUSY):
				hint = " (another AF_XDP socket holds this queue; close it or pick another queue)"
			case errors.Is(err, unix.EINVAL):
				hint = " (the interface has no such queue, or is not in this network namespace)"
			case errors.Is(err, unix.EOPNOTSUPP) && cfg.MultiBuffer:
				hint = " (the driver does not support AF_XDP multi-buffer, XDP_USE_SG: use a RoCE MTU of 2048)"
			case errors.Is(err, unix.ENODEV):
				hint = " (no such interface in this network namespace)"
			}
			return fmt.Errorf("xsk: bind ifindex %d queue %d: %w%s", cfg.Ifindex, cfg.Queue, err, hint)
		}
		log.Debug("xsk: queue busy, retrying bind", "ifindex", cfg.Ifindex, "queue", cfg.Queue, "backoff", backoff)
		time.Sleep(backoff) // waiting on the kernel's deferred release; there is no event to poll
		backoff = min(2*backoff, 200*time.Millisecond)
	}
}

// FD returns the socket's file descriptor, for registering it in an XSKMAP.
func (s *Socket) FD() int { return s.fd }

// Ifindex and Queue return what the socket is bound to.
func (s *Socket) Ifindex() int { return s.ifindex }

// Queue returns the queue the socket is bound to.
func (s *Socket) Queue() int { return s.queue }

// ZeroCopy reports whether the kernel bound the socket in zero-copy mode
// (never on veth, which supports copy mode only).
func (s *Socket) ZeroCopy() bool { return s.zerocopy }

// RecvFunc hands up to max received frames to fn without copying them, then
// returns their chunks to the fill ring. The frame slice is valid only during
// fn. It returns the number of frames handed to fn and never blocks.
func (s *Socket) RecvFunc(max int, fn func(frame []byte)) (int, error) {
	if s.closed {
		return 0, ErrClosed
	}
	if max <= 0 {
		return 0, nil
	}
	n := s.rx.avail(uint32(min(max, int(s.rx.size))))
	if n == 0 {
		return 0, nil
	}
	var bytes uint64
	frames := n
	cons := s.rx.cachedCons
	for i := uint32(0); i < n; i++ {
		d := s.rx.descs[(cons+i)&s.rx.mask]
		if d.Options&unix.XDP_PKT_CONTD != 0 && !s.chain.pending() {
			// A multi-buffer frame starts: joined where it lies when it
			// can be (sg.go), or reassembled by a copy below.
			if f, k := s.joinChain(cons, i, n); k > 0 {
				for j := range k {
					dj := s.rx.descs[(cons+i+j)&s.rx.mask]
					bytes += uint64(dj.Len)
					s.rxFree = append(s.rxFree, dj.Addr&^(FrameSize-1))
				}
				frames -= k - 1
				i += k - 1
				s.c.rxJoined.Add(1)
				fn(f)
				continue
			}
			s.c.rxCopied.Add(1)
		}
		bytes += uint64(d.Len)
		// In aligned mode the chunk base is the address rounded down.
		s.rxFree = append(s.rxFree, d.Addr&^(FrameSize-1))
		if d.Options&unix.XDP_PKT_CONTD != 0 || s.chain.pending() {
			// One descriptor of a multi-buffer frame: handed out whole
			// when its last descriptor arrives (maybe in a later call).
			frames--
			f, dropped := s.chain.add(s.umem[d.Addr:d.Addr+uint64(d.Len)], d.Options&unix.XDP_PKT_CONTD != 0)
			if dropped {
				s.c.rxPartial.Add(1)
			} else if f != nil {
				frames++
				fn(f)
			}
			continue
		}
		fn(s.umem[d.Addr : d.Addr+uint64(d.Len) : d.Addr+uint64(d.Len)])
	}
	s.rx.release(n)
	s.refill()
	s.c.rxFrames.Add(uint64(frames))
	s.c.rxBytes.Add(bytes)
	return int(frames), nil
}

// Recv copies up to len(bufs) received frames into bufs, setting bufs[i] to
// bufs[i][:frameLen]. A frame longer than cap(bufs[i]) is dropped and counted
// as RxOversize; give buffers of MaxFrameLen to never drop. It never blocks.
func (s *Socket) Recv(bufs [][]byte) (int, error) {
	n := 0
	_, err := s.RecvFunc(len(bufs), func(f []byte) {
		b := bufs[n][:cap(bufs[n])]
		if len(f) > len(b) {
			s.c.rxOversize.Add(1)
			return
		}
		bufs[n] = b[:copy(b, f)]
		n++
	})
	return n, err
}

// Send copies frames into transmit chunks and queues them, kicking the kernel
// when it asks. It returns how many frames were queued: fewer than len(frames)
// when the transmit pool or ring is full (counted as TxFull); the caller
// retries the rest later. A frame longer than FrameSize is an error.
func (s *Socket) Send(frames [][]byte) (int, error) {
	if s.closed {
		return 0, ErrClosed
	}
	s.publish() // frames committed earlier go first, and their descriptors stay theirs
	s.reclaim()
	if s.sg {
		return s.sendSG(frames)
	}
	n := min(uint32(len(frames)), uint32(len(s.txFree)))
	n = min(n, s.tx.free(n))
	prod := s.tx.cachedProd
	var bytes uint64
	for i := range n {
		f := frames[i]
		if len(f) > FrameSize || len(f) == 0 {
			n = i
			if n > 0 {
				s.tx.submit(n)
				s.c.txFrames.Add(uint64(n))
				s.c.txBytes.Add(bytes)
				_ = s.kick()
			}
			return int(n), fmt.Errorf("xsk: frame %d is %d bytes: must be 1..%d (larger frames need SocketConfig.MultiBuffer)", i, len(f), FrameSize)
		}
		addr := s.txFree[len(s.txFree)-1]
		s.txFree = s.txFree[:len(s.txFree)-1]
		copy(s.umem[addr:addr+FrameSize], f)
		s.tx.descs[(prod+i)&s.tx.mask] = unix.XDPDesc{Addr: addr, Len: uint32(len(f))}
		bytes += uint64(len(f))
	}
	if short := uint32(len(frames)) - n; short > 0 {
		s.c.txFull.Add(uint64(short))
	}
	if n == 0 {
		return 0, s.kick() // make room: the kernel may hold frames from an earlier EAGAIN
	}
	s.tx.submit(n)
	s.c.txFrames.Add(uint64(n))
	s.c.txBytes.Add(bytes)
	return int(n), s.kick()
}

// SendFunc queues up to max frames built in place: build gets a whole
// FrameSize chunk of the UMEM, writes one frame at its start and returns the
// frame's length, or 0 to stop early (nothing is queued for that call). This
// saves Send's copy. It returns how many frames were queued; when the pool or
// ring ran out first, the shortfall counts as TxFull.
func (s *Socket) SendFunc(max int, build func(frame []byte) int) (int, error) {
	if s.closed {
		return 0, ErrClosed
	}
	if max <= 0 {
		return 0, nil
	}
	s.publish()
	s.reclaim()
	if s.sg {
		return s.sendFuncSG(max, build)
	}
	room := min(uint32(len(s.txFree)), s.tx.free(uint32(max)))
	n := uint32(0)
	prod := s.tx.cachedProd
	var bytes uint64
	stopped := false
	for n < room && n < uint32(max) {
		addr := s.txFree[len(s.txFree)-1]
		l := build(s.umem[addr : addr+FrameSize : addr+FrameSize])
		if l <= 0 || l > FrameSize {
			stopped = true
			break
		}
		s.txFree = s.txFree[:len(s.txFree)-1]
		s.tx.descs[(prod+n)&s.tx.mask] = unix.XDPDesc{Addr: addr, Len: uint32(l)}
		bytes += uint64(l)
		n++
	}
	if !stopped && n < uint32(max) {
		s.c.txFull.Add(uint64(uint32(max) - n))
	}
	if n > 0 {
		s.tx.submit(n)
		s.c.txFrames.Add(uint64(n))
		s.c.txBytes.Add(bytes)
	}
	return int(n), s.kick()
}

// TxSlot returns the next free transmit chunk (FrameSize bytes of the
// UMEM) for a frame to be built in place, or nil when the transmit pool or
// ring is full (counted as TxFull). TxCommit queues the frame built in it;
// TxFlush hands every committed frame to the kernel with at most one kick.
// A slot not committed is returned again by the next TxSlot. With Send and
// SendFunc this is the third way to transmit, and the only one with neither
// a copy nor a kick per call: the NIC daemon's engine encodes each frame,
// payload included, straight into the UMEM.
func (s *Socket) TxSlot() []byte {
	if s.closed {
		return nil
	}
	if len(s.txFree) == 0 {
		s.reclaim()
	}
	need := s.txPend + uint32(s.slotLen/FrameSize)
	if len(s.txFree) == 0 || s.tx.free(need) < need {
		s.c.txFull.Add(1)
		return nil
	}
	addr := s.txFree[len(s.txFree)-1]
	return s.umem[addr : addr+s.slotLen : addr+s.slotLen]
}

// TxCommit queues the frame of n bytes built in the chunk the last TxSlot
// returned. It is not sent before TxFlush (or the next Send, SendFunc or
// Wait, which flush first).
func (s *Socket) TxCommit(n int) error {
	if s.closed {
		return ErrClosed
	}
	if n <= 0 || uint64(n) > s.slotLen {
		return fmt.Errorf("xsk: TxCommit of %d bytes: must be 1..%d", n, s.slotLen)
	}
	k := chunksFor(n)
	if len(s.txFree) == 0 || s.tx.free(s.txPend+k) < s.txPend+k {
		return fmt.Errorf("xsk: TxCommit without a slot (TxSlot returned nil)")
	}
	addr := s.txFree[len(s.txFree)-1]
	s.txFree = s.txFree[:len(s.txFree)-1]
	if k == 1 {
		s.tx.descs[(s.tx.cachedProd+s.txPend)&s.tx.mask] = unix.XDPDesc{Addr: addr, Len: uint32(n)}
	} else {
		s.putChain(s.tx.cachedProd+s.txPend, addr, uint32(n))
	}
	s.txPend += k
	s.txPendFrames++
	s.txPendLen += uint64(n)
	return nil
}

// TxFlush publishes the committed frames to the kernel and kicks it once
// if it asks (need_wakeup). It returns how many frames it published.
func (s *Socket) TxFlush() (int, error) {
	if s.closed {
		return 0, ErrClosed
	}
	n := s.publish()
	if n == 0 && s.tx.outstanding() == 0 {
		return 0, nil
	}
	return int(n), s.kick()
}

// publish hands the committed frames to the kernel without a kick.
func (s *Socket) publish() uint32 {
	n := s.txPend
	if n == 0 {
		return 0
	}
	s.tx.submit(n)
	frames := s.txPendFrames
	s.c.txFrames.Add(uint64(frames))
	s.c.txBytes.Add(s.txPendLen)
	s.txPend, s.txPendLen, s.txPendFrames = 0, 0, 0
	return frames
}

// reclaim moves completed transmit chunks back to the pool.
func (s *Socket) reclaim() {
	n := s.comp.avail(s.comp.size)
	if n == 0 {
		return
	}
	cons := s.comp.cachedCons
	if s.sg {
		s.reclaimSG(cons, n)
		return
	}
	for i := range n {
		s.txFree = append(s.txFree, s.comp.addrs[(cons+i)&s.comp.mask]&^(FrameSize-1))
	}
	s.comp.release(n)
	s.c.txCompleted.Add(uint64(n))
}

// kick asks the kernel to transmit what is on the tx ring, if it wants to be
// asked. Copy mode stops a sendto early with EAGAIN (budget spent or device
// busy) or EBUSY (the driver dropped a frame, e.g. one longer than the MTU:
// it is completed, not sent); both leave the rest on the ring, so kick again,
// a bounded number of times. What is still left goes with the next Send or
// Wait.
func (s *Socket) kick() error {
	if s.kicker != nil {
		if s.tx.outstanding() == 0 || !s.tx.needWakeup() {
			return nil // nothing to send: do not wake the kick thread
		}
		return s.kicker.poke()
	}
	for try := 0; try < 8; try++ {
		if !s.tx.needWakeup() || s.tx.outstanding() == 0 {
			return nil
		}
		s.c.kicks.Add(1)
		_, _, errno := unix.Syscall6(unix.SYS_SENDTO, uintptr(s.fd), 0, 0, unix.MSG_DONTWAIT, 0, 0)
		switch errno {
		case 0:
			if s.txBudget {
				return nil
			}
		case unix.EINTR, unix.EAGAIN:
		case unix.EBUSY, unix.ENOBUFS:
			s.c.txKickErrors.Add(1)
		default:
			s.c.txKickErrors.Add(1)
			return fmt.Errorf("xsk: transmit kick on ifindex %d queue %d: %w (interface down or gone?)", s.ifindex, s.queue, errno)
		}
	}
	return nil
}

// refill moves free receive chunks to the fill ring. The kernel publishes
// its fill-ring consumer index lazily, so the ring can look full while chunks
// it took already sit on the rx ring: what does not fit waits in rxFree.
func (s *Socket) refill() {
	n := min(uint32(len(s.rxFree)), s.fill.free(uint32(len(s.rxFree))))
	if n == 0 {
		return
	}
	// Oldest first: the fill ring then hands the kernel the chunks in the
	// order they were first given, ascending but for one wrap, so the
	// chunks of a multi-buffer frame are mostly adjacent and it can be
	// joined in place (sg.go).
	prod := s.fill.cachedProd
	for i, a := range s.rxFree[:n] {
		s.fill.addrs[(prod+uint32(i))&s.fill.mask] = a
	}
	s.rxFree = s.rxFree[:copy(s.rxFree, s.rxFree[n:])]
	s.fill.submit(n)
	if s.fill.needWakeup() {
		s.wakeRx()
	}
}

// wakeRx tells the kernel the fill ring has chunks again.
func (s *Socket) wakeRx() {
	s.c.kicks.Add(1)
	_, _, _ = unix.Syscall6(unix.SYS_RECVFROM, uintptr(s.fd), 0, 0, unix.MSG_DONTWAIT, 0, 0)
}

// Wait blocks until a frame is ready to receive, Wake is called or timeout
// passes (returning nil in all three cases), after kicking pending
// transmissions and collecting completions. A negative timeout waits without
// limit. Wait(0) only kicks and collects: it makes no poll syscall (a poll
// with a zero timeout reports readiness and nobody reads it; the daemon's
// idle path calls Wait(0) before its own ppoll, and the extra syscall was a
// fifth of a receiving daemon's syscalls). A Wake it does not consume ends
// the next blocking Wait.
func (s *Socket) Wait(timeout time.Duration) error {
	if s.closed {
		return ErrClosed
	}
	s.publish()
	s.reclaim()
	s.refill()
	if err := s.kick(); err != nil {
		return err
	}
	if timeout == 0 || s.rx.avail(1) > 0 {
		return nil
	}
	ms := -1
	if timeout >= 0 {
		ms = int((timeout + time.Millisecond - 1) / time.Millisecond)
	}
	fds := [2]unix.PollFd{{Fd: int32(s.fd), Events: unix.POLLIN}, {Fd: int32(s.efd), Events: unix.POLLIN}}
	for {
		s.c.polls.Add(1)
		_, err := unix.Poll(fds[:], ms)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return fmt.Errorf("xsk: poll: %w", err)
		}
		if fds[1].Revents&unix.POLLIN != 0 {
			var b [8]byte
			_, _ = unix.Read(s.efd, b[:]) // reset the eventfd counter
		}
		return nil
	}
}

// Wake makes a Wait in progress, or the next one, return at once. It is safe
// from any goroutine, e.g. to tell the run loop that work was posted.
func (s *Socket) Wake() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	one := [8]byte{1}
	_, _ = unix.Write(s.efd, one[:]) // EAGAIN only when already signalled
}

// RxPending is how many descriptors wait in the RX ring now (the kernel's
// producer index against this socket's consumer index): what arrived and
// is not read yet. Call it from the receiving goroutine.
func (s *Socket) RxPending() int {
	if s.closed {
		return 0
	}
	return int(atomic.LoadUint32(s.rx.prod) - s.rx.cachedCons)
}

// Stats returns the counters; safe from any goroutine.
func (s *Socket) Stats() Stats {
	st := Stats{
		RxFrames:     s.c.rxFrames.Load(),
		RxBytes:      s.c.rxBytes.Load(),
		RxOversize:   s.c.rxOversize.Load(),
		RxPartial:    s.c.rxPartial.Load(),
		RxJoined:     s.c.rxJoined.Load(),
		RxCopied:     s.c.rxCopied.Load(),
		TxFrames:     s.c.txFrames.Load(),
		TxBytes:      s.c.txBytes.Load(),
		TxFull:       s.c.txFull.Load(),
		TxCompleted:  s.c.txCompleted.Load(),
		Kicks:        s.c.kicks.Load(),
		Polls:        s.c.polls.Load(),
		TxKickErrors: s.c.txKickErrors.Load(),
	}
	if s.kicker != nil {
		st.KickerWakes = s.kicker.pokes.Load()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return st
	}
	var ks unix.XDPStatistics
	if getsockopt(s.fd, unix.XDP_STATISTICS, unsafe.Pointer(&ks), unsafe.Sizeof(ks)) == nil {
		st.RxDropped = ks.Rx_dropped
		st.RxInvalid = ks.Rx_invalid_descs
		st.TxInvalid = ks.Tx_invalid_descs
		st.RxRingFull = ks.Rx_ring_full
		st.FillEmpty = ks.Rx_fill_ring_empty_descs
		st.TxRingEmpty = ks.Tx_ring_empty_descs
	}
	return st
}

// Close unmaps the rings and the UMEM and closes the socket, which frees the
// queue for a new socket in this process (the rings' mmaps hold references
// to the socket, so leaving them mapped would keep the queue busy).
func (s *Socket) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	if s.kicker != nil {
		s.kicker.close() // before the rings it reads are unmapped
	}
	return s.release()
}

func (s *Socket) release() error {
	var errs []error
	for _, r := range []*ring{s.rx, s.tx, s.fill, s.comp} {
		if err := r.unmap(); err != nil {
			errs = append(errs, err)
		}
	}
	if err := unix.Close(s.fd); err != nil {
		errs = append(errs, fmt.Errorf("xsk: close: %w", err))
	}
	if s.efd >= 0 {
		unix.Close(s.efd)
	}
	// The UMEM goes last: the kernel pins its pages until the socket is gone.
	if s.umem != nil {
		if err := unix.Munmap(s.umem); err != nil {
			errs = append(errs, fmt.Errorf("xsk: munmap UMEM: %w", err))
		}
		s.umem = nil
	}
	return errors.Join(errs...)
}

func setsockopt(fd, opt int, p unsafe.Pointer, size uintptr) error {
	_, _, errno := unix.Syscall6(unix.SYS_SETSOCKOPT, uintptr(fd), unix.SOL_XDP, uintptr(opt), uintptr(p), size, 0)
	if errno != 0 {
		return errno
	}
	return nil
}

func getsockopt(fd, opt int, p unsafe.Pointer, size uintptr) error {
	l := uint32(size)
	_, _, errno := unix.Syscall6(unix.SYS_GETSOCKOPT, uintptr(fd), unix.SOL_XDP, uintptr(opt), uintptr(p), uintptr(unsafe.Pointer(&l)), 0)
	if errno != 0 {
		return errno
	}
	return nil
}
