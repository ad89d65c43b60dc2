// Package vproto is the protocol on the device socket between applications
// (nic/verbs), mrcctl and mrc-nicd's verbs service (nic/service).
//
// The socket is a unix SOCK_SEQPACKET socket, so every message keeps its
// boundaries. A message is an 8-byte header (type, version, flags, sequence
// number) and a body. Control messages (hello, memory registration, QP
// management, mrcctl requests) carry JSON bodies and are answered by a Reply
// with the same sequence number; memory registration passes the region's
// memfd with SCM_RIGHTS. The two hot messages are binary and unanswered:
// Post carries a batch of work requests (one sendmsg for the whole batch),
// Completions carries a batch of completion entries from the daemon. Errors
// in posted work requests come back as error completions, as on a hardware
// NIC.
package vproto

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
)

// Version is the protocol version; Hello fails on a mismatch. Version 2:
// access flags on RegMR, the QP's transport parameters in CreateQP's reply
// and ConnectQP.
const Version = 2

// HeaderLen is the size of the message header.
const HeaderLen = 8

// MaxMessage is the largest message either side sends or accepts.
const MaxMessage = 256 << 10

// MaxBatch is the largest number of work requests in one Post and of
// completions in one Completions message.
const MaxBatch = (MaxMessage - HeaderLen) / WRLen

// Type is a message type.
type Type uint8

// Message types.
const (
	TypeHello       Type = 1  // JSON Hello -> Reply(DeviceInfo)
	TypeRegMR       Type = 2  // JSON RegMR + memfd -> Reply(MRInfo)
	TypeDeregMR     Type = 3  // JSON DeregMR -> Reply
	TypeCreateQP    Type = 4  // JSON CreateQP -> Reply(QPInfo)
	TypeConnectQP   Type = 5  // JSON ConnectQP -> Reply
	TypeDestroyQP   Type = 6  // JSON DestroyQP -> Reply
	TypeCtl         Type = 7  // JSON CtlRequest -> Reply(command specific)
	TypePost        Type = 8  // binary []WR, no reply
	TypeCompletions Type = 9  // binary []CQE, daemon -> client
	TypeReply       Type = 10 // JSON Reply
	TypeFatal       Type = 11 // JSON Reply{Error}: the daemon is closing the device
	TypeWatch       Type = 12 // JSON Watch -> Reply(WatchInfo); then TypeTelemetry messages
	TypeTelemetry   Type = 13 // JSON Lines of telemetry samples, daemon -> client (docs/telemetry.md)
	// TypeRing: JSON Ring + the ring's memfd and a doorbell eventfd ->
	// Reply. From then on the session posts and completes through the
	// shared-memory rings (nic/shmring); a daemon without rings answers
	// with an error and the client stays on the socket.
	TypeRing Type = 14
)

func (t Type) String() string {
	names := [...]string{"", "hello", "reg_mr", "dereg_mr", "create_qp", "connect_qp", "destroy_qp",
		"ctl", "post", "completions", "reply", "fatal", "watch", "telemetry", "ring"}
	if int(t) < len(names) && t != 0 {
		return names[t]
	}
	return fmt.Sprintf("type(%d)", uint8(t))
}

// Header is the message header.
type Header struct {
	Type    Type
	Version uint8
	Flags   uint16
	Seq     uint32
}

// PutHeader writes h into b[:HeaderLen].
func PutHeader(b []byte, h Header) {
	b[0] = byte(h.Type)
	b[1] = h.Version
	binary.LittleEndian.PutUint16(b[2:], h.Flags)
	binary.LittleEndian.PutUint32(b[4:], h.Seq)
}

// ErrShort is returned for a message shorter than its header or body needs.
var ErrShort = errors.New("vproto: message too short")

// ParseHeader reads the header of message m.
func ParseHeader(m []byte) (Header, error) {
	if len(m) < HeaderLen {
		return Header{}, ErrShort
	}
	h := Header{Type: Type(m[0]), Version: m[1], Flags: binary.LittleEndian.Uint16(m[2:]),
		Seq: binary.LittleEndian.Uint32(m[4:])}
	if h.Version != Version {
		return h, fmt.Errorf("vproto: message version %d, this side speaks %d: use matching mrc-nicd and client builds", h.Version, Version)
	}
	return h, nil
}

// AppendJSON appends a message of type t with JSON body v to b.
func AppendJSON(b []byte, t Type, seq uint32, v any) ([]byte, error) {
	var h [HeaderLen]byte
	PutHeader(h[:], Header{Type: t, Version: Version, Seq: seq})
	b = append(b, h[:]...)
	if v == nil {
		return b, nil
	}
	body, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("vproto: encode %s: %w", t, err)
	}
	if len(b)+len(body) > MaxMessage {
		return nil, fmt.Errorf("vproto: %s message of %d bytes exceeds %d", t, len(b)+len(body), MaxMessage)
	}
	return append(b, body...), nil
}

// Opcode is a work request opcode.
type Opcode uint8

// Work request opcodes. Only the RDMA Write family is supported by MRC; the
// others are named so that a request for them gets a clear error.
const (
	OpWrite    Opcode = 0
	OpWriteImm Opcode = 1
	OpSend     Opcode = 2
	OpRead     Opcode = 4
)

func (o Opcode) String() string {
	switch o {
	case OpWrite:
		return "RDMA_WRITE"
	case OpWriteImm:
		return "RDMA_WRITE_WITH_IMM"
	case OpSend:
		return "SEND"
	case OpRead:
		return "RDMA_READ"
	}
	return fmt.Sprintf("opcode(%d)", uint8(o))
}

// Supported reports whether MRC carries o.
func (o Opcode) Supported() bool { return o == OpWrite || o == OpWriteImm }

// WR flags.
const (
	// FlagSignaled asks for a completion on success (errors always complete).
	FlagSignaled uint8 = 1 << 0
)

// WRLen is the encoded size of a WR.
const WRLen = 48

// WR is one work request: write Len bytes at LocalAddr (inside the region of
// LKey, in the poster's address space) to RemoteAddr in the peer's region
// RKey, on QP QPN.
type WR struct {
	ID         uint64
	QPN        uint32
	Op         Opcode
	Flags      uint8
	LocalAddr  uint64
	LKey       uint32
	Len        uint32
	RemoteAddr uint64
	RKey       uint32
	Imm        uint32
}

// Put encodes w into b[:WRLen].
func (w *WR) Put(b []byte) {
	_ = b[WRLen-1]
	le := binary.LittleEndian
	le.PutUint64(b[0:], w.ID)
	le.PutUint32(b[8:], w.QPN)
	b[12] = byte(w.Op)
	b[13] = w.Flags
	b[14], b[15] = 0, 0
	le.PutUint64(b[16:], w.LocalAddr)
	le.PutUint32(b[24:], w.LKey)
	le.PutUint32(b[28:], w.Len)
	le.PutUint64(b[32:], w.RemoteAddr)
	le.PutUint32(b[40:], w.RKey)
	le.PutUint32(b[44:], w.Imm)
}

// Get decodes b[:WRLen] into w.
func (w *WR) Get(b []byte) {
	_ = b[WRLen-1]
	le := binary.LittleEndian
	w.ID = le.Uint64(b[0:])
	w.QPN = le.Uint32(b[8:])
	w.Op = Opcode(b[12])
	w.Flags = b[13]
	w.LocalAddr = le.Uint64(b[16:])
	w.LKey = le.Uint32(b[24:])
	w.Len = le.Uint32(b[28:])
	w.RemoteAddr = le.Uint64(b[32:])
	w.RKey = le.Uint32(b[40:])
	w.Imm = le.Uint32(b[44:])
}

// AppendWRs appends a Post message carrying wrs to b.
func AppendWRs(b []byte, wrs []WR) []byte {
	var h [HeaderLen]byte
	PutHeader(h[:], Header{Type: TypePost, Version: Version})
	b = append(b, h[:]...)
	for i := range wrs {
		var e [WRLen]byte
		wrs[i].Put(e[:])
		b = append(b, e[:]...)
	}
	return b
}

// ParseWRs decodes the body of a Post message into dst.
func ParseWRs(dst []WR, body []byte) ([]WR, error) {
	if len(body)%WRLen != 0 {
		return dst, fmt.Errorf("vproto: post body of %d bytes is not a multiple of %d", len(body), WRLen)
	}
	for off := 0; off < len(body); off += WRLen {
		var w WR
		w.Get(body[off:])
		dst = append(dst, w)
	}
	return dst, nil
}

// Status is a completion status; the values are ibv_wc_status's where one
// exists, so that verbs users recognise them.
type Status uint8

// Completion statuses.
const (
	StatusSuccess      Status = 0
	StatusLocLenErr    Status = 1  // length larger than the device's limit
	StatusLocQPOpErr   Status = 2  // QP not connected, or not owned by this application
	StatusLocProtErr   Status = 4  // local address/lkey not in a region of this application
	StatusWRFlushErr   Status = 5  // QP destroyed or in error before the WR finished
	StatusRemInvReqErr Status = 9  // the responder found the request invalid
	StatusRemAccessErr Status = 10 // remote rkey unknown, without remote-write access, or VA range outside its region
	StatusRemOpErr     Status = 11 // the remote could not complete the operation
	StatusRetryExcErr  Status = 12 // transport gave up (no acknowledgement)
	StatusGeneralErr   Status = 21 // anything else
	StatusDeviceGone   Status = 22 // the daemon went away (client-side only)
)

var statusText = map[Status]string{
	StatusSuccess:      "success",
	StatusLocLenErr:    "local length error: message longer than the device's maximum",
	StatusLocQPOpErr:   "local QP operation error: QP unknown, not connected, owned by another application, or the opcode is not supported by MRC (only RDMA Write and Write-with-Immediate)",
	StatusLocProtErr:   "local protection error: local address range is not inside a region registered by this application (check lkey and length)",
	StatusWRFlushErr:   "work request flushed: the QP was destroyed or moved to error",
	StatusRemInvReqErr: "remote invalid request: the responder found the request malformed",
	StatusRemAccessErr: "remote access error: the remote rkey is not registered by the peer QP's application, its region was not registered with remote-write access, or the VA range is outside it",
	StatusRemOpErr:     "remote operation error: the responder could not complete the write",
	StatusRetryExcErr:  "transport retry exceeded: the peer did not acknowledge in time",
	StatusGeneralErr:   "general error",
	StatusDeviceGone:   "device gone: the connection to mrc-nicd was lost",
}

func (s Status) String() string {
	if t, ok := statusText[s]; ok {
		return t
	}
	return fmt.Sprintf("status %d", uint8(s))
}

// CQE opcodes: what completed.
const (
	CQWrite    Opcode = 0   // a posted RDMA Write finished
	CQWriteImm Opcode = 1   // a posted Write-with-Immediate finished
	CQRecvImm  Opcode = 128 // a Write-with-Immediate arrived (responder side)
	CQQPError  Opcode = 255 // asynchronous event: the QP went to error; Status says why
)

// CQELen is the encoded size of a CQE.
const CQELen = 32

// CQE is one completion entry.
type CQE struct {
	ID     uint64 // the WR's ID (0 for CQRecvImm)
	QPN    uint32
	Status Status
	Op     Opcode
	Len    uint32 // bytes written (CQRecvImm: the message length)
	Imm    uint32
	SrcQP  uint32 // CQRecvImm: the sender's QPN
	Vendor uint32 // extra detail (engine error code)
}

// Put encodes c into b[:CQELen].
func (c *CQE) Put(b []byte) {
	_ = b[CQELen-1]
	le := binary.LittleEndian
	le.PutUint64(b[0:], c.ID)
	le.PutUint32(b[8:], c.QPN)
	b[12] = byte(c.Status)
	b[13] = byte(c.Op)
	b[14], b[15] = 0, 0
	le.PutUint32(b[16:], c.Len)
	le.PutUint32(b[20:], c.Imm)
	le.PutUint32(b[24:], c.SrcQP)
	le.PutUint32(b[28:], c.Vendor)
}

// Get decodes b[:CQELen] into c.
func (c *CQE) Get(b []byte) {
	_ = b[CQELen-1]
	le := binary.LittleEndian
	c.ID = le.Uint64(b[0:])
	c.QPN = le.Uint32(b[8:])
	c.Status = Status(b[12])
	c.Op = Opcode(b[13])
	c.Len = le.Uint32(b[16:])
	c.Imm = le.Uint32(b[20:])
	c.SrcQP = le.Uint32(b[24:])
	c.Vendor = le.Uint32(b[28:])
}

// AppendCQEs appends a Completions message carrying cqes to b.
func AppendCQEs(b []byte, cqes []CQE) []byte {
	var h [HeaderLen]byte
	PutHeader(h[:], Header{Type: TypeCompletions, Version: Version})
	b = append(b, h[:]...)
	for i := range cqes {
		var e [CQELen]byte
		cqes[i].Put(e[:])
		b = append(b, e[:]...)
	}
	return b
}

// ParseCQEs decodes the body of a Completions message, appending to dst.
func ParseCQEs(dst []CQE, body []byte) ([]CQE, error) {
	if len(body)%CQELen != 0 {
		return dst, fmt.Errorf("vproto: completions body of %d bytes is not a multiple of %d", len(body), CQELen)
	}
	for off := 0; off < len(body); off += CQELen {
		var c CQE
		c.Get(body[off:])
		dst = append(dst, c)
	}
	return dst, nil
}

// Hello opens a session.
type Hello struct {
	Version int    `json:"version"`
	Client  string `json:"client"` // program name, for logs and mrcctl
	PID     int    `json:"pid"`
}

// DeviceInfo answers Hello: what the device is and can do (query_device).
type DeviceInfo struct {
	Host      string     `json:"host"`
	Mode      string     `json:"mode"`
	MTU       int        `json:"mtu"`
	EVs       int        `json:"evs"`
	MaxMsg    uint32     `json:"max_msg"`
	MaxBatch  int        `json:"max_batch"`
	Ports     []PortInfo `json:"ports"`
	SessionID uint32     `json:"session_id"`
}

// PortInfo describes one NIC port.
type PortInfo struct {
	Name      string     `json:"name"`
	Interface string     `json:"interface"`
	Plane     int        `json:"plane"`
	Address   netip.Addr `json:"address"`
	MAC       string     `json:"mac"`
	Up        bool       `json:"up"`
}

// Access is a region's access rights, with ibv_access_flags' values. Local
// read is always granted. Remote write requires local write (as in verbs).
type Access uint32

// Access flags.
const (
	AccessLocalWrite  Access = 1 << 0 // IBV_ACCESS_LOCAL_WRITE
	AccessRemoteWrite Access = 1 << 1 // IBV_ACCESS_REMOTE_WRITE: peers may write with the rkey
)

// Check returns an error saying what is wrong with a, or nil.
func (a Access) Check() error {
	if a&^(AccessLocalWrite|AccessRemoteWrite) != 0 {
		return fmt.Errorf("access %#x: only local write (1) and remote write (2) are supported", uint32(a))
	}
	if a&AccessRemoteWrite != 0 && a&AccessLocalWrite == 0 {
		return fmt.Errorf("access %#x: remote write needs local write too (as in verbs)", uint32(a))
	}
	return nil
}

// RegMR registers the memfd passed alongside as a region of Len bytes that
// the application maps at Addr, with Access rights.
type RegMR struct {
	Addr   uint64 `json:"addr"`
	Len    uint64 `json:"len"`
	Access Access `json:"access"`
}

// MRInfo answers RegMR.
type MRInfo struct {
	LKey uint32 `json:"lkey"`
	RKey uint32 `json:"rkey"`
}

// DeregMR removes a region.
type DeregMR struct {
	LKey uint32 `json:"lkey"`
}

// CreateQP asks for a QP.
type CreateQP struct {
	// SQDepth bounds outstanding work requests (0: device default).
	SQDepth int `json:"sq_depth"`
	// Transport is the QP's transport (absent: MRC).
	Transport Transport `json:"transport,omitempty"`
}

// QPInfo answers CreateQP: what the peer needs to connect to the QP
// (exchanged out of band with the port addresses).
type QPInfo struct {
	QPN uint32 `json:"qpn"`
	PSN uint32 `json:"psn"` // initial send PSN
	// MTU is the payload bytes per packet, Window the receive window (MPR)
	// in packets and MaxWImm the Write-with-Immediate messages it accepts
	// in flight.
	MTU     int `json:"mtu"`
	Window  int `json:"window"`
	MaxWImm int `json:"max_wimm"`
	// Transport is the QP's transport.
	Transport Transport `json:"transport,omitempty"`
}

// ConnectQP connects a QP to a remote QP (RTR+RTS in one step).
type ConnectQP struct {
	QPN       uint32 `json:"qpn"`
	RemoteQPN uint32 `json:"remote_qpn"`
	RemotePSN uint32 `json:"remote_psn"`
	// RemoteAddrs are the peer's port addresses, indexed by plane.
	RemoteAddrs []netip.Addr `json:"remote_addrs"`
	// The peer's MTU, window and Write-with-Immediate cap, from its
	// CreateQP reply (QPInfo); all are required. Different MTUs fail here.
	RemoteMTU     int `json:"remote_mtu"`
	RemoteWindow  int `json:"remote_window"`
	RemoteMaxWImm int `json:"remote_max_wimm"`
	// RemoteTransport, when set, is the peer QP's transport: a QP whose
	// own differs fails to connect (transport mismatch). Absent: not
	// checked (the peer is taken to run this QP's transport).
	RemoteTransport *Transport `json:"remote_transport,omitempty"`
	// EVs, when set, is the QP's active EV set, used as given (1..256 EVs,
	// on planes both ends have); empty lets the daemon choose the device's
	// EV count, spread over every plane and T1.
	EVs []uint32 `json:"evs,omitempty"`
}

// DestroyQP destroys a QP; outstanding work requests are flushed.
type DestroyQP struct {
	QPN uint32 `json:"qpn"`
}

// Reply answers a JSON request: Error is empty on success, Body is the
// request's answer.
type Reply struct {
	Error string          `json:"error,omitempty"`
	Body  json.RawMessage `json:"body,omitempty"`
}

// Ring asks the daemon to serve the session through shared-memory rings:
// the message carries two descriptors, the memfd holding the rings (sealed
// against shrinking and growing, initialised by nic/shmring.Init) and an
// eventfd the application writes as the doorbell.
type Ring struct {
	// Size is the memfd's length in bytes (the daemon maps this much and
	// checks the header's layout fits in it).
	Size int `json:"size"`
}
