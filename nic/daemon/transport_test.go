package daemon_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/softmrc/softmrc/nic/verbs"
	"github.com/softmrc/softmrc/nic/vproto"
)

// TestTransportPerQP: the verbs transport reaches the engine's QP (mrcctl
// qps reports the engine's own view) and data moves over each.
func TestTransportPerQP(t *testing.T) {
	s1, s2, _ := twoNICs(t, 2)
	for _, tc := range []struct {
		tr   verbs.Transport
		want string
	}{{verbs.TransportMRC, "mrc"}, {verbs.TransportRoCE, "roce"}} {
		t.Run(tc.want, func(t *testing.T) {
			const size = 1 << 18
			a, b := openTransport(t, s1, size, tc.tr), openTransport(t, s2, size, tc.tr)
			if a.qp.Transport != tc.tr || b.qp.Transport != tc.tr {
				t.Fatalf("CreateQP answered transport %v/%v, want %v", a.qp.Transport, b.qp.Transport, tc.tr)
			}
			var rows []vproto.QPRow
			if err := a.dev.Ctl(vproto.CtlRequest{Cmd: "qps"}, &rows); err != nil {
				t.Fatal(err)
			}
			found := false
			for _, r := range rows {
				if r.QPN == a.qp.QPN {
					found = true
					if r.Transport != tc.want {
						t.Fatalf("engine QP %#x has transport %q, want %q", r.QPN, r.Transport, tc.want)
					}
				}
			}
			if !found {
				t.Fatalf("QP %#x not in mrcctl qps", a.qp.QPN)
			}
			connect(t, a, b)
			fill(a.mr.Buf, 5)
			if err := a.qp.PostSend(verbs.WriteImm(1, a.mr, 0, size, b.mr.Addr, b.mr.RKey, 42)); err != nil {
				t.Fatal(err)
			}
			if c := waitCQE(t, a.dev); c.Status != verbs.StatusSuccess || c.ID != 1 {
				t.Fatalf("sender completion %+v: %v", c, c.Status)
			}
			if c := waitCQE(t, b.dev); c.Op != verbs.CQRecvImm || c.Imm != 42 {
				t.Fatalf("receiver completion %+v", c)
			}
			if !bytes.Equal(a.mr.Buf, b.mr.Buf) {
				t.Fatal("receiver memory differs from the sender's")
			}
		})
	}
}

func openTransport(t *testing.T, sock string, size int, tr verbs.Transport) *side {
	t.Helper()
	d, err := verbs.Open(sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	qp, err := d.CreateQP(verbs.QPConfig{Transport: tr})
	if err != nil {
		t.Fatal(err)
	}
	mr, err := d.RegMR(size, verbs.AccessLocalWrite|verbs.AccessRemoteWrite)
	if err != nil {
		t.Fatal(err)
	}
	return &side{dev: d, qp: qp, mr: mr}
}

func TestParseTransport(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want verbs.Transport
		ok   bool
	}{{"mrc", verbs.TransportMRC, true}, {"roce", verbs.TransportRoCE, true}, {"RoCE", verbs.TransportRoCE, true}, {"iwarp", 0, false}, {"", 0, false}} {
		got, err := verbs.ParseTransport(tc.in)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("ParseTransport(%q) = %v, %v; want %v ok=%v", tc.in, got, err, tc.want, tc.ok)
		}
		if tc.ok && got.String() != map[verbs.Transport]string{verbs.TransportMRC: "mrc", verbs.TransportRoCE: "roce"}[got] {
			t.Errorf("%v.String() = %q", got, got.String())
		}
	}
}

// TestConnectTransportMismatch: ConnectInfo carries the transport, so a QP
// connected to a peer QP of the other transport fails with a clear error;
// a Remote without it (hand-built from an older exchange) is not checked.
func TestConnectTransportMismatch(t *testing.T) {
	s1, s2, _ := twoNICs(t, 2)
	a := openTransport(t, s1, 4096, verbs.TransportRoCE)
	b := openTransport(t, s2, 4096, verbs.TransportMRC)
	err := a.qp.Connect(b.qp.ConnectInfo())
	if err == nil || !strings.Contains(err.Error(), "transport mismatch: local roce, remote mrc") {
		t.Fatalf("RoCE QP connected to an MRC QP's ConnectInfo: err %v, want a transport mismatch", err)
	}
	c := openTransport(t, s2, 4096, verbs.TransportRoCE)
	r := c.qp.ConnectInfo()
	r.RemoteTransport = nil
	if err := a.qp.Connect(r); err != nil {
		t.Fatalf("connect without remote_transport: %v", err)
	}
}
