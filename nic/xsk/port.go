package xsk

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"time"
)

// Port is what the NIC daemon's run loop uses: one AF_XDP socket on one
// interface queue (XDPPort) or one end of an in-memory pair (Pipe). All
// methods but Stats and Name belong to one goroutine.
type Port interface {
	// Name identifies the port in logs and metrics.
	Name() string
	// Recv copies up to len(bufs) frames into bufs (bufs[i] = bufs[i][:n]);
	// it never blocks.
	Recv(bufs [][]byte) (int, error)
	// RecvFunc hands up to max frames to fn without copying; a frame is
	// valid only during fn. It never blocks.
	RecvFunc(max int, fn func(frame []byte)) (int, error)
	// Send queues copies of frames for transmission and returns how many
	// were queued; fewer than len(frames) means the port is full for now.
	Send(frames [][]byte) (int, error)
	// SendFunc queues up to max frames that build writes straight into
	// transmit buffers of FrameSize bytes (returning each frame's length, or
	// 0 to stop), saving Send's copy.
	SendFunc(max int, build func(frame []byte) int) (int, error)
	// TxSlot returns a transmit buffer of FrameSize bytes to build the next
	// frame in (nil when the port is full for now), TxCommit queues the
	// frame of n bytes built in it, and TxFlush sends what was committed
	// with at most one kick. On a Socket the buffer is the UMEM chunk
	// itself: no copy. A slot not committed is handed out again.
	TxSlot() []byte
	TxCommit(n int) error
	TxFlush() (int, error)
	// Wait blocks until a frame can be received, Wake is called or timeout
	// passes; a negative timeout waits without limit. It also pushes out
	// transmissions the kernel has not taken yet, so an idle loop calls it.
	Wait(timeout time.Duration) error
	// Wake makes a blocked (or the next) Wait return; safe from any goroutine.
	Wake()
	// Stats returns the counters; safe from any goroutine.
	Stats() Stats
	Close() error
}

// Stats are a port's counters since it was opened.
type Stats struct {
	RxFrames, RxBytes uint64 // frames taken from the rx ring (including RxOversize ones)
	RxOversize        uint64 // frames dropped by Recv: longer than the buffer given
	RxPartial         uint64 // multi-buffer frames dropped: their descriptor chain outgrew MaxSGFrameLen
	RxJoined          uint64 // multi-buffer frames handed out where they lay (adjacent chunks, no copy)
	RxCopied          uint64 // multi-buffer frames reassembled by a copy (chunks apart, or the chain cut between calls)
	TxFrames, TxBytes uint64 // frames queued by Send
	TxCompleted       uint64 // frames the kernel reported sent
	TxFull            uint64 // frames Send could not queue (pool or ring full)
	Kicks             uint64 // wakeup syscalls made (need_wakeup)
	Polls             uint64 // poll syscalls made by Wait
	TxKickErrors      uint64 // errors from transmit kicks; EBUSY = the driver dropped a frame (e.g. longer than the MTU)
	KickerWakes       uint64 // times the kick thread was woken from sleep (SocketConfig.KickThread)

	// From the kernel (getsockopt XDP_STATISTICS); zero for a Pipe.
	RxDropped   uint64 // frames the kernel dropped for this socket
	RxRingFull  uint64 // dropped: rx ring full (receiver too slow)
	FillEmpty   uint64 // dropped: no chunk on the fill ring
	RxInvalid   uint64
	TxInvalid   uint64 // transmit descriptors the kernel refused (e.g. longer than MTU)
	TxRingEmpty uint64
}

// AttachMode chooses how the steering program is attached.
type AttachMode int

const (
	// AttachAuto tries native (driver) mode and falls back to generic.
	AttachAuto AttachMode = iota
	// AttachNative requires native mode.
	AttachNative
	// AttachGeneric uses generic (SKB) mode.
	AttachGeneric
)

func (m AttachMode) String() string {
	switch m {
	case AttachAuto:
		return "auto"
	case AttachNative:
		return "native"
	case AttachGeneric:
		return "generic"
	}
	return fmt.Sprintf("AttachMode(%d)", int(m))
}

// Config configures Open.
type Config struct {
	// Name of the port for logs and metrics; empty means "ifname/queue".
	Name string
	// Ifname and Queue name the interface queue, in the calling thread's
	// network namespace.
	Ifname string
	Queue  int
	// RingSize: see SocketConfig.
	RingSize int
	// USIDPrefixes steer IPv6-in-IPv6 frames whose outer destination falls in
	// one of them (the port's downlink uSID: block:uSID::/48 for F3216).
	USIDPrefixes []netip.Prefix
	// Addrs steer plain IPv6/UDP 4791 (and 4971) frames to one of them.
	Addrs []netip.Addr
	// Attach chooses native or generic XDP.
	Attach AttachMode
	// NoSteer skips loading the steering program: the socket receives only
	// what another program redirects into it (or nothing, for transmit-only).
	NoSteer bool
	// BindTimeout: see SocketConfig.
	BindTimeout time.Duration
	// MultiBuffer: see SocketConfig. Open turns it on by itself when the
	// interface MTU is above MaxLinearMTU. The steering program is
	// frags-aware either way.
	MultiBuffer bool
	// KickThread: see SocketConfig.
	KickThread bool
	Logger     *slog.Logger
}

// XDPPort is a Port on a real interface: a Socket plus its steering program.
type XDPPort struct {
	*Socket
	name  string
	steer *Steer
}

var _ Port = (*XDPPort)(nil)

// Open creates the AF_XDP socket on cfg.Ifname/cfg.Queue, loads and attaches
// the steering program (bpf_link: it detaches when the process dies), fills
// its maps and registers the socket for the queue.
func Open(cfg Config) (_ *XDPPort, err error) {
	ifi, err := net.InterfaceByName(cfg.Ifname)
	if err != nil {
		return nil, fmt.Errorf("xsk: interface %q: %w (is the port in this network namespace?)", cfg.Ifname, err)
	}
	name := cfg.Name
	if name == "" {
		name = fmt.Sprintf("%s/%d", cfg.Ifname, cfg.Queue)
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	// Above MaxLinearMTU a frame reaches the socket as a multi-buffer
	// frame (veth keeps about a page linear): only an XDP_USE_SG socket
	// takes it, the others would lose it without a trace.
	multi := cfg.MultiBuffer || ifi.MTU > MaxLinearMTU
	sock, err := NewSocket(SocketConfig{Ifindex: ifi.Index, Queue: cfg.Queue, RingSize: cfg.RingSize,
		BindTimeout: cfg.BindTimeout, Logger: log, MultiBuffer: multi, KickThread: cfg.KickThread})
	if err != nil {
		return nil, err
	}
	p := &XDPPort{Socket: sock, name: name}
	if cfg.NoSteer {
		return p, nil
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, p.Close())
		}
	}()
	p.steer, err = AttachSteer(ifi.Index, cfg.Attach)
	if err != nil {
		return nil, err
	}
	for _, pfx := range cfg.USIDPrefixes {
		if err := p.steer.AddPrefix(pfx); err != nil {
			return nil, err
		}
	}
	for _, a := range cfg.Addrs {
		if err := p.steer.AddAddr(a); err != nil {
			return nil, err
		}
	}
	if err := p.steer.Register(cfg.Queue, sock.FD()); err != nil {
		return nil, err
	}
	log.Info("xsk: port open", "port", name, "ifindex", ifi.Index, "queue", cfg.Queue,
		"xdp_mode", p.steer.Mode(), "zerocopy", sock.ZeroCopy(), "ring", sock.rx.size, "multi_buffer", sock.MultiBuffer())
	return p, nil
}

// Name returns the port's name.
func (p *XDPPort) Name() string { return p.name }

// Steer returns the port's steering program, nil with Config.NoSteer.
func (p *XDPPort) Steer() *Steer { return p.steer }

// Close detaches the steering program, then closes the socket.
func (p *XDPPort) Close() error {
	var errs []error
	if p.steer != nil {
		errs = append(errs, p.steer.Close())
		p.steer = nil
	}
	errs = append(errs, p.Socket.Close())
	return errors.Join(errs...)
}
