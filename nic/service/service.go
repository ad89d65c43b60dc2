// Package service is the server side of the device socket of mrc-nicd: it
// accepts application sessions (nic/verbs) and mrcctl, decodes their
// requests (memory registrations arrive with a memfd passed with
// SCM_RIGHTS) and hands them, tagged with the session as owner, to the NIC
// (the daemon), which owns the QPs and the region table, checks that every
// QP and region a session names is its own, and returns completions
// through Deliver.
package service

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/softmrc/softmrc/nic/vproto"
)

// NIC is the daemon side the service drives. Every method is safe for
// concurrent use; the daemon runs the engine work on its loop goroutine.
// owner is the session ID of the caller: the NIC must refuse QPs of other
// owners.
type NIC interface {
	Info() vproto.DeviceInfo
	// RegMR registers the memfd fd (the caller closes it afterwards) as a
	// region of owner; DeregMR removes one.
	RegMR(owner uint32, fd int, req vproto.RegMR) (vproto.MRInfo, error)
	DeregMR(owner uint32, req vproto.DeregMR) error
	CreateQP(owner uint32, req vproto.CreateQP) (vproto.QPInfo, error)
	ConnectQP(owner uint32, req vproto.ConnectQP) error
	DestroyQP(owner uint32, qpn uint32) error
	// Post hands a batch of work requests to the engine; problems come back
	// as error completions through Service.Deliver. The slice is reused
	// after Post returns.
	Post(owner uint32, wrs []vproto.WR)
	// Ctl answers an mrcctl request from caller; only an administrator
	// may touch or inspect QPs that are not the caller's.
	Ctl(caller Caller, req vproto.CtlRequest) (any, error)
	// CloseOwner destroys every QP of owner and then releases its regions
	// (the session ended).
	CloseOwner(owner uint32)
}

// RingNIC is a NIC that serves sessions through shared-memory rings
// (nic/shmring): AttachRing takes the ring's memfd and the doorbell eventfd
// (the caller closes both afterwards; the NIC keeps what it needs). A NIC
// without it answers ring requests with an error, and clients stay on the
// socket.
type RingNIC interface {
	AttachRing(owner uint32, memfd, doorbell int, req vproto.Ring) error
}

// Caller is who sent a request: the session, and the process and user the
// kernel vouches for (SO_PEERCRED at accept).
type Caller struct {
	Session uint32
	PID     int
	UID     uint32
	// Admin: the user is root or the daemon's own, so the caller may
	// inspect and steer every application's QPs (mrcctl run as root).
	Admin bool
}

// MaxQueuedCQEs bounds the completions waiting for one session to read
// them; a session that falls this far behind is closed (counted).
const MaxQueuedCQEs = 1 << 20

// Service serves the device socket.
type Service struct {
	nic NIC
	log *slog.Logger
	ln  *net.UnixListener

	mu       sync.Mutex
	sessions map[uint32]*session
	nextID   uint32
	closed   bool
	wg       sync.WaitGroup

	// Counters. The metric and help tags name them in mrc-nicd's metrics
	// and `mrcctl counters` (nic/daemon/metrics.go reads the tags).
	Sessions    atomic.Uint64 `metric:"sessions" help:"Device sessions opened by applications."`
	Overruns    atomic.Uint64 `metric:"cq_overruns" help:"Completions a session's queue could not take."`
	BadMessages atomic.Uint64 `metric:"bad_messages" help:"Malformed messages received on the device socket."`
	// TelemetryDropped counts telemetry messages dropped because the
	// subscriber's queue was full.
	TelemetryDropped atomic.Uint64 `metric:"telemetry_sub_dropped" help:"Telemetry messages dropped because the subscriber's queue was full."`
}

// New returns a service over nic.
func New(nic NIC, log *slog.Logger) *Service {
	if log == nil {
		log = slog.Default()
	}
	return &Service{nic: nic, log: log, sessions: map[uint32]*session{}}
}

// Listen creates the device socket at path (replacing a stale one) with mode
// 0666 so that unprivileged applications can open the device.
func (s *Service) Listen(path string) error {
	if fi, err := os.Lstat(path); err == nil && fi.Mode()&os.ModeSocket != 0 {
		// A socket nobody answers on is left over from a daemon that died.
		if c, err := net.Dial("unixpacket", path); err == nil {
			c.Close()
			return fmt.Errorf("device socket %s is in use by a running daemon; stop it or choose another device_socket", path)
		}
		os.Remove(path)
	}
	ln, err := net.ListenUnix("unixpacket", &net.UnixAddr{Name: path, Net: "unixpacket"})
	if err != nil {
		return fmt.Errorf("listen on device socket %s: %w", path, err)
	}
	ln.SetUnlinkOnClose(true)
	_ = os.Chmod(path, 0o666)
	s.ln = ln
	return nil
}

// Serve accepts sessions until Close.
func (s *Service) Serve() error {
	for {
		c, err := s.ln.AcceptUnix()
		if err != nil {
			s.mu.Lock()
			closed := s.closed
			s.mu.Unlock()
			if closed {
				return nil
			}
			return fmt.Errorf("accept on device socket: %w", err)
		}
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			c.Close()
			return nil
		}
		s.nextID++
		if s.nextID == 0 {
			s.nextID = 1
		}
		ss := &session{id: s.nextID, conn: c, svc: s, ready: make(chan struct{}, 1), done: make(chan struct{})}
		if err := ss.peerCred(); err != nil {
			s.mu.Unlock()
			s.log.Warn("service: refusing a connection whose credentials cannot be read", "err", err)
			c.Close()
			continue
		}
		s.sessions[ss.id] = ss
		s.wg.Add(2)
		s.mu.Unlock()
		s.Sessions.Add(1)
		go ss.readLoop()
		go ss.writeLoop()
	}
}

// Close stops accepting, tells every session the device is going away and
// waits for their teardown.
func (s *Service) Close(reason string) {
	s.mu.Lock()
	s.closed = true
	ss := make([]*session, 0, len(s.sessions))
	for _, x := range s.sessions {
		ss = append(ss, x)
	}
	s.mu.Unlock()
	if s.ln != nil {
		s.ln.Close()
	}
	for _, x := range ss {
		x.fatal(reason)
	}
	s.wg.Wait()
}

// Deliver hands completions to session owner. It never blocks: it is called
// from the engine loop. When nothing is queued for the session it writes
// them straight to the socket (one non-blocking sendmsg, no goroutine
// handoff); otherwise, or when the socket is full, the session's writer
// goroutine sends them.
func (s *Service) Deliver(owner uint32, cqes []vproto.CQE) {
	s.mu.Lock()
	ss := s.sessions[owner]
	s.mu.Unlock()
	if ss == nil || ss.dead.Load() {
		return
	}
	ss.mu.Lock()
	if len(ss.out) == 0 && !ss.writing && len(cqes) <= vproto.MaxBatch {
		ss.writing = true
		ss.mu.Unlock()
		ok := ss.tryWrite(cqes)
		ss.mu.Lock()
		ss.writing = false
		if ok {
			more := len(ss.out) > 0
			ss.mu.Unlock()
			if more {
				ss.signal()
			}
			return
		}
	}
	if len(ss.out)+len(cqes) > MaxQueuedCQEs {
		ss.mu.Unlock()
		s.Overruns.Add(1)
		ss.fatal(fmt.Sprintf("completion queue overrun: more than %d completions unread; poll the CQ", MaxQueuedCQEs))
		return
	}
	ss.out = append(ss.out, cqes...)
	ss.mu.Unlock()
	ss.signal()
}

func (ss *session) signal() {
	select {
	case ss.ready <- struct{}{}:
	default:
	}
}

// tryWrite sends one completions message without blocking; false when the
// socket is full (or broken: the reader notices).
func (ss *session) tryWrite(cqes []vproto.CQE) bool {
	// A reply being written may block on a full socket: never wait for it.
	if !ss.wmu.TryLock() {
		return false
	}
	defer ss.wmu.Unlock()
	ss.dbuf = vproto.AppendCQEs(ss.dbuf[:0], cqes)
	rc, err := ss.conn.SyscallConn()
	if err != nil {
		return false
	}
	var werr error
	if err := rc.Write(func(fd uintptr) bool {
		_, werr = unix.Write(int(fd), ss.dbuf)
		return true // one attempt: never wait in the engine loop
	}); err != nil {
		return false
	}
	return werr == nil
}

// Fail ends session owner with a last message saying why (the NIC found it
// misbehaving: a corrupt shared-memory ring). Other sessions go on.
func (s *Service) Fail(owner uint32, reason string) {
	s.mu.Lock()
	ss := s.sessions[owner]
	s.mu.Unlock()
	if ss != nil {
		ss.fatal(reason)
	}
}

// SessionList returns the open sessions that caller may see: all for an
// administrator, else its own.
func (s *Service) SessionList(caller Caller) []vproto.SessionInfo {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]vproto.SessionInfo, 0, len(s.sessions))
	for _, x := range s.sessions {
		if caller.Admin || x.id == caller.Session {
			out = append(out, vproto.SessionInfo{ID: x.id, Client: x.client, PID: x.pid, UID: x.uid})
		}
	}
	return out
}

// peerCred records the connecting process's credentials. The pid is the
// kernel's, not the one Hello claims.
func (ss *session) peerCred() error {
	rc, err := ss.conn.SyscallConn()
	if err != nil {
		return err
	}
	var cred *unix.Ucred
	var cerr error
	if err := rc.Control(func(fd uintptr) {
		cred, cerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return err
	}
	if cerr != nil {
		return fmt.Errorf("SO_PEERCRED: %w", cerr)
	}
	ss.pid, ss.uid = int(cred.Pid), cred.Uid
	ss.admin = cred.Uid == 0 || int(cred.Uid) == os.Geteuid()
	return nil
}

func (ss *session) caller() Caller {
	return Caller{Session: ss.id, PID: ss.pid, UID: ss.uid, Admin: ss.admin}
}

type session struct {
	id     uint32
	conn   *net.UnixConn
	svc    *Service
	client string // written by readLoop under svc.mu (SessionList reads it)
	pid    int
	uid    uint32
	admin  bool

	wmu sync.Mutex // serialises writes on conn

	dbuf []byte // Deliver's encode buffer (under wmu)

	mu      sync.Mutex
	out     []vproto.CQE
	writing bool // a batch is being written (by Deliver or writeLoop): keeps order
	ready   chan struct{}
	done    chan struct{}
	once    sync.Once
	dead    atomic.Bool

	// Telemetry (telemetry.go), under mu.
	tele     chan []byte
	teleStop func()
}

func (ss *session) logf() *slog.Logger {
	return ss.svc.log.With("session", ss.id, "client", ss.client, "pid", ss.pid)
}

// fatal sends a last message saying why and ends the session.
func (ss *session) fatal(reason string) {
	if ss.dead.Load() {
		return
	}
	if msg, err := vproto.AppendJSON(nil, vproto.TypeFatal, 0, vproto.Reply{Error: reason}); err == nil {
		// A client that stopped reading must not hold up the shutdown.
		ss.wmu.Lock()
		_ = ss.conn.SetWriteDeadline(time.Now().Add(time.Second))
		_, _ = ss.conn.Write(msg)
		ss.wmu.Unlock()
	}
	ss.end()
}

func (ss *session) end() {
	ss.once.Do(func() {
		ss.dead.Store(true)
		close(ss.done)
		ss.conn.CloseRead()
	})
}

// writeLoop sends queued completions, as many as fit, in one message.
func (ss *session) writeLoop() {
	defer ss.svc.wg.Done()
	var buf []byte
	var batch []vproto.CQE
	for {
		select {
		case <-ss.ready:
		case <-ss.done:
			return
		}
		for {
			ss.mu.Lock()
			if ss.writing {
				// Deliver is writing; it signals again if more is queued.
				ss.mu.Unlock()
				break
			}
			n := min(len(ss.out), vproto.MaxBatch)
			batch = append(batch[:0], ss.out[:n]...)
			ss.out = ss.out[:copy(ss.out, ss.out[n:])]
			ss.writing = n > 0
			ss.mu.Unlock()
			if n == 0 {
				break
			}
			buf = vproto.AppendCQEs(buf[:0], batch)
			ss.wmu.Lock()
			_, err := ss.conn.Write(buf)
			ss.wmu.Unlock()
			ss.mu.Lock()
			ss.writing = false
			ss.mu.Unlock()
			if err != nil {
				ss.end()
				return
			}
		}
	}
}

// readLoop serves requests until the client goes away, then tears the
// session down (the NIC destroys its QPs, then unmaps its regions).
func (ss *session) readLoop() {
	s := ss.svc
	defer s.wg.Done()
	defer func() {
		ss.end()
		ss.stopWatch()
		s.nic.CloseOwner(ss.id)
		s.mu.Lock()
		delete(s.sessions, ss.id)
		s.mu.Unlock()
		ss.conn.Close()
		ss.logf().Debug("service: session closed")
	}()
	buf := make([]byte, vproto.MaxMessage)
	oob := make([]byte, unix.CmsgSpace(4*4))
	var wrs []vproto.WR
	for {
		n, oobn, flags, _, err := ss.conn.ReadMsgUnix(buf, oob)
		if err != nil || n == 0 {
			return
		}
		fds := parseFDs(oob[:oobn])
		if flags&unix.MSG_TRUNC != 0 || flags&unix.MSG_CTRUNC != 0 {
			closeFDs(fds)
			s.BadMessages.Add(1)
			ss.fatal(fmt.Sprintf("message truncated: at most %d bytes and one descriptor per message", vproto.MaxMessage))
			return
		}
		m := buf[:n]
		h, err := vproto.ParseHeader(m)
		if err != nil {
			closeFDs(fds)
			s.BadMessages.Add(1)
			ss.fatal(err.Error())
			return
		}
		body := m[vproto.HeaderLen:]
		if h.Type == vproto.TypePost {
			closeFDs(fds)
			wrs, err = vproto.ParseWRs(wrs[:0], body)
			if err != nil {
				s.BadMessages.Add(1)
				ss.fatal(err.Error())
				return
			}
			s.nic.Post(ss.id, wrs)
			continue
		}
		res, err := ss.handle(h.Type, body, fds)
		closeFDs(fds)
		r := vproto.Reply{}
		if err != nil {
			r.Error = err.Error()
		} else if res != nil {
			r.Body, err = json.Marshal(res)
			if err != nil {
				r.Error = err.Error()
			}
		}
		msg, err := vproto.AppendJSON(nil, vproto.TypeReply, h.Seq, r)
		if err != nil {
			msg, _ = vproto.AppendJSON(nil, vproto.TypeReply, h.Seq, vproto.Reply{Error: err.Error()})
		}
		ss.wmu.Lock()
		_, err = ss.conn.Write(msg)
		ss.wmu.Unlock()
		if err != nil {
			return
		}
	}
}

func (ss *session) handle(t vproto.Type, body []byte, fds []int) (any, error) {
	s := ss.svc
	decode := func(v any) error {
		if err := json.Unmarshal(body, v); err != nil {
			return fmt.Errorf("bad %s request: %w", t, err)
		}
		return nil
	}
	switch t {
	case vproto.TypeHello:
		var h vproto.Hello
		if err := decode(&h); err != nil {
			return nil, err
		}
		if h.Version != vproto.Version {
			return nil, fmt.Errorf("client speaks protocol %d, mrc-nicd %d: rebuild the application against this nic/verbs", h.Version, vproto.Version)
		}
		// Under s.mu: SessionList reads every session's client from
		// other sessions' goroutines. This goroutine is the only writer,
		// so its own reads (logf) need no lock.
		s.mu.Lock()
		ss.client = h.Client
		s.mu.Unlock()
		ss.logf().Debug("service: session opened")
		info := s.nic.Info()
		info.SessionID = ss.id
		return info, nil
	case vproto.TypeRegMR:
		var r vproto.RegMR
		if err := decode(&r); err != nil {
			return nil, err
		}
		if len(fds) != 1 {
			return nil, fmt.Errorf("reg_mr needs exactly one memfd passed with the request (got %d)", len(fds))
		}
		info, err := s.nic.RegMR(ss.id, fds[0], r)
		if err != nil {
			return nil, fmt.Errorf("reg_mr: %w", err)
		}
		return info, nil
	case vproto.TypeDeregMR:
		var r vproto.DeregMR
		if err := decode(&r); err != nil {
			return nil, err
		}
		return nil, s.nic.DeregMR(ss.id, r)
	case vproto.TypeCreateQP:
		var r vproto.CreateQP
		if err := decode(&r); err != nil {
			return nil, err
		}
		return s.nic.CreateQP(ss.id, r)
	case vproto.TypeConnectQP:
		var r vproto.ConnectQP
		if err := decode(&r); err != nil {
			return nil, err
		}
		return nil, s.nic.ConnectQP(ss.id, r)
	case vproto.TypeDestroyQP:
		var r vproto.DestroyQP
		if err := decode(&r); err != nil {
			return nil, err
		}
		return nil, s.nic.DestroyQP(ss.id, r.QPN)
	case vproto.TypeWatch:
		return ss.watch(body)
	case vproto.TypeRing:
		var r vproto.Ring
		if err := decode(&r); err != nil {
			return nil, err
		}
		rn, ok := s.nic.(RingNIC)
		if !ok {
			return nil, errors.New("ring: this NIC serves the socket path only")
		}
		if len(fds) != 2 {
			return nil, fmt.Errorf("ring needs the ring memfd and the doorbell eventfd passed with the request (got %d descriptors)", len(fds))
		}
		if err := rn.AttachRing(ss.id, fds[0], fds[1], r); err != nil {
			return nil, fmt.Errorf("ring: %w", err)
		}
		return nil, nil
	case vproto.TypeCtl:
		var r vproto.CtlRequest
		if err := decode(&r); err != nil {
			return nil, err
		}
		if r.Cmd == vproto.CtlSessions {
			return s.SessionList(ss.caller()), nil
		}
		return s.nic.Ctl(ss.caller(), r)
	}
	return nil, fmt.Errorf("message type %s is not a request", t)
}

func parseFDs(oob []byte) []int {
	if len(oob) == 0 {
		return nil
	}
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return nil
	}
	var fds []int
	for _, m := range msgs {
		if f, err := unix.ParseUnixRights(&m); err == nil {
			fds = append(fds, f...)
		}
	}
	return fds
}

func closeFDs(fds []int) {
	for _, fd := range fds {
		unix.Close(fd)
	}
}

// ErrNotOwner is returned (wrapped) for a QP another session owns.
var ErrNotOwner = errors.New("QP is not owned by this application")
