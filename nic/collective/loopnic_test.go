package collective

import (
	"fmt"
	"log/slog"
	"net/netip"
	"path/filepath"
	"sync"
	"testing"

	"github.com/softmrc/softmrc/internal/mrc"
	"github.com/softmrc/softmrc/nic/regions"
	"github.com/softmrc/softmrc/nic/service"
	"github.com/softmrc/softmrc/nic/vproto"
)

// loopNIC is one device socket whose sessions (ranks) connect QPs to each
// other; it executes each write when it is posted, with the checks the
// daemon makes (as nic/verbs's tests do). It tests the collectives'
// schedules, credits and epochs with many ranks in one process, fast; the
// real engine runs in TestEngineTwoRanks and on the testbed (nic/e2e).
type loopNIC struct {
	svc     *service.Service
	regions *regions.Table
	mu      sync.Mutex
	next    uint32
	qps     map[uint32]*loopQP
}

type loopQP struct{ owner, peer uint32 }

func (n *loopNIC) Info() vproto.DeviceInfo {
	return vproto.DeviceInfo{Host: "loop", Mode: "ecmp", MTU: 2048, EVs: 1, MaxMsg: 1 << 31, MaxBatch: vproto.MaxBatch,
		Ports: []vproto.PortInfo{{Name: "p0", Plane: 0, Address: netip.MustParseAddr("fd00::1"), Up: true}}}
}

func (n *loopNIC) RegMR(owner uint32, fd int, req vproto.RegMR) (vproto.MRInfo, error) {
	if err := req.Access.Check(); err != nil {
		return vproto.MRInfo{}, err
	}
	acc := mrc.AccessLocalRead
	if req.Access&vproto.AccessRemoteWrite != 0 {
		acc |= mrc.AccessRemoteWrite
	}
	r, err := n.regions.Add(owner, fd, req.Addr, req.Len, acc)
	if err != nil {
		return vproto.MRInfo{}, err
	}
	return vproto.MRInfo{LKey: r.LKey, RKey: r.RKey}, nil
}

func (n *loopNIC) DeregMR(owner uint32, req vproto.DeregMR) error {
	return n.regions.Remove(owner, req.LKey)
}

func (n *loopNIC) CreateQP(owner uint32, req vproto.CreateQP) (vproto.QPInfo, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.next++
	qpn := 0x100 + n.next
	n.qps[qpn] = &loopQP{owner: owner}
	return vproto.QPInfo{QPN: qpn, PSN: 7, MTU: 2048, Window: 1024, MaxWImm: 64, Transport: req.Transport}, nil
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

// Post executes each write at once. A zero-length write names no memory
// and checks no key (IBTA), as in the daemon.
func (n *loopNIC) Post(owner uint32, wrs []vproto.WR) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, w := range wrs {
		st := vproto.StatusSuccess
		q := n.qps[w.QPN]
		var peer *loopQP
		if q != nil {
			peer = n.qps[q.peer]
		}
		switch {
		case q == nil || q.owner != owner || peer == nil:
			st = vproto.StatusLocQPOpErr
		case w.Len > 0:
			r, ok := n.regions.Region(owner, w.LKey, mrc.LocalKey)
			var src, dst []byte
			if ok {
				src, ok = r.Slice(w.LocalAddr, w.Len)
			}
			if !ok {
				st = vproto.StatusLocProtErr
				break
			}
			r, ok = n.regions.Region(peer.owner, w.RKey, mrc.RemoteKey)
			ok = ok && r.Access&mrc.AccessRemoteWrite != 0
			if ok {
				dst, ok = r.Slice(w.RemoteAddr, w.Len)
			}
			if !ok {
				st = vproto.StatusRemAccessErr
				break
			}
			copy(dst, src)
		}
		if st == vproto.StatusSuccess && w.Op == vproto.OpWriteImm {
			n.svc.Deliver(peer.owner, []vproto.CQE{{QPN: q.peer, Op: vproto.CQRecvImm, Imm: w.Imm, SrcQP: w.QPN, Len: w.Len}})
		}
		if st != vproto.StatusSuccess || w.Flags&vproto.FlagSignaled != 0 {
			n.svc.Deliver(owner, []vproto.CQE{{ID: w.ID, QPN: w.QPN, Status: st, Op: vproto.Opcode(w.Op), Len: w.Len}})
		}
	}
}

func (n *loopNIC) Ctl(_ service.Caller, req vproto.CtlRequest) (any, error) {
	return nil, fmt.Errorf("no ctl")
}

func (n *loopNIC) CloseOwner(owner uint32) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for k, q := range n.qps {
		if q.owner == owner {
			delete(n.qps, k)
		}
	}
	n.regions.Release(owner)
}

func startLoop(t *testing.T) string {
	t.Helper()
	nic := &loopNIC{regions: regions.New(), qps: map[uint32]*loopQP{}}
	svc := service.New(nic, slog.New(slog.DiscardHandler))
	nic.svc = svc
	path := filepath.Join(t.TempDir(), "dev.sock")
	if err := svc.Listen(path); err != nil {
		t.Fatal(err)
	}
	go svc.Serve()
	t.Cleanup(func() { svc.Close("test over") })
	return path
}
