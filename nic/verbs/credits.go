package verbs

import (
	"errors"
	"fmt"
)

// Credits as Write-with-Immediate.
//
// MRC keeps only Write and Write-with-Immediate: there are no receive
// queues, so a receiver cannot post receive buffers to pace its sender. The
// pattern collectives use instead (and that this file packages) is a FIFO
// of slots in the receiver's memory plus credits:
//
//   - the receiver owns Count slots of Size bytes in a registered region and
//     tells the sender where they are (Slots, exchanged out of band); the
//     sender starts with one credit per slot;
//   - the sender writes each message into the next slot, in ring order,
//     with a Write-with-Immediate whose immediate names the slot and carries
//     a 24-bit tag; it never writes a slot it holds no credit for;
//   - the receiver consumes messages in order (an immediate arrives only
//     after its data and every earlier message of the QP), and once it is
//     done with slots it returns their credits with one zero-length
//     Write-with-Immediate on the same QP: "n slots from slot s are free".
//
// Data and credit immediates are told apart by bit 31, so both directions of
// a QP can carry data and credits at once (all-to-all does).
//
// A credit write has zero length, so it names no memory (IBTA: no rkey
// check), and the engine accepts it with any address; CreditTarget lets an
// application aim it at a region of the sender anyway, for NICs that check.

// Immediate layout.
const (
	creditFlag = 1 << 31
	slotShift  = 24
	slotMask   = 1<<7 - 1
	tagMask    = 1<<24 - 1
)

// MaxCreditSlots bounds a FIFO's slots (the slot index has 7 bits of the
// immediate; 64 keeps a FIFO and its credits inside the engine's default
// cap of 64 Write-with-Immediate messages in flight per direction).
const MaxCreditSlots = 64

// MaxCreditTag is the largest tag a message can carry.
const MaxCreditTag = tagMask

// ErrNoCredit is returned by CreditSender.Post when every slot of the
// receiver is in use: wait for a credit (CreditSender.OnCompletion).
var ErrNoCredit = errors.New("verbs: no credit: every receive slot of the peer is in use")

// Slots describes a receiver's FIFO as its owner advertises it to the
// sender: Count slots of Size bytes from Addr in the region RKey.
type Slots struct {
	Addr  uint64 `json:"addr"`
	RKey  uint32 `json:"rkey"`
	Count int    `json:"count"`
	Size  int    `json:"size"`
}

// CreditTarget is where a receiver's credit writes land at the sender. Zero
// bytes are written, so the zero value does on mrc-nicd; a NIC that checks
// the rkey of zero-length writes needs an address in a region of the sender
// registered for remote writes.
type CreditTarget struct {
	Addr uint64 `json:"addr"`
	RKey uint32 `json:"rkey"`
}

func (s Slots) check() error {
	if s.Count < 1 || s.Count > MaxCreditSlots {
		return fmt.Errorf("verbs: credit FIFO of %d slots: want 1..%d", s.Count, MaxCreditSlots)
	}
	if s.Size < 0 || s.Size > 1<<30 {
		return fmt.Errorf("verbs: credit FIFO slot size %d: want 0..2^30 bytes", s.Size)
	}
	return nil
}

// CreditSender writes messages into a peer's FIFO over one QP, one slot per
// message, only while it holds the slot's credit. It is not safe for
// concurrent use: one goroutine posts and feeds it completions.
type CreditSender struct {
	qp      *QP
	dst     Slots
	next    int // slot of the next message
	credits int
	id      uint64
	// IDBase is ORed into the work request IDs of the data writes (they are
	// unsignaled, so IDs appear only in error completions).
	IDBase uint64
}

// NewCreditSender starts a sender holding every slot's credit of dst.
func NewCreditSender(qp *QP, dst Slots) (*CreditSender, error) {
	if err := dst.check(); err != nil {
		return nil, err
	}
	return &CreditSender{qp: qp, dst: dst, credits: dst.Count}, nil
}

// Credits is how many messages may be posted now.
func (s *CreditSender) Credits() int { return s.credits }

// Idle reports whether every credit is back: the receiver consumed every
// message posted.
func (s *CreditSender) Idle() bool { return s.credits == s.dst.Count }

// NextSlot is the slot the next message goes to (callers with one local
// staging slot per remote slot fill the matching one).
func (s *CreditSender) NextSlot() int { return s.next }

// SlotSize is the receiver's slot size: the largest message.
func (s *CreditSender) SlotSize() int { return s.dst.Size }

// Post writes n bytes at off in local into the next slot with tag, as an
// unsignaled Write-with-Immediate: the returning credit says it was
// consumed. It fails with ErrNoCredit when no slot is free.
func (s *CreditSender) Post(local *MR, off uint64, n int, tag uint32) error {
	w, err := s.WR(local, off, n, tag)
	if err != nil {
		return err
	}
	if err := s.qp.PostSend(w); err != nil {
		s.unwind()
		return err
	}
	return nil
}

// WR takes the next slot's credit and returns the work request that writes
// the message into it, for callers that post several at once (one
// PostSend on this sender's QP, in the order WR returned them). A request
// obtained here must be posted: the slot is spent.
func (s *CreditSender) WR(local *MR, off uint64, n int, tag uint32) (SendWR, error) {
	if s.credits == 0 {
		return SendWR{}, ErrNoCredit
	}
	if n < 0 || n > s.dst.Size {
		return SendWR{}, fmt.Errorf("verbs: credit message of %d bytes: the peer's slots hold %d", n, s.dst.Size)
	}
	if tag > MaxCreditTag {
		return SendWR{}, fmt.Errorf("verbs: credit message tag %#x: the tag has 24 bits", tag)
	}
	slot := s.next
	imm := uint32(slot)<<slotShift | tag
	w := WriteImm(s.IDBase|s.id, local, off, uint32(n), s.dst.Addr+uint64(slot*s.dst.Size), s.dst.RKey, imm)
	w.Unsignaled = true
	s.id++
	s.credits--
	s.next = (s.next + 1) % s.dst.Count
	return w, nil
}

// unwind gives back the last WR's slot (its post failed).
func (s *CreditSender) unwind() {
	s.id--
	s.credits++
	s.next = (s.next - 1 + s.dst.Count) % s.dst.Count
}

// OnCompletion takes c if it is a credit for this sender (a credit
// immediate on its QP) and reports whether it was. A credit for more slots
// than are out is an error: the peer and this side disagree.
func (s *CreditSender) OnCompletion(c Completion) (bool, error) {
	if c.Op != CQRecvImm || c.QPN != s.qp.QPN || c.Imm&creditFlag == 0 {
		return false, nil
	}
	n := int(c.Imm & tagMask)
	first := int(c.Imm >> slotShift & slotMask)
	out := s.dst.Count - s.credits
	// The oldest outstanding slot is next - out (mod Count).
	oldest := ((s.next-out)%s.dst.Count + s.dst.Count) % s.dst.Count
	if n < 1 || n > out || first != oldest {
		return true, fmt.Errorf("verbs: QP %#06x: credit for %d slots from slot %d, but %d are out from slot %d", s.qp.QPN, n, first, out, oldest)
	}
	s.credits += n
	return true, nil
}

// Message is one message a CreditReceiver took from its FIFO. Data is a
// view of the message in its slot (the completion's length), valid until
// the slot is released.
type Message struct {
	Slot int
	Tag  uint32
	Data []byte
}

// CreditReceiver owns a FIFO of slots in a registered region, hands out the
// messages that land there in order, and returns their credits. It is not
// safe for concurrent use.
type CreditReceiver struct {
	qp       *QP
	mr       *MR
	off      uint64
	count    int
	size     int
	next     int // slot of the next message
	consumed int // messages taken and not yet released
	release  int // slot of the oldest unreleased message
	target   CreditTarget
	id       uint64
	// IDBase is ORed into the work request IDs of the credit writes.
	IDBase uint64
}

// NewCreditReceiver makes a FIFO of count slots of size bytes at off in mr,
// receiving on qp; its credits land at target in the sender's memory.
func NewCreditReceiver(qp *QP, mr *MR, off uint64, count, size int, target CreditTarget) (*CreditReceiver, error) {
	if err := (Slots{Count: count, Size: size}).check(); err != nil {
		return nil, err
	}
	if off+uint64(count*size) > uint64(len(mr.Buf)) {
		return nil, fmt.Errorf("verbs: credit FIFO of %d x %d bytes at offset %d does not fit the %d-byte region", count, size, off, len(mr.Buf))
	}
	return &CreditReceiver{qp: qp, mr: mr, off: off, count: count, size: size, target: target}, nil
}

// Slots is what the sender needs: send it out of band.
func (r *CreditReceiver) Slots() Slots {
	return Slots{Addr: r.mr.Addr + r.off, RKey: r.mr.RKey, Count: r.count, Size: r.size}
}

// OnCompletion takes c if it is a data immediate on this receiver's QP and
// returns the message. A message in an unexpected slot is an error (the
// sender broke the protocol).
func (r *CreditReceiver) OnCompletion(c Completion) (Message, bool, error) {
	if c.Op != CQRecvImm || c.QPN != r.qp.QPN || c.Imm&creditFlag != 0 {
		return Message{}, false, nil
	}
	slot := int(c.Imm >> slotShift & slotMask)
	if slot != r.next || r.consumed == r.count {
		return Message{}, true, fmt.Errorf("verbs: QP %#06x: message in slot %d, expected slot %d (%d held)", r.qp.QPN, slot, r.next, r.consumed)
	}
	if int(c.Len) > r.size {
		return Message{}, true, fmt.Errorf("verbs: QP %#06x: %d-byte message in a %d-byte slot", r.qp.QPN, c.Len, r.size)
	}
	r.next = (r.next + 1) % r.count
	r.consumed++
	base := int(r.off) + slot*r.size
	return Message{Slot: slot, Tag: c.Imm & tagMask, Data: r.mr.Buf[base : base+int(c.Len)]}, true, nil
}

// Held is how many messages were taken and not released.
func (r *CreditReceiver) Held() int { return r.consumed }

// Release returns the credits of the n oldest messages taken (their slots
// may be overwritten from now on) with one zero-length Write-with-Immediate.
func (r *CreditReceiver) Release(n int) error {
	if n < 1 || n > r.consumed {
		return fmt.Errorf("verbs: release %d credits: %d messages are held", n, r.consumed)
	}
	imm := uint32(creditFlag) | uint32(r.release)<<slotShift | uint32(n)
	w := SendWR{ID: r.IDBase | r.id, Op: OpWriteImm, RemoteAddr: r.target.Addr, RKey: r.target.RKey, Imm: imm, Unsignaled: true}
	if err := r.qp.PostSend(w); err != nil {
		return err
	}
	r.id++
	r.consumed -= n
	r.release = (r.release + n) % r.count
	return nil
}
