package daemon_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/softmrc/softmrc/nic/config"
	"github.com/softmrc/softmrc/nic/daemon/daemontest"
	"github.com/softmrc/softmrc/nic/verbs"
	"github.com/softmrc/softmrc/nic/vproto"
)

func ctl(t *testing.T, sock string, req vproto.CtlRequest, out any) error {
	t.Helper()
	d, err := verbs.Open(sock)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	return d.Ctl(req, out)
}

func portTx(t *testing.T, sock string) []uint64 {
	t.Helper()
	var ps []vproto.PortStatus
	if err := ctl(t, sock, vproto.CtlRequest{Cmd: vproto.CtlPorts}, &ps); err != nil {
		t.Fatal(err)
	}
	out := make([]uint64, len(ps))
	for _, p := range ps {
		out[p.Plane] = p.Stats["TxFrames"]
	}
	return out
}

// TestDaemonDenylist: host 1 loads "plane 1" from its denylist file at
// start, host 2 gets it through the control socket before any QP exists;
// a QP created afterwards moves data with its ports on plane 1 sending
// nothing at all (the ports' own frame counters, data and control alike);
// errors name what exists; allowing the plane again puts it back in use.
func TestDaemonDenylist(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "deny")
	if err := os.WriteFile(file, []byte("# host 1's NIC-T0 link of plane 1 is lossy\nplane 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	p := daemontest.StartWith(t, 3, func(host int, c *config.Config) {
		if host == 1 {
			c.Denylist = file
		}
	})
	s1, s2 := p.Sock[0], p.Sock[1]
	var res vproto.CtlResult
	if err := ctl(t, s2, vproto.CtlRequest{Cmd: vproto.CtlDeny, Scope: vproto.ScopePlane, Plane: 1}, &res); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{s1, s2} {
		var rows []vproto.DenyRow
		if err := ctl(t, s, vproto.CtlRequest{Cmd: vproto.CtlDenylist}, &rows); err != nil {
			t.Fatal(err)
		}
		if len(rows) != 1 || rows[0].Entry != "plane 1" || rows[0].Rules != 1 {
			t.Fatalf("denylist of %s: %+v, want [plane 1]", s, rows)
		}
	}
	before := [2][]uint64{portTx(t, s1), portTx(t, s2)}

	const size = 4 << 20
	a, b := open(t, s1, size), open(t, s2, size)
	connect(t, a, b)
	transfer := func(seed uint32) {
		t.Helper()
		fill(a.mr.Buf, seed)
		for i := 0; i < 4; i++ {
			off := uint64(i) * size / 4
			if err := a.qp.PostSend(verbs.Write(uint64(i), a.mr, off, size/4, b.mr.Addr+off, b.mr.RKey)); err != nil {
				t.Fatal(err)
			}
		}
		for i := 0; i < 4; i++ {
			if c := waitCQE(t, a.dev); c.Status != verbs.StatusSuccess {
				t.Fatalf("completion %+v", c)
			}
		}
		if !bytes.Equal(a.mr.Buf, b.mr.Buf) {
			t.Fatal("receiver's bytes differ from the sender's")
		}
	}
	transfer(1)
	after := [2][]uint64{portTx(t, s1), portTx(t, s2)}
	for h := 0; h < 2; h++ {
		if d := after[h][1] - before[h][1]; d != 0 {
			t.Errorf("host %d's port on denied plane 1 sent %d frames", h+1, d)
		}
		if h == 0 && (after[h][0] == before[h][0] || after[h][2] == before[h][2]) {
			t.Errorf("the sender did not spray over planes 0 and 2: %v -> %v", before[h], after[h])
		}
		if h == 1 && after[h][0]+after[h][2] == before[h][0]+before[h][2] {
			t.Errorf("the receiver sent nothing: %v -> %v", before[h], after[h])
		}
	}
	var cs vproto.Counters
	if err := ctl(t, s2, vproto.CtlRequest{Cmd: vproto.CtlCounters}, &cs); err != nil {
		t.Fatal(err)
	}
	if c := cs.Engine; c["TxCtrlByPlane.plane1"] != 0 || c["TxCtrlByPlane.plane0"]+c["TxCtrlByPlane.plane2"] == 0 {
		t.Errorf("receiver's control packets per plane %d %d %d: want none on plane 1, some on the others",
			c["TxCtrlByPlane.plane0"], c["TxCtrlByPlane.plane1"], c["TxCtrlByPlane.plane2"])
	}

	errCases := []struct {
		sock string
		req  vproto.CtlRequest
		want string
	}{
		{s1, vproto.CtlRequest{Cmd: vproto.CtlDeny, Scope: vproto.ScopePlane, Plane: 7}, "planes 0..2"},
		{s1, vproto.CtlRequest{Cmd: vproto.CtlDeny, Scope: vproto.ScopeLink, Link: "h1--p0-t0-0"}, "srv6"},
		{s1, vproto.CtlRequest{Cmd: vproto.CtlDeny, Scope: vproto.ScopeEV, EV: 0x70000001}, "planes 0..2"},
		{s1, vproto.CtlRequest{Cmd: vproto.CtlAllow, Scope: vproto.ScopePlane, Plane: 0}, "holds: plane 1"},
		{s1, vproto.CtlRequest{Cmd: vproto.CtlDeny, Scope: vproto.ScopeEV, EV: 0x00012345, QPN: a.qp.QPN}, "mrcctl evs"},
		{s1, vproto.CtlRequest{Cmd: vproto.CtlDeny, Scope: "hop"}, "want ev, path, link or plane"},
	}
	for _, c := range errCases {
		err := ctl(t, c.sock, c.req, &res)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: error %v, want one mentioning %q", c.req, err, c.want)
		}
	}

	for _, s := range []string{s1, s2} {
		if err := ctl(t, s, vproto.CtlRequest{Cmd: vproto.CtlAllow, Scope: vproto.ScopePlane, Plane: 1}, &res); err != nil {
			t.Fatal(err)
		}
	}
	mid := [2][]uint64{portTx(t, s1), portTx(t, s2)}
	transfer(2)
	end := [2][]uint64{portTx(t, s1), portTx(t, s2)}
	// The sender sprays its data over every plane again (the receiver's
	// SACKs may stay on the reverse EVs it has validated).
	if end[0][1] == mid[0][1] {
		t.Errorf("host 1: plane 1 still unused after allow (port frames %v -> %v)", mid[0], end[0])
	}
}

// TestDenyNeedsRoot: the device socket is open to everyone, deny and
// allow are not. The check runs in a child process as nobody (the kernel's
// SO_PEERCRED is what the daemon trusts).
func TestDenyNeedsRoot(t *testing.T) {
	if sock := os.Getenv("MRC_TEST_DENY_SOCK"); sock != "" {
		var res vproto.CtlResult
		err := ctl(t, sock, vproto.CtlRequest{Cmd: vproto.CtlDeny, Scope: vproto.ScopePlane, Plane: 0}, &res)
		if err == nil || !strings.Contains(err.Error(), "only root") {
			t.Fatalf("deny as uid %d: %v, want a needs-root error", os.Getuid(), err)
		}
		var rows []vproto.DenyRow
		if err := ctl(t, sock, vproto.CtlRequest{Cmd: vproto.CtlDenylist}, &rows); err != nil {
			t.Fatalf("deny list as uid %d: %v (reading is for everyone)", os.Getuid(), err)
		}
		return
	}
	if os.Getuid() != 0 {
		t.Skip("needs root to start a child as another user")
	}
	p := daemontest.Start(t, 1)
	// The child must reach the socket through its folder.
	if err := os.Chmod(filepath.Dir(p.Sock[0]), 0o755); err != nil {
		t.Fatal(err)
	}
	// The test binary's own folder is private to root: run a copy.
	bin, err := os.MkdirTemp("", "mrcdeny")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(bin)
	self, err := os.ReadFile(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	exe := filepath.Join(bin, "daemon.test")
	if err := os.WriteFile(exe, self, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run=^TestDenyNeedsRoot$", "-test.count=1")
	cmd.Env = append(os.Environ(), "MRC_TEST_DENY_SOCK="+p.Sock[0])
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child as nobody: %v\n%s", err, out)
	}
	var res vproto.CtlResult
	if err := ctl(t, p.Sock[0], vproto.CtlRequest{Cmd: vproto.CtlDeny, Scope: vproto.ScopePlane, Plane: 0}, &res); err != nil {
		t.Fatalf("deny as root: %v", err)
	}
}
