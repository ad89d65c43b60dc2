package daemon_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/softmrc/softmrc/internal/telemetry"
	"github.com/softmrc/softmrc/nic/verbs"
	"github.com/softmrc/softmrc/nic/vproto"
)

// The other tenant: when this test binary runs with tenantEnv set, it is
// an unprivileged application (started as user nobody by
// TestTenantCannotTouchOthersQPs) that tries to inspect and steer another
// application's QP through the device socket every application can open.
const tenantEnv = "MRC_TEST_TENANT_SOCK"

func TestMain(m *testing.M) {
	if sock := os.Getenv(tenantEnv); sock != "" {
		victim, _ := strconv.ParseUint(os.Getenv("MRC_TEST_TENANT_VICTIM"), 0, 32)
		if err := tenant(sock, uint32(victim)); err != nil {
			fmt.Println("tenant:", err)
			os.Exit(1)
		}
		fmt.Println("tenant: every attempt was refused")
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// tenant makes every attempt on QP victim (each must fail) and the same on
// a QP of its own (each must work).
func tenant(sock string, victim uint32) error {
	d, err := verbs.Open(sock)
	if err != nil {
		return err
	}
	defer d.Close()
	own, err := d.CreateQP(verbs.QPConfig{})
	if err != nil {
		return err
	}
	var raw json.RawMessage
	for _, req := range []vproto.CtlRequest{
		{Cmd: vproto.CtlEVs, QPN: victim},
		{Cmd: vproto.CtlDeny, Scope: vproto.ScopePlane, Plane: 0, QPN: victim},
		{Cmd: vproto.CtlAllow, Scope: vproto.ScopeEV, EV: 0x10000001, QPN: victim},
		{Cmd: vproto.CtlDeny, Scope: vproto.ScopePlane, Plane: 0},               // every QP
		{Cmd: vproto.CtlDeny, Scope: vproto.ScopePlane, Plane: 0, QPN: 0xfffff}, // a QP that does not exist
	} {
		err := d.Ctl(req, &raw)
		if err == nil || !strings.Contains(err.Error(), "only root") {
			return fmt.Errorf("%s %s on QP %#x: err = %v, want a refusal saying only root may", req.Cmd, req.Scope, req.QPN, err)
		}
	}
	var qps []vproto.QPRow
	if err := d.Ctl(vproto.CtlRequest{Cmd: vproto.CtlQPs}, &qps); err != nil {
		return err
	}
	if len(qps) != 1 || qps[0].QPN != own.QPN {
		return fmt.Errorf("qps shows %+v, want only its own QP %#x", qps, own.QPN)
	}
	var ss []vproto.SessionInfo
	if err := d.Ctl(vproto.CtlRequest{Cmd: vproto.CtlSessions}, &ss); err != nil {
		return err
	}
	if len(ss) != 1 || ss[0].UID != uint32(os.Getuid()) || ss[0].PID != os.Getpid() {
		return fmt.Errorf("sessions shows %+v, want only its own (uid %d, pid %d from SO_PEERCRED)", ss, os.Getuid(), os.Getpid())
	}
	// Its own QP it may inspect and steer.
	if err := d.Ctl(vproto.CtlRequest{Cmd: vproto.CtlEVs, QPN: own.QPN}, &raw); err != nil {
		return fmt.Errorf("evs of its own QP: %w", err)
	}
	// (A plane: the QP is not connected, so it holds no EV yet, and an
	// EV it does not hold is an error that says so.)
	if err := d.Ctl(vproto.CtlRequest{Cmd: vproto.CtlDeny, Scope: vproto.ScopePlane, Plane: 0, QPN: own.QPN}, &raw); err != nil {
		return fmt.Errorf("deny on its own QP: %w", err)
	}
	if err := d.Ctl(vproto.CtlRequest{Cmd: vproto.CtlDeny, Scope: vproto.ScopeEV, EV: 0x10000001, QPN: own.QPN}, &raw); err == nil ||
		!strings.Contains(err.Error(), "has no EV") {
		return fmt.Errorf("deny of an EV its QP does not hold: %v, want an error saying so", err)
	}
	// Telemetry shows it the ports but no other application's QP (its
	// watch is a session of its own, which owns no QP).
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ports, qpSamples := 0, 0
	if err := verbs.Watch(ctx, sock, time.Millisecond, func(s telemetry.Sample) {
		switch s.Kind {
		case telemetry.KindNICPort:
			if ports++; ports >= 20 {
				cancel()
			}
		case telemetry.KindQP:
			qpSamples++
		}
	}); err != nil {
		return fmt.Errorf("watch: %w", err)
	}
	if ports < 20 || qpSamples != 0 {
		return fmt.Errorf("watch: %d port samples (want 20) and %d samples of other applications' QPs (want 0)", ports, qpSamples)
	}
	return nil
}

// An application cannot deny, allow or inspect another application's QP,
// nor steer every QP at once: the daemon knows who is calling from the
// kernel (SO_PEERCRED), and only root or its own user administers. The
// other application is a real process of another user.
func TestTenantCannotTouchOthersQPs(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("skipping: starting the other tenant as user nobody needs root (setuid)")
	}
	s1, s2, _ := twoNICs(t, 2)
	a, b := open(t, s1, 4096), open(t, s2, 4096)
	connect(t, a, b)
	var before []vproto.EVRow
	if err := a.dev.Ctl(vproto.CtlRequest{Cmd: vproto.CtlEVs, QPN: a.qp.QPN}, &before); err != nil {
		t.Fatal(err) // root administers every QP
	}

	// nobody must reach the socket and the test binary.
	if err := os.Chmod(filepath.Dir(s1), 0o755); err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "mrctenant")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	exe := filepath.Join(dir, "tenant.test")
	if err := copyFile(self, exe); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), tenantEnv+"="+s1, fmt.Sprintf("MRC_TEST_TENANT_VICTIM=%#x", a.qp.QPN))
	cmd.Dir = dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("the other tenant (uid 65534): %v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "every attempt was refused") {
		t.Fatalf("tenant output:\n%s", out.String())
	}
	var after []vproto.EVRow
	if err := a.dev.Ctl(vproto.CtlRequest{Cmd: vproto.CtlEVs, QPN: a.qp.QPN}, &after); err != nil {
		t.Fatal(err)
	}
	for i := range after {
		if after[i].State != before[i].State {
			t.Fatalf("EV %s went from %s to %s while the other tenant tried", after[i].EV, before[i].State, after[i].State)
		}
	}
}

func copyFile(from, to string) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
