package daemon_test

import (
	"sync"
	"sync/atomic"
	"testing"

	"github.com/softmrc/softmrc/internal/wire"
	"github.com/softmrc/softmrc/nic/daemon"
	"github.com/softmrc/softmrc/nic/daemon/daemontest"
	"github.com/softmrc/softmrc/nic/verbs"
	"github.com/softmrc/softmrc/nic/xsk"
)

// txWatch is a pipe port that shows every frame its daemon transmits to
// saw, on the daemon's loop, as the frame is queued.
type txWatch struct {
	*xsk.PipePort
	slot []byte
	saw  func(frame []byte)
}

func (w *txWatch) TxSlot() []byte {
	w.slot = w.PipePort.TxSlot()
	return w.slot
}

func (w *txWatch) TxCommit(n int) error {
	w.saw(w.slot[:n])
	return w.PipePort.TxCommit(n)
}

func (w *txWatch) Send(frames [][]byte) (int, error) {
	n, err := w.PipePort.Send(frames)
	for _, f := range frames[:n] {
		w.saw(f)
	}
	return n, err
}

func (w *txWatch) SendFunc(max int, build func(frame []byte) int) (int, error) {
	return w.PipePort.SendFunc(max, func(f []byte) int {
		n := build(f)
		if n > 0 {
			w.saw(f[:n])
		}
		return n
	})
}

// The run loop hands an application the completions a turn's frames made
// before it transmits that turn's frames: on a veth the transmit's kick
// runs the peer's receive (and every XDP switch hop) in the loop's own
// system call, 5-10 µs the woken application can spend waking up. Until
// 2026-12-06 the ACK of a Write-with-Immediate left first. Each message
// here is one packet that asks for an ACK; the receiving daemon's ACK of
// message i must find i completions delivered.
func TestCompletionsBeforeTransmit(t *testing.T) {
	type ack struct{ msg, cqes uint64 }
	var (
		d2   atomic.Pointer[daemon.Daemon]
		msg  atomic.Uint64
		mu   sync.Mutex
		acks []ack
	)
	saw := func(f []byte) {
		d := d2.Load()
		var p wire.Packet
		if d == nil || (wire.Decoder{}).Decode(f, &p) != nil || (p.Opcode != wire.OpAck && p.Opcode != wire.OpSACK) {
			return
		}
		mu.Lock()
		acks = append(acks, ack{msg.Load(), d.CQEsDelivered()})
		mu.Unlock()
	}
	pr := daemontest.StartPorts(t, 1, nil, func(host int, p *xsk.PipePort) xsk.Port {
		if host != 2 {
			return p
		}
		return &txWatch{PipePort: p, saw: saw}
	})
	d2.Store(pr.Daemons[1])
	a, b := open(t, pr.Sock[0], 4096), open(t, pr.Sock[1], 4096)
	connect(t, a, b)
	const msgs = 20
	for i := uint64(1); i <= msgs; i++ {
		msg.Store(i)
		if err := a.qp.PostSend(verbs.WriteImm(i, a.mr, 0, 2, b.mr.Addr, b.mr.RKey, uint32(i))); err != nil {
			t.Fatal(err)
		}
		if c := waitCQE(t, a.dev); c.Status != verbs.StatusSuccess || c.ID != i {
			t.Fatalf("message %d: sender completion %+v", i, c)
		}
		if c := waitCQE(t, b.dev); c.Op != verbs.CQRecvImm || c.Imm != uint32(i) {
			t.Fatalf("message %d: receiver completion %+v", i, c)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	n := 0
	for _, x := range acks {
		if x.msg == 0 {
			continue
		}
		n++
		if x.cqes < x.msg {
			t.Errorf("an ACK of message %d left with %d completions delivered: the completion waited for the transmit", x.msg, x.cqes)
		}
	}
	if n < msgs {
		t.Fatalf("saw %d ACKs for %d messages: the watch missed the receiver's transmit", n, msgs)
	}
}
