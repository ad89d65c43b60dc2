package run

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	nicconfig "github.com/softmrc/softmrc/nic/config"
	"github.com/softmrc/softmrc/nic/service"
	"github.com/softmrc/softmrc/nic/vproto"
	"github.com/softmrc/softmrc/testbed/netns"
	"github.com/softmrc/softmrc/testbed/plan"
	"github.com/softmrc/softmrc/testbed/probe"
	"github.com/softmrc/softmrc/testbed/topo"
)

// crashEnv makes the test binary a child that brings a run up and SIGKILLs
// itself at the named point (see TestUpAfterKill).
const crashEnv = "MRC_TESTBED_CRASH_AT"

func TestMain(m *testing.M) {
	if at := os.Getenv(crashEnv); at != "" {
		os.Exit(crashChild(at))
	}
	if os.Getenv(fakeNICdEnv) == "1" {
		os.Exit(fakeNICd(os.Args[1:]))
	}
	code := m.Run()
	if binDir != "" && os.Getenv("MRC_BIN") == "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// needRoot skips unless the kernel and privileges allow namespaces, saying
// which is missing. MRC_TEST_REQUIRE_PRIV=1 turns the skip into a failure.
func needRoot(t testing.TB) {
	t.Helper()
	if err := netns.Supported(); err != nil {
		if os.Getenv("MRC_TEST_REQUIRE_PRIV") == "1" {
			t.Fatalf("MRC_TEST_REQUIRE_PRIV=1 but: %v", err)
		}
		t.Skipf("skipping: %v", err)
	}
}

var (
	binMu  sync.Mutex
	binDir string
	binErr = map[string]error{}
)

// switchdBin returns a directory with mrc-switchd: $MRC_BIN, or a fresh
// `go build` of ./cmd/mrc-switchd. It skips when mrc-switchd does not exist
// (or does not build) yet.
func switchdBin(t testing.TB) string { return bins(t, "mrc-switchd") }

// bins returns a directory holding the named binaries: $MRC_BIN, or fresh
// `go build`s of ./cmd/NAME into one temporary directory (removed by
// TestMain). It skips when a command does not exist (or does not build) yet.
func bins(t testing.TB, names ...string) string {
	t.Helper()
	if d := os.Getenv("MRC_BIN"); d != "" {
		for _, n := range names {
			if FindBin(d, n) == "" {
				t.Fatalf("MRC_BIN=%s has no %s (run make build)", d, n)
			}
		}
		return d
	}
	binMu.Lock()
	defer binMu.Unlock()
	root, err := moduleRoot()
	if err != nil {
		t.Skipf("skipping: %v", err)
	}
	if binDir == "" {
		if binDir, err = os.MkdirTemp("", "mrc-testbed-bin-"); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range names {
		if _, done := binErr[n]; !done {
			if _, err := os.Stat(filepath.Join(root, "cmd", n)); err != nil {
				binErr[n] = fmt.Errorf("%s does not exist yet (no cmd/%s)", n, n)
			} else {
				cmd := exec.Command(goTool(), "build", "-o", binDir, "./cmd/"+n)
				cmd.Dir = root
				binErr[n] = nil
				if out, err := cmd.CombinedOutput(); err != nil {
					binErr[n] = fmt.Errorf("%s does not build yet: %v\n%s", n, err, out)
				}
			}
		}
		if binErr[n] != nil {
			t.Skipf("skipping: %v", binErr[n])
		}
	}
	return binDir
}

func goTool() string {
	if p := filepath.Join(os.Getenv("GOROOT"), "bin", "go"); os.Getenv("GOROOT") != "" {
		return p
	}
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	return "/usr/local/go/bin/go"
}

func moduleRoot() (string, error) {
	d, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d, nil
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("no go.mod above the test directory")
		}
		d = filepath.Dir(d)
	}
}

func randPrefix(t testing.TB) string {
	b := make([]byte, 5)
	rand.Read(b)
	const alnum = "abcdefghijklmnopqrstuvwxyz0123456789"
	s := []byte{'t'}
	for _, x := range b {
		s = append(s, alnum[int(x)%len(alnum)])
	}
	return string(s)
}

// fakeNICdEnv makes the test binary a stand-in mrc-nicd (TestNICHookExecMgmt):
// it serves the config's device socket with the real device-socket service
// over a NIC that refuses every QP, until killed.
const fakeNICdEnv = "MRC_TESTBED_FAKE_NICD"

func fakeNICd(args []string) int {
	if len(args) != 2 || args[0] != "--config" {
		fmt.Fprintln(os.Stderr, "fake mrc-nicd: want --config FILE, got", args)
		return 2
	}
	c, err := nicconfig.Load(args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, "fake mrc-nicd:", err)
		return 1
	}
	svc := service.New(noQPs{host: c.Host}, nil)
	if err := svc.Listen(c.DeviceSocket); err != nil {
		fmt.Fprintln(os.Stderr, "fake mrc-nicd:", err)
		return 1
	}
	if err := svc.Serve(); err != nil {
		fmt.Fprintln(os.Stderr, "fake mrc-nicd:", err)
		return 1
	}
	return 0
}

// noQPs is the fake mrc-nicd's NIC: it answers hello and refuses QPs.
type noQPs struct{ host string }

var errFake = errors.New("fake mrc-nicd: no QPs")

func (n noQPs) Info() vproto.DeviceInfo { return vproto.DeviceInfo{Host: n.host, Mode: "fake"} }
func (noQPs) CreateQP(uint32, vproto.CreateQP) (vproto.QPInfo, error) {
	return vproto.QPInfo{}, errFake
}
func (noQPs) RegMR(uint32, int, vproto.RegMR) (vproto.MRInfo, error) {
	return vproto.MRInfo{}, errFake
}
func (noQPs) DeregMR(uint32, vproto.DeregMR) error               { return errFake }
func (noQPs) ConnectQP(uint32, vproto.ConnectQP) error           { return errFake }
func (noQPs) DestroyQP(uint32, uint32) error                     { return errFake }
func (noQPs) Post(uint32, []vproto.WR)                           {}
func (noQPs) Ctl(service.Caller, vproto.CtlRequest) (any, error) { return nil, errFake }
func (noQPs) CloseOwner(uint32)                                  {}

func quietLog() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// testRun is a run made by a test; Cleanup brings it down and checks that
// nothing is left.
type testRun struct {
	p   *plan.Plan
	pr  *probe.Prober // sockets on every host port; closed before down
	st  *State
	bin string
	dir string
}

func upRun(t *testing.T, preset string, mode topo.Mode, dp topo.Dataplane) *testRun {
	t.Helper()
	needRoot(t)
	bin := ""
	if dp == topo.DataplaneXDP {
		bin = switchdBin(t)
	}
	top, err := topo.Preset(preset)
	if err != nil {
		t.Fatal(err)
	}
	top.Mode, top.Dataplane = mode, dp
	dir := filepath.Join(t.TempDir(), "run")
	p, err := plan.Build(top, plan.Options{Prefix: randPrefix(t), RunDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	r := &testRun{p: p, bin: bin, dir: dir}
	t.Cleanup(func() {
		if _, err := os.Stat(StatePath(dir)); err == nil {
			if err := Down(dir, quietLog()); err != nil {
				t.Errorf("down: %v", err)
			}
		}
		checkGone(t, p, r.st)
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r.st, err = Up(ctx, p, Options{BinDir: bin, Log: quietLog()})
	if errors.Is(err, netns.ErrNoSRv6) {
		t.Skipf("skipping: %v", err)
	}
	if err != nil {
		t.Fatalf("up: %v", err)
	}
	if r.pr, err = probe.NewProber(p); err != nil {
		t.Fatal(err)
	}
	// Runs before the down above (cleanups are LIFO): open sockets would
	// keep the namespaces alive.
	t.Cleanup(func() { r.pr.Close() })
	return r
}

// checkGone asserts that no namespace, root-namespace veth, pin or process
// of the run is left.
func checkGone(t testing.TB, p *plan.Plan, st *State) {
	t.Helper()
	left, _ := netns.List(p.Prefix + "-")
	if len(left) > 0 {
		t.Errorf("namespaces left behind: %v", left)
	}
	macs := map[string]bool{}
	for _, l := range p.Links {
		macs[l.A.MAC.String()], macs[l.B.MAC.String()] = true, true
	}
	links, err := netlink.LinkList()
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range links {
		if macs[l.Attrs().HardwareAddr.String()] {
			t.Errorf("interface %s (%s) of the run left in the root namespace", l.Attrs().Name, l.Attrs().HardwareAddr)
		}
	}
	if pins, _ := filepath.Glob(p.PinGlob); len(pins) > 0 {
		t.Errorf("pins left behind: %v", pins)
	}
	if st != nil {
		for _, pr := range st.Processes {
			if pr.Alive() {
				t.Errorf("%s %s (pid %d) still running", pr.Role, pr.Name, pr.PID)
			}
		}
	}
	if _, err := os.Stat(p.RunDir); err == nil {
		t.Errorf("run directory %s left behind", p.RunDir)
	}
}

// procsOf lists pids of processes whose argv mentions s (the run's unique
// directory); used to check that nothing the run started survives.
func procsOf(s string) []string {
	var out []string
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && strings.Contains(string(b), s) {
			out = append(out, e.Name())
		}
	}
	return out
}
