// Package verbs is the application API of the softmrc soft NIC: open a device
// (mrc-nicd's unix socket), register memory, create and connect QPs with an
// EV set, post RDMA Write and Write-with-Immediate, poll the completion queue.
// Its shape follows libibverbs (ibv_reg_mr, ibv_create_qp, ibv_modify_qp,
// ibv_post_send, ibv_poll_cq) so that verbs users feel at home.
//
// Memory registered with RegMR is a memfd that the application and the
// daemon both map: the daemon places incoming data straight into the
// application's pages and reads outgoing data from them, so no payload ever
// crosses the socket. Work requests and completions go through shared
// rings as well (nic/shmring, negotiated at Open): PostSend writes the SQ
// and makes a syscall only when the daemon's loop sleeps (its doorbell),
// PollCQ reads the CQ, and WaitCQ spins for Options.Spin and then sleeps
// on a futex the daemon wakes only when someone waits. With a daemon that
// has no rings (or Options.NoRing) PostSend is one message on the device
// socket and a reader goroutine queues the completions that come back.
//
// A Device is safe for concurrent use.
package verbs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/softmrc/softmrc/nic/vproto"
)

// Re-exported protocol types, so that applications import one package.
type (
	// Opcode is a work request opcode.
	Opcode = vproto.Opcode
	// Status is a completion status.
	Status = vproto.Status
	// DeviceInfo describes the device (query_device).
	DeviceInfo = vproto.DeviceInfo
	// PortInfo describes one NIC port.
	PortInfo = vproto.PortInfo
	// Transport selects a QP's transport: TransportMRC (default) or
	// TransportRoCE.
	Transport = vproto.Transport
	// Access is a memory region's access rights (ibv_access_flags).
	Access = vproto.Access
)

// Transports, re-exported.
const (
	// TransportMRC (zero value, default): MRC.
	TransportMRC = vproto.TransportMRC
	// TransportRoCE: the RoCEv2 RC baseline with DCQCN (docs/roce.md).
	TransportRoCE = vproto.TransportRoCE
)

// ParseTransport parses "mrc" or "roce" (flags such as --transport).
func ParseTransport(s string) (Transport, error) { return vproto.ParseTransport(s) }

// Opcodes and statuses, re-exported.
const (
	OpWrite    = vproto.OpWrite
	OpWriteImm = vproto.OpWriteImm
	OpSend     = vproto.OpSend
	OpRead     = vproto.OpRead

	CQWrite    = vproto.CQWrite
	CQWriteImm = vproto.CQWriteImm
	CQRecvImm  = vproto.CQRecvImm
	CQQPError  = vproto.CQQPError

	StatusSuccess      = vproto.StatusSuccess
	StatusLocQPOpErr   = vproto.StatusLocQPOpErr
	StatusLocProtErr   = vproto.StatusLocProtErr
	StatusRemInvReqErr = vproto.StatusRemInvReqErr
	StatusRemAccessErr = vproto.StatusRemAccessErr
	StatusWRFlushErr   = vproto.StatusWRFlushErr
	StatusDeviceGone   = vproto.StatusDeviceGone

	// AccessLocalWrite and AccessRemoteWrite are RegMR's access flags;
	// remote write needs local write too. Local read is always granted.
	AccessLocalWrite  = vproto.AccessLocalWrite
	AccessRemoteWrite = vproto.AccessRemoteWrite
)

// ErrDeviceGone is returned (wrapped) by every call once the connection to
// the daemon is lost: the daemon exited or closed the device.
var ErrDeviceGone = errors.New("verbs: device gone (mrc-nicd closed the connection or exited)")

// Completion is one completion entry.
type Completion = vproto.CQE

// Device is an open device: one session with mrc-nicd.
type Device struct {
	conn *net.UnixConn
	path string
	info DeviceInfo

	wmu  sync.Mutex // serialises writes on conn
	wbuf []byte

	mu      sync.Mutex
	seq     uint32
	pending map[uint32]chan vproto.Reply
	cq      []Completion
	cqReady chan struct{} // signalled (cap 1) when cq gains entries or the device dies
	err     error         // set once the device is dead
	mrs     map[uint32]*MR
	done    chan struct{}
	dead    atomic.Bool // d.err is set (read without d.mu by ring waiters)

	// The shared-memory path (ring.go); nil on the socket path. rmu guards
	// the mapping's life: ring users hold it for reading, Close unmaps
	// under the write lock (and d.mu, which fail's wake-up holds).
	rmu      sync.RWMutex
	ring     *ring
	sqmu     sync.Mutex // serialises the SQ's producers
	spin     time.Duration
	coop     bool // Options.Cooperative
	notify   <-chan struct{}
	kick     func()
	heldWait time.Duration
}

// Open connects to the device socket at path (mrc-nicd's device_socket)
// with DefaultOptions: work requests and completions go through
// shared-memory rings when the daemon serves them, else the socket.
func Open(path string) (*Device, error) {
	o, err := DefaultOptions()
	if err != nil {
		return nil, err
	}
	return OpenWith(path, o)
}

// OpenWith is Open with explicit options.
func OpenWith(path string, o Options) (*Device, error) {
	return open(context.Background(), path, o)
}

// OpenControl opens a session for control requests only (Ctl, queries):
// it attaches no shared-memory rings, which a tool that never posts work
// would map (about 2.3 MB) and never use. Posting on it still works, over
// the device socket.
func OpenControl(path string) (*Device, error) {
	return open(context.Background(), path, Options{NoRing: true})
}

// Ping tells whether mrc-nicd serves applications on the device socket at
// path: it opens a session, completes the hello handshake and closes it
// again, all within ctx. Use it as a readiness probe: a plain connect on the
// wrong socket type (the device socket is SOCK_SEQPACKET) fails with
// "protocol wrong type for socket", and a connect alone does not show that
// the daemon answers.
func Ping(ctx context.Context, path string) error {
	d, err := open(ctx, path, Options{NoRing: true})
	if err != nil {
		return err
	}
	return d.Close()
}

func open(ctx context.Context, path string, o Options) (*Device, error) {
	if o.Spin < 0 || o.Spin > time.Second {
		return nil, fmt.Errorf("verbs: spin %v: want 0 to 1s", o.Spin)
	}
	if o.HeldWait < 0 || o.HeldWait > DefaultHeldWait {
		return nil, fmt.Errorf("verbs: held wait %v: want 0 to %v", o.HeldWait, DefaultHeldWait)
	}
	var dl net.Dialer
	nc, err := dl.DialContext(ctx, "unixpacket", path)
	if err != nil {
		return nil, fmt.Errorf("verbs: open device %s: %w (is mrc-nicd running with this device_socket?)", path, err)
	}
	c := nc.(*net.UnixConn)
	// The handshake is bounded by ctx; the deadline is lifted once it is
	// done, because a session's reads wait for completions indefinitely.
	if t, ok := ctx.Deadline(); ok {
		c.SetDeadline(t)
	}
	d := &Device{conn: c, path: path, pending: map[uint32]chan vproto.Reply{},
		cqReady: make(chan struct{}, 1), mrs: map[uint32]*MR{}, done: make(chan struct{}), spin: o.Spin, heldWait: o.HeldWait, coop: o.Cooperative, notify: o.Notify, kick: o.Kick}
	go d.reader()
	var info DeviceInfo
	if err := d.call(vproto.TypeHello, vproto.Hello{Version: vproto.Version,
		Client: filepath.Base(os.Args[0]), PID: os.Getpid()}, -1, &info); err != nil {
		d.Close()
		return nil, fmt.Errorf("verbs: open device %s: hello: %w", path, err)
	}
	if !o.NoRing {
		if err := d.attachRing(o.Layout); err != nil {
			ringFallback(path, err)
		}
	}
	c.SetDeadline(time.Time{})
	d.info = info
	return d, nil
}

// Info returns what the device is and can do.
func (d *Device) Info() DeviceInfo { return d.info }

// Close ends the session: the daemon destroys the session's QPs and forgets
// its regions. Registered memory stays mapped in the application until each
// MR is closed.
func (d *Device) Close() error {
	d.fail(errors.New("verbs: device closed"))
	err := d.conn.Close()
	<-d.done
	d.closeRing()
	return err
}

// Err returns why the device is dead, or nil.
func (d *Device) Err() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.err
}

func (d *Device) fail(err error) {
	d.mu.Lock()
	if d.err == nil {
		d.err = err
		d.dead.Store(true)
		for s, ch := range d.pending {
			ch <- vproto.Reply{Error: err.Error()}
			delete(d.pending, s)
		}
	}
	d.wakeRingLocked()
	d.mu.Unlock()
	select {
	case d.cqReady <- struct{}{}:
	default:
	}
}

// reader receives replies and completion batches until the connection ends.
func (d *Device) reader() {
	defer close(d.done)
	buf := make([]byte, vproto.MaxMessage)
	for {
		n, err := d.conn.Read(buf)
		if err != nil || n == 0 {
			if err == nil {
				err = errors.New("EOF")
			}
			d.fail(fmt.Errorf("%w: %v", ErrDeviceGone, err))
			return
		}
		m := buf[:n]
		h, err := vproto.ParseHeader(m)
		if err != nil {
			d.fail(fmt.Errorf("%w: %v", ErrDeviceGone, err))
			return
		}
		body := m[vproto.HeaderLen:]
		switch h.Type {
		case vproto.TypeCompletions:
			d.mu.Lock()
			d.cq, err = vproto.ParseCQEs(d.cq, body)
			d.wakeRingLocked()
			d.mu.Unlock()
			if err != nil {
				d.fail(fmt.Errorf("%w: %v", ErrDeviceGone, err))
				return
			}
			select {
			case d.cqReady <- struct{}{}:
			default:
			}
		case vproto.TypeReply:
			var r vproto.Reply
			if err := json.Unmarshal(body, &r); err != nil {
				r = vproto.Reply{Error: fmt.Sprintf("verbs: bad reply from the daemon: %v", err)}
			}
			d.mu.Lock()
			ch := d.pending[h.Seq]
			delete(d.pending, h.Seq)
			d.mu.Unlock()
			if ch != nil {
				ch <- r
			}
		case vproto.TypeFatal:
			var r vproto.Reply
			_ = json.Unmarshal(body, &r)
			d.fail(fmt.Errorf("%w: %s", ErrDeviceGone, r.Error))
			return
		}
	}
}

// deadErr wraps the device's death cause.
func (d *Device) deadErr() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.err
}

// call sends a JSON request (with fd when >= 0) and waits for its reply,
// decoding the body into out when non-nil.
func (d *Device) call(t vproto.Type, req any, fd int, out any) error {
	var fds []int
	if fd >= 0 {
		fds = []int{fd}
	}
	return d.callFDs(t, req, fds, out)
}

// callFDs is call passing the descriptors fds with the request.
func (d *Device) callFDs(t vproto.Type, req any, fds []int, out any) error {
	ch := make(chan vproto.Reply, 1)
	d.mu.Lock()
	if d.err != nil {
		err := d.err
		d.mu.Unlock()
		return err
	}
	d.seq++
	seq := d.seq
	d.pending[seq] = ch
	d.mu.Unlock()
	msg, err := vproto.AppendJSON(nil, t, seq, req)
	if err != nil {
		return err
	}
	var oob []byte
	if len(fds) > 0 {
		oob = unix.UnixRights(fds...)
	}
	d.wmu.Lock()
	_, _, err = d.conn.WriteMsgUnix(msg, oob, nil)
	d.wmu.Unlock()
	if err != nil {
		d.fail(fmt.Errorf("%w: %v", ErrDeviceGone, err))
		return d.deadErr()
	}
	r := <-ch
	if r.Error != "" {
		if e := d.deadErr(); e != nil {
			return e
		}
		return fmt.Errorf("verbs: %s: %s", t, r.Error)
	}
	if out != nil && len(r.Body) > 0 {
		if err := json.Unmarshal(r.Body, out); err != nil {
			return fmt.Errorf("verbs: %s: bad reply body: %w", t, err)
		}
	}
	return nil
}

// Ctl sends an mrcctl request and decodes the answer into out.
func (d *Device) Ctl(req vproto.CtlRequest, out any) error {
	return d.call(vproto.TypeCtl, req, -1, out)
}

// MR is a registered memory region. Buf is the application's view of it;
// Addr is the address the region is known by (its VA in this process),
// which the peer uses with RKey as the target of its writes.
type MR struct {
	Buf  []byte
	Addr uint64
	LKey uint32
	RKey uint32
	d    *Device
	fd   int
}

// RegMR allocates size bytes of shared memory (a memfd), maps it and
// registers it with the device with access rights (ibv_reg_mr): with
// AccessRemoteWrite (which needs AccessLocalWrite), peers' writes with the
// returned RKey land in Buf; without it they are refused and the writer's
// work request completes with StatusRemAccessErr. Every region can be the
// source of this application's writes.
func (d *Device) RegMR(size int, access Access) (*MR, error) {
	if size <= 0 {
		return nil, fmt.Errorf("verbs: RegMR: size %d must be > 0", size)
	}
	if err := access.Check(); err != nil {
		return nil, fmt.Errorf("verbs: RegMR: %w", err)
	}
	fd, err := unix.MemfdCreate("mrc-mr", unix.MFD_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("verbs: RegMR: memfd_create: %w", err)
	}
	// Pages are whole: the region is rounded up so the daemon can map it.
	mapLen := (size + os.Getpagesize() - 1) &^ (os.Getpagesize() - 1)
	if err := unix.Ftruncate(fd, int64(mapLen)); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("verbs: RegMR: grow memfd to %d bytes: %w", mapLen, err)
	}
	buf, err := unix.Mmap(fd, 0, mapLen, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("verbs: RegMR: mmap %d bytes: %w", mapLen, err)
	}
	mr := &MR{Buf: buf[:size], Addr: addrOf(buf), d: d, fd: fd}
	var info vproto.MRInfo
	if err := d.call(vproto.TypeRegMR, vproto.RegMR{Addr: mr.Addr, Len: uint64(size), Access: access}, fd, &info); err != nil {
		unix.Munmap(buf)
		unix.Close(fd)
		return nil, err
	}
	mr.LKey, mr.RKey = info.LKey, info.RKey
	d.mu.Lock()
	d.mrs[mr.LKey] = mr
	d.mu.Unlock()
	return mr, nil
}

// Close deregisters the region and unmaps it. Writes to it that arrive
// later fail with a remote access error at the sender.
func (mr *MR) Close() error {
	if mr.Buf == nil {
		return nil
	}
	err := mr.d.call(vproto.TypeDeregMR, vproto.DeregMR{LKey: mr.LKey}, -1, nil)
	if errors.Is(err, ErrDeviceGone) {
		err = nil
	}
	mr.d.mu.Lock()
	delete(mr.d.mrs, mr.LKey)
	mr.d.mu.Unlock()
	unix.Munmap(mr.Buf[:cap(mr.Buf)])
	unix.Close(mr.fd)
	mr.Buf = nil
	return err
}

// QP is a queue pair. QPN, PSN, MTU, Window and MaxWImm are what the peer
// needs to connect to it (ConnectInfo gathers them with the addresses).
type QP struct {
	QPN     uint32
	PSN     uint32
	MTU     int // payload bytes per packet
	Window  int // receive window (MPR) in packets
	MaxWImm int // Write-with-Immediate messages accepted in flight
	// Transport is the QP's transport, as the daemon created it; the peer
	// must use the same (exchange it out of band).
	Transport Transport
	d         *Device
}

// QPConfig configures CreateQP.
type QPConfig struct {
	// SQDepth bounds outstanding work requests; 0 = device default.
	SQDepth int
	// Transport is the QP's transport (zero value: TransportMRC). Both ends
	// must use the same: exchange it out of band with the QP number.
	Transport Transport
}

// CreateQP creates a QP owned by this session.
func (d *Device) CreateQP(cfg QPConfig) (*QP, error) {
	var info vproto.QPInfo
	if !cfg.Transport.Valid() {
		return nil, fmt.Errorf("verbs: create QP: unknown transport %d: use TransportMRC or TransportRoCE", uint8(cfg.Transport))
	}
	if err := d.call(vproto.TypeCreateQP, vproto.CreateQP{SQDepth: cfg.SQDepth, Transport: cfg.Transport}, -1, &info); err != nil {
		return nil, err
	}
	return &QP{QPN: info.QPN, PSN: info.PSN, MTU: info.MTU, Window: info.Window, MaxWImm: info.MaxWImm,
		Transport: info.Transport, d: d}, nil
}

// ConnectInfo is what the peer passes to its Connect to reach this QP:
// QPN, PSN, MTU, window, Write-with-Immediate cap, transport (a peer QP of
// another transport fails to connect) and this device's address in every
// plane. Applications send it out of band (as JSON, or
// field by field like mrc-write-bw).
func (qp *QP) ConnectInfo() Remote {
	tr := qp.Transport
	r := Remote{RemoteQPN: qp.QPN, RemotePSN: qp.PSN, RemoteMTU: qp.MTU, RemoteWindow: qp.Window,
		RemoteMaxWImm: qp.MaxWImm, RemoteTransport: &tr}
	for _, p := range qp.d.info.Ports {
		r.RemoteAddrs = append(r.RemoteAddrs, p.Address)
	}
	return r
}

// Remote is what a QP needs to know of its peer (exchanged out of band).
type Remote = vproto.ConnectQP

// Connect connects the QP to a remote QP: r is the peer QP's ConnectInfo
// (its QPN, PSN, MTU, window, Write-with-Immediate cap and per-plane
// addresses), optionally with an EV set (empty: the daemon spreads the
// device's EV count over every plane and path; set: exactly these EVs, on
// planes both ends have). Different MTUs fail here. r.QPN is set from qp.
func (qp *QP) Connect(r Remote) error {
	r.QPN = qp.QPN
	return qp.d.call(vproto.TypeConnectQP, r, -1, nil)
}

// Destroy destroys the QP; its outstanding work requests complete with
// StatusWRFlushErr.
func (qp *QP) Destroy() error {
	err := qp.d.call(vproto.TypeDestroyQP, vproto.DestroyQP{QPN: qp.QPN}, -1, nil)
	if errors.Is(err, ErrDeviceGone) {
		return nil
	}
	return err
}

// SendWR is one work request. The local data is Len bytes at Offset in
// Local; it is written to RemoteAddr in the peer's region RKey.
type SendWR struct {
	ID         uint64
	Op         Opcode
	Local      *MR
	Offset     uint64
	Len        uint32
	RemoteAddr uint64
	RKey       uint32
	Imm        uint32
	// Unsignaled suppresses the success completion (errors still complete).
	Unsignaled bool
}

// Write builds a signaled RDMA Write request.
func Write(id uint64, local *MR, off uint64, n uint32, raddr uint64, rkey uint32) SendWR {
	return SendWR{ID: id, Op: OpWrite, Local: local, Offset: off, Len: n, RemoteAddr: raddr, RKey: rkey}
}

// WriteImm builds a signaled RDMA Write-with-Immediate request.
func WriteImm(id uint64, local *MR, off uint64, n uint32, raddr uint64, rkey, imm uint32) SendWR {
	return SendWR{ID: id, Op: OpWriteImm, Local: local, Offset: off, Len: n, RemoteAddr: raddr, RKey: rkey, Imm: imm}
}

// PostSend posts wrs on the QP in one message. Invalid requests that the
// library can see (nil region, range outside it) fail here; everything
// else is checked by the daemon and fails as an error completion.
func (qp *QP) PostSend(wrs ...SendWR) error {
	d := qp.d
	if len(wrs) > vproto.MaxBatch {
		for len(wrs) > 0 {
			n := min(len(wrs), vproto.MaxBatch)
			if err := qp.PostSend(wrs[:n]...); err != nil {
				return err
			}
			wrs = wrs[n:]
		}
		return nil
	}
	if err := d.deadErr(); err != nil {
		return err
	}
	d.rmu.RLock()
	defer d.rmu.RUnlock()
	if r := d.ring; r != nil {
		for i := range wrs {
			if err := checkWR(&wrs[i]); err != nil {
				return err
			}
		}
		return qp.postRing(r, wrs)
	}
	d.wmu.Lock()
	defer d.wmu.Unlock()
	b := d.wbuf[:0]
	var h [vproto.HeaderLen]byte
	vproto.PutHeader(h[:], vproto.Header{Type: vproto.TypePost, Version: vproto.Version})
	b = append(b, h[:]...)
	for i := range wrs {
		w := &wrs[i]
		if err := checkWR(w); err != nil {
			return err
		}
		wr := qp.wireWR(w)
		var e [vproto.WRLen]byte
		wr.Put(e[:])
		b = append(b, e[:]...)
	}
	d.wbuf = b
	if _, err := d.conn.Write(b); err != nil {
		d.fail(fmt.Errorf("%w: %v", ErrDeviceGone, err))
		return d.deadErr()
	}
	return nil
}

// checkWR fails a request the library can see is invalid.
func checkWR(w *SendWR) error {
	if w.Local != nil {
		if w.Offset+uint64(w.Len) > uint64(len(w.Local.Buf)) {
			return fmt.Errorf("verbs: post wr %d: offset %d + length %d is outside the %d-byte local region", w.ID, w.Offset, w.Len, len(w.Local.Buf))
		}
	} else if w.Len > 0 {
		return fmt.Errorf("verbs: post wr %d: %d bytes but no local region", w.ID, w.Len)
	}
	return nil
}

// PostRaw posts protocol-level work requests unchecked (tests and tools
// that exercise the daemon's own checks), on the ring when the session
// has one.
func (d *Device) PostRaw(wrs []vproto.WR) error {
	d.rmu.RLock()
	defer d.rmu.RUnlock()
	if r := d.ring; r != nil {
		return d.postRawRing(r, wrs)
	}
	msg := vproto.AppendWRs(nil, wrs)
	d.wmu.Lock()
	defer d.wmu.Unlock()
	if _, err := d.conn.Write(msg); err != nil {
		d.fail(fmt.Errorf("%w: %v", ErrDeviceGone, err))
		return d.deadErr()
	}
	return nil
}

// PollCQ moves up to len(out) completions into out and returns how many. It
// makes no syscall. Once the device is gone it returns the error (after the
// completions that had arrived).
func (d *Device) PollCQ(out []Completion) (int, error) {
	d.rmu.RLock()
	defer d.rmu.RUnlock()
	d.mu.Lock()
	defer d.mu.Unlock()
	if r := d.ring; r != nil {
		// Completions on the socket (after the CQ overflowed) follow every
		// one in the ring: count them first, then drain the ring, so that
		// none that raced in overtakes a ring entry before it.
		k := len(d.cq)
		n, err := d.pollRing(r, out)
		if err != nil {
			return n, fmt.Errorf("%w: %v", ErrDeviceGone, err)
		}
		m := copy(out[n:], d.cq[:k])
		d.cq = d.cq[:copy(d.cq, d.cq[m:])]
		if n+m == 0 && d.err != nil {
			return 0, d.err
		}
		return n + m, nil
	}
	n := copy(out, d.cq)
	d.cq = d.cq[:copy(d.cq, d.cq[n:])]
	if n == 0 && d.err != nil {
		return 0, d.err
	}
	return n, nil
}

// NextCompletion waits up to timeout for one completion and returns it. It
// fails with ErrNoCompletion when none arrives in time, or with the device's
// error once the daemon is gone.
func (d *Device) NextCompletion(timeout time.Duration) (Completion, error) {
	var c [1]Completion
	deadline := time.Now().Add(timeout)
	for {
		n, err := d.PollCQ(c[:])
		if err != nil {
			return Completion{}, err
		}
		if n == 1 {
			return c[0], nil
		}
		left := time.Until(deadline)
		if left <= 0 {
			return Completion{}, ErrNoCompletion
		}
		if _, err := d.WaitCQ(left); err != nil {
			return Completion{}, err
		}
	}
}

// ErrNoCompletion is NextCompletion's timeout.
var ErrNoCompletion = errors.New("verbs: no completion before the timeout")

// WaitCQ blocks until a completion is queued, the device dies, or timeout
// passes (negative: no limit). It reports whether completions are queued.
func (d *Device) WaitCQ(timeout time.Duration) (bool, error) {
	d.rmu.RLock()
	if r := d.ring; r != nil {
		defer d.rmu.RUnlock()
		return d.waitRing(r, timeout)
	}
	d.rmu.RUnlock()
	var tc <-chan time.Time
	if timeout >= 0 {
		t := time.NewTimer(timeout)
		defer t.Stop()
		tc = t.C
	}
	for {
		d.mu.Lock()
		n, err := len(d.cq), d.err
		d.mu.Unlock()
		if n > 0 {
			return true, nil
		}
		if err != nil {
			return false, err
		}
		select {
		case <-d.cqReady:
		case <-tc:
			return false, nil
		}
	}
}
