package verbs

import (
	"strings"
	"testing"
)

// The sender's and receiver's bookkeeping, without a device: completions
// are built by hand.
func TestCreditBookkeeping(t *testing.T) {
	qp := &QP{QPN: 0x101}
	imm := func(c uint32) Completion { return Completion{Op: CQRecvImm, QPN: qp.QPN, Imm: c} }
	credit := func(first, n int) Completion { return imm(creditFlag | uint32(first)<<slotShift | uint32(n)) }
	data := func(slot int, tag uint32) Completion {
		c := imm(uint32(slot)<<slotShift | tag)
		c.Len = 8
		return c
	}

	t.Run("sender", func(t *testing.T) {
		for _, c := range []struct {
			name    string
			out     int // messages out before the completion (next = out mod 4)
			c       Completion
			taken   bool
			wantErr string
			credits int
		}{
			{"credit for the oldest slot", 2, credit(0, 1), true, "", 3},
			{"credit for two", 2, credit(0, 2), true, "", 4},
			{"credit after wrap", 5, credit(1, 4), true, "", 4},
			{"more than out", 1, credit(0, 2), true, "credit for 2 slots", 3},
			{"wrong first slot", 2, credit(1, 1), true, "from slot 1", 2},
			{"zero credits", 2, credit(0, 0), true, "credit for 0", 2},
			{"data immediate is not a credit", 2, data(0, 7), false, "", 2},
			{"other QP", 2, Completion{Op: CQRecvImm, QPN: 0x102, Imm: creditFlag | 1}, false, "", 2},
			{"send completion", 2, Completion{Op: CQWrite, QPN: qp.QPN, Imm: creditFlag | 1}, false, "", 2},
		} {
			t.Run(c.name, func(t *testing.T) {
				s, err := NewCreditSender(qp, Slots{Count: 4, Size: 8})
				if err != nil {
					t.Fatal(err)
				}
				// Pretend out messages were posted and earlier ones credited.
				s.next = c.out % 4
				s.credits = 4 - min(c.out, 4)
				if c.out > 4 {
					s.credits = 0
				}
				taken, err := s.OnCompletion(c.c)
				if taken != c.taken {
					t.Errorf("taken %v, want %v", taken, c.taken)
				}
				if (err != nil) != (c.wantErr != "") || (err != nil && !strings.Contains(err.Error(), c.wantErr)) {
					t.Errorf("error %v, want %q", err, c.wantErr)
				}
				if s.Credits() != c.credits {
					t.Errorf("credits %d, want %d", s.Credits(), c.credits)
				}
			})
		}
	})

	t.Run("no credit", func(t *testing.T) {
		s, _ := NewCreditSender(qp, Slots{Count: 1, Size: 8})
		s.credits = 0
		if err := s.Post(nil, 0, 0, 1); err != ErrNoCredit {
			t.Fatalf("Post without credit: %v, want ErrNoCredit", err)
		}
	})

	t.Run("receiver", func(t *testing.T) {
		mr := &MR{Buf: make([]byte, 32), Addr: 0x1000, RKey: 9}
		r, err := NewCreditReceiver(qp, mr, 0, 4, 8, CreditTarget{})
		if err != nil {
			t.Fatal(err)
		}
		if s := r.Slots(); s != (Slots{Addr: 0x1000, RKey: 9, Count: 4, Size: 8}) {
			t.Fatalf("slots %+v", s)
		}
		copy(mr.Buf[8:], "slot one")
		for i, c := range []struct {
			c       Completion
			ok      bool
			slot    int
			wantErr string
		}{
			{data(0, 5), true, 0, ""},
			{credit(0, 1), false, 0, ""}, // a credit is the sender side's
			{data(2, 5), true, 0, "slot 2, expected slot 1"},
			{data(1, 6), true, 1, ""},
			{Completion{Op: CQRecvImm, QPN: qp.QPN, Imm: 2 << slotShift, Len: 9}, true, 0, "9-byte message in a 8-byte slot"},
			{data(2, 7), true, 2, ""},
			{data(3, 8), true, 3, ""},
			{data(0, 9), true, 0, "4 held"}, // the sender wrote without a credit
		} {
			m, ok, err := r.OnCompletion(c.c)
			if ok != c.ok || (err != nil) != (c.wantErr != "") || (err != nil && !strings.Contains(err.Error(), c.wantErr)) {
				t.Fatalf("step %d: ok %v err %v, want ok %v err %q", i, ok, err, c.ok, c.wantErr)
			}
			if ok && err == nil && (m.Slot != c.slot || m.Tag != c.c.Imm&tagMask || len(m.Data) != 8) {
				t.Fatalf("step %d: message %+v", i, m)
			}
			if i == 3 && string(m.Data) != "slot one" {
				t.Fatalf("slot 1 data %q", m.Data)
			}
		}
		if err := r.Release(5); err == nil {
			t.Fatal("released more than held")
		}
		if _, err := NewCreditReceiver(qp, mr, 8, 4, 8, CreditTarget{}); err == nil {
			t.Fatal("FIFO past the region accepted")
		}
		if _, err := NewCreditSender(qp, Slots{Count: MaxCreditSlots + 1, Size: 8}); err == nil {
			t.Fatal("too many slots accepted")
		}
	})
}
