package perf

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"time"

	"github.com/softmrc/softmrc/nic/verbs"
)

// --verify checks every iteration, not only the last write to each slot.
//
// Bandwidth rounds run in windows of k iterations per QP (k = the slots,
// at most maxVerifyWindow). Iteration i writes slot i mod k with
// iterPattern(i). After posting a window's writes, the sender posts a
// zero-length Write-with-Immediate "check window w, c writes" on the same
// QP. An immediate completes only after every earlier message of the QP
// landed, so the receiver then compares all c slots against the patterns of
// iterations w·k … w·k+c−1 and answers "window w checked" with an
// immediate. Only then does the sender reuse the slots for window w+1. A
// write that never landed leaves the slot holding iteration i−k's bytes (or
// the zeroes of the round's start), which differ from iteration i's: every
// lost or partial write is counted. The check costs a round trip per window;
// without --verify nothing of this runs.
//
// Latency rounds ping-pong one slot: each side checks the peer's message i
// when its immediate arrives, before answering, so every iteration is checked
// there too.

// maxVerifyWindow bounds k so that a window's count fits the immediate.
const maxVerifyWindow = 1 << 15

// The check immediates: bit 31 marks a verify message (never stopImm: a
// request has bit 30 clear, an ack has count bits 0), bit 30 an ack, bits
// 29..16 the window modulo 2^14, bits 15..0 the writes in the window.
const (
	immVerify   = 1 << 31
	immAck      = 1 << 30
	immWinShift = 16
	immWinMask  = 1<<14 - 1
	immCntMask  = 1<<16 - 1
)

// checkIDFlag marks the work request IDs of check immediates (not counted
// as iterations).
const checkIDFlag = 1 << 39

func checkReq(win uint64, count int) uint32 {
	return immVerify | uint32(win&immWinMask)<<immWinShift | uint32(count)
}

func checkAck(win uint64) uint32 { return immVerify | immAck | uint32(win&immWinMask)<<immWinShift }

func isVerifyImm(imm uint32) bool { return imm != stopImm && imm&immVerify != 0 }

// iterPattern fills b with iteration iter's bytes on QP qp: the pattern of
// the (size, iteration, QP), with the first up to 8 bytes replaced by the
// iteration number (XOR the QP), so that even a 2-byte message differs from
// the one k iterations earlier in the same slot.
func iterPattern(b []byte, size int, iter uint64, qp int) {
	pattern(b, size, int(iter), qp)
	var t [8]byte
	binary.LittleEndian.PutUint64(t[:], iter^uint64(qp)<<48)
	copy(b, t[:])
}

// checkSlots compares count slots of q's destination, from slot 0, against
// iterations first … first+count−1 and adds the outcome to r.
func checkSlots(r *result, q *qpCtx, size int, first uint64, count int, want []byte) {
	for j := 0; j < count; j++ {
		iterPattern(want, size, first+uint64(j), q.idx)
		got := q.dst.Buf[j*size : (j+1)*size]
		r.Checked += uint64(size)
		if bytes.Equal(got, want) {
			continue
		}
		for x := range got {
			if got[x] != want[x] {
				if r.FirstBad < 0 {
					// The byte offset in the round's stream of this QP.
					r.FirstBad = int64((first+uint64(j))*uint64(size)) + int64(x)
				}
				r.Mismatches++
			}
		}
	}
}

// verifyState is one QP's --verify progress in a bandwidth round.
type verifyState struct {
	win     uint64 // sender: windows acknowledged (the current window)
	waitAck bool   // sender: the current window's check is out
	rxWin   uint64 // receiver: the next window expected
	res     result // receiver: what the checks found
	want    []byte
}

func (v *verifyState) reset() {
	*v = verifyState{want: v.want}
	v.res.FirstBad = -1
}

// verifyWindow is k for size.
func (s *session) verifyWindow(size int) int { return min(s.slots(size), maxVerifyWindow) }

// onCheckImm handles a verify immediate that arrived on q: a check request
// is checked and acknowledged, an ack opens the sender's next window.
func (s *session) onCheckImm(q *qpCtx, size int, imm uint32) error {
	v := &q.v
	if imm&immAck != 0 {
		if !v.waitAck || uint64(imm>>immWinShift&immWinMask) != v.win&immWinMask {
			return fmt.Errorf("--verify: QP %#06x: unexpected check ack %#x (window %d)", q.qp.QPN, imm, v.win)
		}
		v.win++
		v.waitAck = false
		return nil
	}
	if uint64(imm>>immWinShift&immWinMask) != v.rxWin&immWinMask {
		return fmt.Errorf("--verify: QP %#06x: check of window %d arrived, expected %d", q.qp.QPN, imm>>immWinShift&immWinMask, v.rxWin&immWinMask)
	}
	count := int(imm & immCntMask)
	k := s.verifyWindow(size)
	if count > k {
		return fmt.Errorf("--verify: QP %#06x: check of %d writes, window is %d", q.qp.QPN, count, k)
	}
	if len(v.want) < size {
		v.want = make([]byte, size)
	}
	checkSlots(&v.res, q, size, v.rxWin*uint64(k), count, v.want[:size])
	win := v.rxWin
	v.rxWin++
	return q.qp.PostSend(verbs.WriteImm(checkIDFlag|win, q.src, 0, 0, q.remote.VAddr, q.remote.RKey, checkAck(win)))
}

// verifyResult sums the receiver-side checks of every QP.
func (s *session) verifyResult() result {
	r := result{FirstBad: -1}
	for _, q := range s.qps {
		r.Mismatches += q.v.res.Mismatches
		r.Checked += q.v.res.Checked
		if r.FirstBad < 0 {
			r.FirstBad = q.v.res.FirstBad
		}
	}
	return r
}

// answerChecks serves check requests (and takes acks) until stop is
// closed: the receiving side of a round while it has nothing else to do.
func (s *session) answerChecks(stop <-chan struct{}, size int) error {
	for {
		select {
		case <-stop:
			return nil
		default:
		}
		n, err := s.dev.PollCQ(s.cs)
		if err != nil {
			return err
		}
		if n == 0 {
			if _, err := s.dev.WaitCQ(20 * time.Millisecond); err != nil { // stop is checked this often
				return err
			}
			continue
		}
		for _, c := range s.cs[:n] {
			if c.Status != verbs.StatusSuccess {
				return completionErr(c)
			}
			if c.Op != verbs.CQRecvImm || !isVerifyImm(c.Imm) {
				continue
			}
			q := s.byQPN[c.QPN]
			if q == nil {
				return fmt.Errorf("--verify: immediate on unknown QP %#06x", c.QPN)
			}
			if err := s.onCheckImm(q, size, c.Imm); err != nil {
				return err
			}
		}
	}
}

// checkLat checks the latency slot against ping (or pong) iteration iter.
func (s *session) checkLat(q *qpCtx, size int, iter uint64) {
	if len(q.v.want) < size {
		q.v.want = make([]byte, size)
	}
	checkSlots(&q.v.res, q, size, iter, 1, q.v.want[:size])
}

// checksWhile, when on, answers check requests in a goroutine until the
// returned function is called; that function returns the goroutine's error.
// Off, it does nothing.
func (s *session) checksWhile(on bool, size int) func() error {
	if !on {
		return func() error { return nil }
	}
	stop := make(chan struct{})
	done := make(chan error, 1)
	go func() { done <- s.answerChecks(stop, size) }()
	return func() error {
		close(stop)
		return <-done
	}
}
