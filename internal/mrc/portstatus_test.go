package mrc

import (
	"math/rand/v2"
	"testing"

	"github.com/softmrc/softmrc/internal/wire"
)

func isPortStatusReq(frame []byte) bool {
	var p wire.Packet
	return (wire.Decoder{}).Decode(frame, &p) == nil && p.DestQP == wire.QPEndpoint && p.Opcode == wire.OpEndpointReq
}

const allPlanes = uint32(1)<<testPlanes - 1

// TestStalePortStatusIgnored: after a short flap of side 0's port 1, the
// older "down" update arrives after the newer "up" one. The peer must keep
// the newer mask (the plane stays in use), not the stale one.
func TestStalePortStatusIgnored(t *testing.T) {
	h := newHarness(t, hopts{seed: 21})
	h.startTransfer(8<<20, 256<<10)
	h.run(50*Microsecond, nil)
	var held []byte
	h.Filter = func(from int, _ wire.Plane, f []byte) bool {
		if from == 0 && held == nil && isPortStatusReq(f) {
			held = append([]byte(nil), f...) // the "down" update, delayed
			return true
		}
		return false
	}
	h.eng[0].SetPortState(h.now, 1, false)
	h.run(h.now+5*Microsecond, nil)
	h.eng[0].SetPortState(h.now, 1, true)
	h.run(h.now+20*Microsecond, nil)
	if held == nil {
		t.Fatal("no port-status update was sent for the flap")
	}
	if got := h.snap(1).RemoteUp; got != allPlanes {
		t.Fatalf("before the stale update: peer mask %04b, want %04b", got, allPlanes)
	}
	h.eng[1].HandlePacket(h.now, 0, held) // the stale "down" lands late
	h.run(h.now+500*Microsecond, nil)
	if got := h.snap(1).RemoteUp; got != allPlanes {
		t.Fatalf("a stale 'down' update replaced the newer 'up': peer mask %04b, want %04b", got, allPlanes)
	}
	if c := h.eng[1].Counters(); c.PortStatusStale == 0 {
		t.Fatalf("stale update not counted: %+v", c)
	}
}

// TestPortStatusRetriedUntilAcked: the updates are lost for 5 ms (far more
// than 16 tries at the minimum interval); the sender keeps retrying with
// backoff and the peer learns the mask once the path heals.
func TestPortStatusRetriedUntilAcked(t *testing.T) {
	h := newHarness(t, hopts{seed: 22})
	lost := true
	h.Filter = func(from int, _ wire.Plane, f []byte) bool { return lost && from == 0 && isPortStatusReq(f) }
	h.eng[0].SetPortState(0, 2, false)
	h.run(5*Millisecond, nil)
	sentWhileLost := h.eng[0].Counters().PortStatusSent
	if sentWhileLost > 16 {
		t.Fatalf("%d updates in 5 ms: no backoff", sentWhileLost)
	}
	lost = false
	h.run(h.now+50*Millisecond, func() bool { return h.snap(1).RemoteUp == allPlanes&^(1<<2) })
	if got := h.snap(1).RemoteUp; got != allPlanes&^(1<<2) {
		t.Fatalf("peer mask %04b after the loss ended, want %04b (sender gave up after %d tries)", got, allPlanes&^(1<<2), sentWhileLost)
	}
	sent := h.eng[0].Counters().PortStatusSent
	h.run(h.now+50*Millisecond, nil)
	if again := h.eng[0].Counters().PortStatusSent; again != sent {
		t.Fatalf("%d more updates after the answer", again-sent)
	}
}

// TestPortDownBeforeConnect: a port that is down when a peer connects is
// reported to that peer, which then keeps its traffic off the plane.
func TestPortDownBeforeConnect(t *testing.T) {
	h := newHarness(t, hopts{seed: 23, noQPs: true})
	h.eng[0].SetPortState(0, 3, false)
	h.qp[0], h.qp[1] = h.connect(QPConfig{}, QPConfig{})
	h.run(2*Millisecond, func() bool { return h.snap(1).RemoteUp == allPlanes&^(1<<3) })
	if got := h.snap(1).RemoteUp; got != allPlanes&^(1<<3) {
		t.Fatalf("peer mask %04b, want %04b: the peer was never told port 3 is down", got, allPlanes&^(1<<3))
	}
}

// TestPortStatusAfterPeerRestart: side 0 has sent port-status updates (ids
// 1 and 2), then restarts: a new engine, whose ids begin again at 1, and a
// new connection (side 1's old QP is gone). Its first update must be
// applied, not ignored as older than the last one of the old engine.
func TestPortStatusAfterPeerRestart(t *testing.T) {
	h := newHarness(t, hopts{seed: 24})
	h.eng[0].SetPortState(0, 1, false)
	h.run(Millisecond, nil)
	h.eng[0].SetPortState(h.now, 1, true)
	h.run(h.now+Millisecond, nil)
	if got := h.snap(1).RemoteUp; got != allPlanes {
		t.Fatalf("before the restart: peer mask %04b", got)
	}
	// Side 0 restarts; side 1 tears its QP down and connects a new one.
	if err := h.eng[1].DestroyQP(h.qp[1]); err != nil {
		t.Fatal(err)
	}
	h.fl = nil
	h.mem[0] = NewMemTable()
	e, err := New(h.eng[0].Config(), h.mem[0], rand.New(rand.NewPCG(99, 0)))
	if err != nil {
		t.Fatal(err)
	}
	h.eng[0] = e
	h.qp[0], h.qp[1] = h.connect(QPConfig{}, QPConfig{})
	h.eng[0].SetPortState(h.now, 2, false)
	h.run(h.now+2*Millisecond, func() bool { return h.snap(1).RemoteUp == allPlanes&^(1<<2) })
	if got := h.snap(1).RemoteUp; got != allPlanes&^(1<<2) {
		t.Fatalf("peer mask %04b, want %04b: the restarted peer's first update was ignored as stale", got, allPlanes&^(1<<2))
	}
}
