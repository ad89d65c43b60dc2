package verbs_test

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/softmrc/softmrc/internal/mrc"
	"github.com/softmrc/softmrc/nic/regions"
	"github.com/softmrc/softmrc/nic/service"
	"github.com/softmrc/softmrc/nic/verbs"
	"github.com/softmrc/softmrc/nic/vproto"
)

// loopNIC is a NIC that connects QPs of one device to each other and
// executes writes immediately, with the same checks the daemon makes. It
// tests the client library, the socket protocol and the service (memory
// sharing, ownership) without an engine; nic/daemon's tests run the real one.
type loopNIC struct {
	svc     *service.Service
	regions *regions.Table
	mu      sync.Mutex
	next    uint32
	qps     map[uint32]*loopQP
}

type loopQP struct {
	owner, peer uint32
}

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
	return vproto.QPInfo{QPN: qpn, PSN: 7, MTU: 2048, Window: 1024, MaxWImm: 64}, nil
}

func (n *loopNIC) ConnectQP(owner uint32, req vproto.ConnectQP) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	q := n.qps[req.QPN]
	if q == nil || q.owner != owner {
		return fmt.Errorf("QP %#x: %w", req.QPN, service.ErrNotOwner)
	}
	if n.qps[req.RemoteQPN] == nil {
		return fmt.Errorf("remote QP %#x unknown", req.RemoteQPN)
	}
	q.peer = req.RemoteQPN
	return nil
}

func (n *loopNIC) DestroyQP(owner uint32, qpn uint32) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	q := n.qps[qpn]
	if q == nil || q.owner != owner {
		return fmt.Errorf("QP %#x: %w", qpn, service.ErrNotOwner)
	}
	delete(n.qps, qpn)
	return nil
}

func (n *loopNIC) Post(owner uint32, wrs []vproto.WR) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, w := range wrs {
		st := vproto.StatusSuccess
		q := n.qps[w.QPN]
		var dst []byte
		switch {
		case q == nil || q.owner != owner:
			st = vproto.StatusLocQPOpErr
		case !w.Op.Supported():
			st = vproto.StatusLocQPOpErr
		default:
			// Each session is its protection domain, as in the daemon.
			r, ok := n.regions.Region(owner, w.LKey, mrc.LocalKey)
			var src []byte
			if ok {
				src, ok = r.Slice(w.LocalAddr, w.Len)
			}
			if !ok {
				st = vproto.StatusLocProtErr
				break
			}
			peer := n.qps[q.peer]
			if peer == nil {
				st = vproto.StatusLocQPOpErr
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
			if w.Op == vproto.OpWriteImm {
				n.svc.Deliver(peer.owner, []vproto.CQE{{QPN: q.peer, Op: vproto.CQRecvImm, Imm: w.Imm, SrcQP: w.QPN}})
			}
		}
		if st != vproto.StatusSuccess || w.Flags&vproto.FlagSignaled != 0 {
			n.svc.Deliver(owner, []vproto.CQE{{ID: w.ID, QPN: w.QPN, Status: st, Op: vproto.Opcode(w.Op), Len: w.Len}})
		}
	}
}

func (n *loopNIC) Ctl(_ service.Caller, req vproto.CtlRequest) (any, error) {
	if req.Cmd == "qps" {
		n.mu.Lock()
		defer n.mu.Unlock()
		return len(n.qps), nil
	}
	return nil, fmt.Errorf("unknown ctl command %q", req.Cmd)
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

func startLoop(t *testing.T) (string, *service.Service) {
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
	return path, svc
}

func pattern(b []byte, seed byte) {
	for i := range b {
		b[i] = byte(i*7) ^ seed
	}
}

// pair opens two devices (two applications) with one QP each, connected.
func pair(t *testing.T, path string) (a, b *verbs.Device, qa, qb *verbs.QP) {
	t.Helper()
	var err error
	if a, err = verbs.Open(path); err != nil {
		t.Fatal(err)
	}
	if b, err = verbs.Open(path); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close(); b.Close() })
	if qa, err = a.CreateQP(verbs.QPConfig{}); err != nil {
		t.Fatal(err)
	}
	if qb, err = b.CreateQP(verbs.QPConfig{}); err != nil {
		t.Fatal(err)
	}
	if err := qa.Connect(qb.ConnectInfo()); err != nil {
		t.Fatal(err)
	}
	if err := qb.Connect(qa.ConnectInfo()); err != nil {
		t.Fatal(err)
	}
	return a, b, qa, qb
}

func waitCQE(t *testing.T, d *verbs.Device) verbs.Completion {
	t.Helper()
	c, err := d.NextCompletion(5 * time.Second)
	if err != nil {
		t.Fatalf("waiting for a completion: %v", err)
	}
	return c
}

func TestWriteLandsInPeerMemory(t *testing.T) {
	path, _ := startLoop(t)
	a, b, qa, _ := pair(t, path)
	src, err := a.RegMR(10000, 0)
	if err != nil {
		t.Fatal(err)
	}
	dst, err := b.RegMR(20000, verbs.AccessLocalWrite|verbs.AccessRemoteWrite)
	if err != nil {
		t.Fatal(err)
	}
	pattern(src.Buf, 0x5a)
	if err := qa.PostSend(verbs.Write(1, src, 100, 5000, dst.Addr+333, dst.RKey),
		verbs.WriteImm(2, src, 0, 10, dst.Addr, dst.RKey, 0xfeed)); err != nil {
		t.Fatal(err)
	}
	for want := uint64(1); want <= 2; want++ {
		c := waitCQE(t, a)
		if c.Status != verbs.StatusSuccess || c.ID != want {
			t.Fatalf("completion %+v, want id %d success", c, want)
		}
	}
	if c := waitCQE(t, b); c.Op != verbs.CQRecvImm || c.Imm != 0xfeed {
		t.Fatalf("receiver completion %+v, want RecvImm 0xfeed", c)
	}
	if !bytes.Equal(dst.Buf[333:333+5000], src.Buf[100:5100]) || !bytes.Equal(dst.Buf[:10], src.Buf[:10]) {
		t.Fatal("written bytes differ from the source")
	}
	if dst.Buf[5333] != 0 || dst.Buf[332] != 0 {
		t.Fatal("bytes outside the written range changed")
	}
}

func TestBadRequests(t *testing.T) {
	path, _ := startLoop(t)
	a, b, qa, qb := pair(t, path)
	src, _ := a.RegMR(4096, 0)
	dst, _ := b.RegMR(4096, verbs.AccessLocalWrite|verbs.AccessRemoteWrite)
	ro, _ := b.RegMR(4096, verbs.AccessLocalWrite)
	pattern(src.Buf, 1)
	for _, tc := range []struct {
		name string
		wr   vproto.WR
		want verbs.Status
	}{
		{"unregistered rkey", vproto.WR{Op: vproto.OpWrite, Len: 16, RemoteAddr: dst.Addr, RKey: dst.RKey ^ 0xffff}, verbs.StatusRemAccessErr},
		{"VA out of bounds", vproto.WR{Op: vproto.OpWrite, Len: 16, RemoteAddr: dst.Addr + 4090, RKey: dst.RKey}, verbs.StatusRemAccessErr},
		{"VA below region", vproto.WR{Op: vproto.OpWrite, Len: 16, RemoteAddr: dst.Addr - 1, RKey: dst.RKey}, verbs.StatusRemAccessErr},
		{"region without remote-write access", vproto.WR{Op: vproto.OpWrite, Len: 16, RemoteAddr: ro.Addr, RKey: ro.RKey}, verbs.StatusRemAccessErr},
		{"unsupported opcode", vproto.WR{Op: vproto.OpRead, Len: 16, RemoteAddr: dst.Addr, RKey: dst.RKey}, verbs.StatusLocQPOpErr},
		{"another application's QP", vproto.WR{QPN: qb.QPN, Op: vproto.OpWrite, Len: 16, RemoteAddr: dst.Addr, RKey: dst.RKey}, verbs.StatusLocQPOpErr},
		{"local range outside lkey", vproto.WR{Op: vproto.OpWrite, Len: 5000, RemoteAddr: dst.Addr, RKey: dst.RKey}, verbs.StatusLocProtErr},
		{"another application's lkey", vproto.WR{Op: vproto.OpWrite, Len: 16, LKey: dst.LKey, LocalAddr: dst.Addr, RemoteAddr: dst.Addr, RKey: dst.RKey}, verbs.StatusLocProtErr},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := tc.wr
			w.ID = 99
			if w.QPN == 0 {
				w.QPN = qa.QPN
			}
			if w.LKey == 0 {
				w.LKey, w.LocalAddr = src.LKey, src.Addr
			}
			if err := a.PostRaw([]vproto.WR{w}); err != nil {
				t.Fatal(err)
			}
			c := waitCQE(t, a)
			if c.Status != tc.want || c.ID != 99 {
				t.Fatalf("completion %+v (%v), want status %v", c, c.Status, tc.want)
			}
			if !bytes.Equal(dst.Buf, make([]byte, len(dst.Buf))) || !bytes.Equal(ro.Buf, make([]byte, len(ro.Buf))) {
				t.Fatal("bad request wrote into the target region")
			}
		})
	}
	// The library refuses what it can see itself.
	if err := qa.PostSend(verbs.Write(1, src, 4000, 200, dst.Addr, dst.RKey)); err == nil || !strings.Contains(err.Error(), "outside") {
		t.Fatalf("PostSend out of the local region: err = %v", err)
	}
	if err := a.Ctl(vproto.CtlRequest{Cmd: "nope"}, nil); err == nil || !strings.Contains(err.Error(), "unknown ctl command") {
		t.Fatalf("ctl error = %v", err)
	}
}

func TestDeviceGoneIsReported(t *testing.T) {
	path, svc := startLoop(t)
	a, _, _, _ := pair(t, path)
	start := time.Now()
	go svc.Close("daemon stopping for the test")
	_, err := a.WaitCQ(5 * time.Second)
	if !errors.Is(err, verbs.ErrDeviceGone) {
		t.Fatalf("WaitCQ after the daemon closed: err = %v, want ErrDeviceGone", err)
	}
	if !strings.Contains(err.Error(), "daemon stopping for the test") {
		t.Errorf("error does not carry the daemon's reason: %v", err)
	}
	if _, err := a.RegMR(4096, 0); !errors.Is(err, verbs.ErrDeviceGone) {
		t.Fatalf("RegMR on a dead device: %v", err)
	}
	if time.Since(start) > 5*time.Second {
		t.Fatal("device death took longer than 5 s to notice")
	}
}

func TestNextCompletionTimesOutThenReportsDeath(t *testing.T) {
	path, svc := startLoop(t)
	a, _, _, _ := pair(t, path)
	if _, err := a.NextCompletion(20 * time.Millisecond); !errors.Is(err, verbs.ErrNoCompletion) {
		t.Fatalf("nothing posted: err = %v, want ErrNoCompletion", err)
	}
	go svc.Close("daemon stopping for the test")
	if _, err := a.NextCompletion(5 * time.Second); !errors.Is(err, verbs.ErrDeviceGone) {
		t.Fatalf("after the daemon closed: err = %v, want ErrDeviceGone", err)
	}
}

func TestOpenMissingSocket(t *testing.T) {
	_, err := verbs.Open(filepath.Join(t.TempDir(), "none.sock"))
	if err == nil || !strings.Contains(err.Error(), "is mrc-nicd running") {
		t.Fatalf("err = %v", err)
	}
}

// TestSocketFallback: a NIC without shared-memory rings (like an mrc-nicd
// built before them) refuses the ring request, and the library stays on
// the socket: Open works, Ring reports false, writes and completions flow.
func TestSocketFallback(t *testing.T) {
	path, _ := startLoop(t)
	a, b, qa, _ := pair(t, path)
	if a.Ring() || b.Ring() {
		t.Fatal("Ring() true against a NIC without rings")
	}
	src, _ := a.RegMR(4096, 0)
	dst, _ := b.RegMR(4096, verbs.AccessLocalWrite|verbs.AccessRemoteWrite)
	pattern(src.Buf, 3)
	if err := qa.PostSend(verbs.WriteImm(7, src, 0, 100, dst.Addr, dst.RKey, 9)); err != nil {
		t.Fatal(err)
	}
	if c := waitCQE(t, a); c.ID != 7 || c.Status != verbs.StatusSuccess {
		t.Fatalf("completion %+v", c)
	}
	if c := waitCQE(t, b); c.Op != verbs.CQRecvImm || c.Imm != 9 {
		t.Fatalf("receiver completion %+v", c)
	}
	if !bytes.Equal(dst.Buf[:100], src.Buf[:100]) {
		t.Fatal("bytes differ")
	}
	if s := a.RingStats(); s != (verbs.RingStats{}) {
		t.Fatalf("ring stats %+v without a ring", s)
	}
}
