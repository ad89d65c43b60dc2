package daemon_test

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/softmrc/softmrc/internal/wire"
	"github.com/softmrc/softmrc/nic/config"
	"github.com/softmrc/softmrc/nic/daemon/daemontest"
	"github.com/softmrc/softmrc/nic/verbs"
	"github.com/softmrc/softmrc/nic/vproto"
)

// A peer's write into a region registered without remote-write access is
// refused by the target NIC (a NACK), completes at the writer with a remote
// access error and leaves the region as it was; the same write into a
// region that grants remote write lands.
func TestRemoteWriteNeedsAccess(t *testing.T) {
	s1, s2, _ := twoNICs(t, 1)
	for _, tc := range []struct {
		name   string
		access verbs.Access
		want   verbs.Status
	}{
		{"remote write granted", verbs.AccessLocalWrite | verbs.AccessRemoteWrite, verbs.StatusSuccess},
		{"local write only", verbs.AccessLocalWrite, verbs.StatusRemAccessErr},
		{"no access flags", 0, verbs.StatusRemAccessErr},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, b := open(t, s1, 8192), open(t, s2, 8192)
			connect(t, a, b)
			dst, err := b.dev.RegMR(8192, tc.access)
			if err != nil {
				t.Fatal(err)
			}
			fill(a.mr.Buf, 21)
			fill(dst.Buf, 22)
			before := append([]byte(nil), dst.Buf...)
			if err := a.qp.PostSend(verbs.Write(7, a.mr, 0, 5000, dst.Addr+100, dst.RKey)); err != nil {
				t.Fatal(err)
			}
			c, qpErr := completionFor(t, a.dev, 7)
			if c.Status != tc.want {
				t.Fatalf("completion %+v (%v), want %v", c, c.Status, tc.want)
			}
			if tc.want == verbs.StatusSuccess {
				if !bytes.Equal(dst.Buf[100:5100], a.mr.Buf[:5000]) {
					t.Fatal("granted write: bytes differ")
				}
				return
			}
			if !bytes.Equal(dst.Buf, before) {
				t.Fatal("a refused write changed the region")
			}
			if !qpErr {
				// The QP-error event may trail the WR's completion.
				if c := waitCQE(t, a.dev); c.Op != vproto.CQQPError {
					t.Fatalf("after the refused write: %+v, want the QP-error event", c)
				}
			}
		})
	}
	// Verbs' rule: remote write needs local write.
	d, err := verbs.Open(s2)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if _, err := d.RegMR(4096, verbs.AccessRemoteWrite); err == nil || !strings.Contains(err.Error(), "needs local write") {
		t.Fatalf("RegMR(remote write only): %v, want an error saying it needs local write", err)
	}
}

// The peers' MTU, window and WriteImm cap travel out of band (ConnectInfo)
// and the engine checks them: NICs configured with different mtu: values
// refuse to connect, saying so, instead of erroring the QP later.
func TestConnectExchangesTransportParams(t *testing.T) {
	p := daemontest.StartWith(t, 1, func(host int, c *config.Config) {
		if host == 2 {
			c.MTU = 4096
		}
	})
	a, b := open(t, p.Sock[0], 4096), open(t, p.Sock[1], 4096)
	if a.qp.MTU != 2048 || b.qp.MTU != 4096 || a.qp.Window == 0 || a.qp.MaxWImm == 0 {
		t.Fatalf("CreateQP replies: a %+v, b %+v; want MTUs 2048 and 4096 and a window", *a.qp, *b.qp)
	}
	err := a.qp.Connect(b.qp.ConnectInfo())
	if err == nil || !strings.Contains(err.Error(), "MTU mismatch: local 2048, remote 4096") {
		t.Fatalf("connect across different MTUs: %v, want an MTU mismatch error", err)
	}
	// Leaving the parameters out is refused with what to pass.
	r := b.qp.ConnectInfo()
	r.RemoteMTU, r.RemoteWindow = 0, 0
	if err := a.qp.Connect(r); err == nil || !strings.Contains(err.Error(), "remote_mtu 0") {
		t.Fatalf("connect without the peer's parameters: %v", err)
	}
}

// An explicit EV set given to Connect is the QP's active set, whatever its
// size, including exactly the device's configured count (which used to be
// silently replaced by a generated set), and data goes only over it.
func TestConnectPinsExplicitEVs(t *testing.T) {
	s1, s2, _ := twoNICs(t, 2)
	const deviceEVs = 8 // daemontest's evs:
	for _, n := range []int{deviceEVs, 3} {
		t.Run(fmt.Sprintf("%d EVs", n), func(t *testing.T) {
			a, b := open(t, s1, 1<<16), open(t, s2, 1<<16)
			var pinned []uint32
			want := map[string]bool{}
			for i := 0; i < n; i++ {
				ev := wire.MakeEV(wire.Plane(i%2), uint8(i), 0x1234+uint32(i)*977)
				pinned = append(pinned, uint32(ev))
				want[ev.String()] = true
			}
			r := b.qp.ConnectInfo()
			r.EVs = pinned
			if err := a.qp.Connect(r); err != nil {
				t.Fatal(err)
			}
			if err := b.qp.Connect(a.qp.ConnectInfo()); err != nil {
				t.Fatal(err)
			}
			fill(a.mr.Buf, 31)
			for i := 0; i < 8; i++ {
				off := uint64(i) * 8192
				if err := a.qp.PostSend(verbs.Write(uint64(i), a.mr, off, 8192, b.mr.Addr+off, b.mr.RKey)); err != nil {
					t.Fatal(err)
				}
			}
			for i := 0; i < 8; i++ {
				if c := waitCQE(t, a.dev); c.Status != verbs.StatusSuccess {
					t.Fatalf("completion %+v", c)
				}
			}
			if !bytes.Equal(a.mr.Buf, b.mr.Buf) {
				t.Fatal("bytes differ")
			}
			var rows []vproto.EVRow
			if err := a.dev.Ctl(vproto.CtlRequest{Cmd: vproto.CtlEVs, QPN: a.qp.QPN}, &rows); err != nil {
				t.Fatal(err)
			}
			active, sent := 0, uint64(0)
			for _, row := range rows {
				if row.Active != (row.Slots > 0) {
					t.Errorf("EV %s: active %v with %d rotation slots", row.EV, row.Active, row.Slots)
				}
				if !row.Active {
					continue
				}
				active++
				if !want[row.EV] {
					t.Errorf("active EV %s is not one of the pinned ones", row.EV)
				}
				sent += row.Sent
			}
			if active != n || sent < 32 {
				t.Fatalf("%d active EVs carried %d packets; want the %d pinned EVs to carry all 32", active, sent, n)
			}
		})
	}
	// An EV on a plane the NIC lacks is refused, not ignored.
	a, b := open(t, s1, 4096), open(t, s2, 4096)
	r := b.qp.ConnectInfo()
	r.EVs = []uint32{uint32(wire.MakeEV(5, 0, 1))}
	if err := a.qp.Connect(r); err == nil || !strings.Contains(err.Error(), "plane 5") {
		t.Fatalf("connect with an EV on a missing plane: %v", err)
	}
}
