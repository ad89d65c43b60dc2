package collective

import (
	"fmt"
	"log/slog"
	"net/netip"
	"path/filepath"
	"sync"
	"testing"

	"github.com/softmrc/softmrc/nic/service"
	"github.com/softmrc/softmrc/nic/verbs/vproto"
)

// loopNIC is one device socket whose sessions (ranks) connect QPs to each
// other; it executes each write when it is posted, with the checks the
// daemon makes (as nic/verbs's tests do). It tests the collectives'
// schedules, credits and epochs with many ranks in one process, fast; the
// real engine runs in TestEngineTwoRanks and on the testbed (nic/e2e).
type loopNIC struct {
	svc     *service.Service
	regions *service.Regions
	mu      sync.Mutex
	next    uint32
	qps     map[uint32]*loopQP
}

type loopQP struct{ owner, peer uint32 }

func (n *loopNIC) Info() vproto.DeviceInfo {
	return vproto.DeviceInfo{Host: "loop", Mode: "ecmp", MTU: 2048, EVs: 1, MaxMsg: 1 << 31, MaxBatch: vproto.MaxBatch,
		Ports: []vproto.PortInfo{{Name: "p0", Plane: 0, Address: netip.MustParseAddr("fd00::1"), Up: true}}}
}

func (n *loopNIC) CreateQP(owner uint32, req vproto.CreateQP) (vproto.QPInfo, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.next++
	qpn := 0x100 + n.next
	n.qps[qpn] = &loopQP{owner: owner}
	return vproto.QPInfo{QPN: qpn, PSN: 7}, nil
}

func (n *loopNIC) ConnectQP(owner uint32, req vproto.ConnectQP) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	q := n.qps[req.QPN]
	if q == nil || q.owner != owner || n.qps[req.RemoteQPN] == nil {
		return fmt.Errorf("connect QP %#x to %#x: unknown or not yours", req.QPN, req.RemoteQPN)
	}
	q.peer = req.RemoteQPN
	return nil
}

func (n *loopNIC) DestroyQP(owner uint32, qpn uint32) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	delete(n.qps, qpn)
	return nil
}

func (n *loopNIC) Post(owner uint32, wrs []vproto.WR) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, w := range wrs {
		st := vproto.StatusSuccess
		q := n.qps[w.QPN]
		switch {
		case q == nil || q.owner != owner:
			st = vproto.StatusLocQPOpErr
		case n.qps[q.peer] == nil:
			st = vproto.StatusLocQPOpErr
		default:
			peer := n.qps[q.peer]
			src, err := n.regions.Local(owner, w.LKey, w.LocalAddr, w.Len)
			if w.Len == 0 {
				src, err = nil, nil
			}
			if err != nil {
				st = vproto.StatusLocProtErr
				break
			}
			dst, err := n.regions.Remote(peer.owner, w.RKey, w.RemoteAddr, w.Len)
			if err != nil {
				st = vproto.StatusRemAccessErr
				break
			}
			copy(dst, src)
			if w.Op == vproto.OpWriteImm {
				n.svc.Deliver(peer.owner, []vproto.CQE{{QPN: q.peer, Op: vproto.CQRecvImm, Imm: w.Imm, SrcQP: w.QPN}})
			}
		}
		if st != vproto.StatusSuccess || w.Flags&vproto.FlagSignaled != 0 {
			n.svc.Deliver(owner, []vproto.CQE{{ID: w.ID, QPN: w.QPN, Status: st, Op: vproto.Opcode(w.Op), Len: w.Len}})
		}
	}
}

func (n *loopNIC) Ctl(req vproto.CtlRequest) (any, error) { return nil, fmt.Errorf("no ctl") }

func (n *loopNIC) CloseOwner(owner uint32) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for k, q := range n.qps {
		if q.owner == owner {
			delete(n.qps, k)
		}
	}
}

func startLoop(t *testing.T) string {
	t.Helper()
	regions := service.NewRegions()
	nic := &loopNIC{regions: regions, qps: map[uint32]*loopQP{}}
	svc := service.New(nic, regions, slog.New(slog.DiscardHandler))
	nic.svc = svc
	path := filepath.Join(t.TempDir(), "dev.sock")
	if err := svc.Listen(path); err != nil {
		t.Fatal(err)
	}
	go svc.Serve()
	t.Cleanup(func() { svc.Close("test over") })
	return path
}
