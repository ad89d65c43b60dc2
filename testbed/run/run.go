package run

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
	"gopkg.in/yaml.v3"

	"github.com/softmrc/softmrc/nic/verbs"
	"github.com/softmrc/softmrc/testbed/netns"
	"github.com/softmrc/softmrc/testbed/plan"
	"github.com/softmrc/softmrc/testbed/topo"
)

// Options tune Up.
type Options struct {
	// BinDir holds mrc-switchd and mrc-nicd; empty means the folder of the
	// running executable, then $MRC_BIN, then PATH.
	BinDir string
	// Render writes mrc-switchd configs; nil means plan.DefaultSwitchConfig.
	Render plan.SwitchConfigRenderer
	// Switchd is how the testbed talks to mrc-switchd; nil means its control
	// socket (SwitchdCtl).
	Switchd SwitchControl
	// ReadyTimeout bounds the wait for each daemon (default 15 s).
	ReadyTimeout time.Duration
	Log          *slog.Logger
}

func (o *Options) defaults() {
	if o.Render == nil {
		o.Render = plan.DefaultSwitchConfig
	}
	if o.ReadyTimeout == 0 {
		o.ReadyTimeout = 15 * time.Second
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	if o.Switchd == nil {
		o.Switchd = SwitchdCtl{}
	}
}

// ErrNoSwitchd reports that the xdp dataplane was asked for but no
// mrc-switchd binary was found.
var ErrNoSwitchd = errors.New("mrc-switchd not found (looked in --bin, beside mrc-testbed, in $MRC_BIN and PATH): build it with `make build` (bin/mrc-testbed then finds bin/mrc-switchd) or pass --bin DIR, or use dataplane: kernel")

// executable is os.Executable; tests stand in for mrc-testbed's own path.
var executable = os.Executable

// besideExecutable is the folder of the running program (symlinks
// resolved): `make build` puts every binary in bin/, so bin/mrc-testbed
// finds bin/mrc-switchd and bin/mrc-nicd with no flag.
func besideExecutable() string {
	p, err := executable()
	if err != nil {
		return ""
	}
	if r, err := filepath.EvalSymlinks(p); err == nil {
		p = r
	}
	return filepath.Dir(p)
}

// FindBin looks for a daemon binary in dir (--bin), then beside the running
// executable, then in $MRC_BIN, then PATH; "" if none.
func FindBin(dir, name string) string {
	for _, d := range []string{dir, besideExecutable(), os.Getenv("MRC_BIN")} {
		if d == "" {
			continue
		}
		p := filepath.Join(d, name)
		if st, err := os.Stat(p); err == nil && !st.IsDir() && st.Mode()&0o111 != 0 {
			return p
		}
	}
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	return ""
}

func planHash(p *plan.Plan) (string, []byte, error) {
	b, err := p.YAML()
	if err != nil {
		return "", nil, err
	}
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:8]), b, nil
}

// Up brings the plan up. It is idempotent: when the run directory already
// holds a healthy run of the same plan it returns that state unchanged; a
// run that is partial, stale (killed daemons, missing namespaces) or of
// another plan is torn down first and rebuilt.
func Up(ctx context.Context, p *plan.Plan, o Options) (*State, error) {
	o.defaults()
	created := false
	if _, err := os.Stat(p.RunDir); errors.Is(err, os.ErrNotExist) {
		created = true
	}
	if err := os.MkdirAll(p.RunDir, 0o755); err != nil {
		return nil, fmt.Errorf("run directory: %w", err)
	}
	unlock, err := lock(p.RunDir)
	if err != nil {
		return nil, err
	}
	defer unlock()
	hash, _, err := planHash(p)
	if err != nil {
		return nil, err
	}
	if old, err := LoadState(p.RunDir); err == nil {
		if old.PlanHash == hash && old.Phase == PhaseUp && len(health(old)) == 0 {
			o.Log.Info("run already up", "prefix", p.Prefix, "dir", p.RunDir)
			return old, nil
		}
		o.Log.Info("tearing down the previous run first", "prefix", old.Prefix, "phase", old.Phase, "problems", health(old))
		created = created || old.CreatedDir
		if err := teardown(old, "", o.Log); err != nil {
			return nil, fmt.Errorf("tear down previous run: %w", err)
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	if p.Dataplane == topo.DataplaneXDP && FindBin(o.BinDir, "mrc-switchd") == "" {
		return nil, ErrNoSwitchd
	}
	// Refuse to touch namespaces this run does not own.
	for _, ns := range p.Namespaces {
		if netns.Exists(ns) {
			return nil, fmt.Errorf("namespace %s exists but no state file in %s lists it: another run uses prefix %q (bring it down with its --dir, or delete it with `ip netns del`), or pick another --prefix", ns, p.RunDir, p.Prefix)
		}
	}
	// Pins under the run's glob with none of its namespaces alive are left
	// over from a run whose state was lost; mrc-switchd would adopt them.
	if stale, _ := filepath.Glob(p.PinGlob); len(stale) > 0 {
		o.Log.Info("removing stale pins of this prefix", "pins", len(stale), "glob", p.PinGlob)
		for _, pin := range stale {
			if err := os.RemoveAll(pin); err != nil {
				return nil, fmt.Errorf("remove stale pin %s: %w", pin, err)
			}
		}
	}
	st := listed(p, hash, created)
	files, err := p.Files(o.Render)
	if err != nil {
		return nil, err
	}
	for _, f := range files {
		st.Files = append(st.Files, f.Path)
	}
	if err := st.Save(); err != nil {
		return nil, err
	}
	testHook("listed")
	t0 := time.Now()
	for _, f := range files {
		if err := os.MkdirAll(filepath.Dir(f.Path), 0o755); err != nil {
			return st, err
		}
		if err := os.WriteFile(f.Path, f.Data, 0o644); err != nil {
			return st, err
		}
	}
	if err := os.MkdirAll(filepath.Join(p.RunDir, "log"), 0o755); err != nil {
		return st, err
	}
	if p.Dataplane == topo.DataplaneXDP {
		if err := EnsureBPFFS(o.Log); err != nil {
			return st, err
		}
	}
	if err := netns.Apply(p); err != nil {
		return st, fmt.Errorf("apply (run `mrc-testbed down --dir %s` to clean up): %w", p.RunDir, err)
	}
	testHook("applied")
	o.Log.Info("namespaces and links made", "namespaces", len(p.Namespaces), "links", len(p.Links), "took", time.Since(t0).Round(time.Millisecond))
	if err := launchAll(ctx, p, st, o); err != nil {
		return st, err
	}
	testHook("launched")
	st.Phase = PhaseUp
	if err := st.Save(); err != nil {
		return st, err
	}
	o.Log.Info("testbed up", "prefix", p.Prefix, "dir", p.RunDir, "took", time.Since(t0).Round(time.Millisecond))
	return st, nil
}

// testHook marks stages of Up for crash tests.
var testHook = func(stage string) {}

// listed is the state listing everything the plan makes, before any of it
// exists.
func listed(p *plan.Plan, hash string, created bool) *State {
	st := &State{
		Version: StateVersion, Prefix: p.Prefix, RunDir: p.RunDir, PlanHash: hash, Phase: PhaseApplying,
		Created: time.Now().UTC(), Namespaces: slices.Clone(p.Namespaces), PinGlob: p.PinGlob, CreatedDir: created,
		Bridge: Veth{NS: p.Mgmt.NS, Ifname: p.Mgmt.Bridge},
	}
	for _, l := range p.Links {
		st.Veths = append(st.Veths, Veth{NS: l.A.NS, Ifname: l.A.Ifname, Peer: l.B.NS + "/" + l.B.Ifname})
	}
	return st
}

// launchAll starts mrc-switchd in every switch namespace (xdp dataplane) and
// mrc-nicd in every host namespace (when the topology asks for NICs and the
// binary exists), recording each process before waiting for readiness.
func launchAll(ctx context.Context, p *plan.Plan, st *State, o Options) error {
	var mu sync.Mutex
	if p.Dataplane == topo.DataplaneXDP {
		bin := FindBin(o.BinDir, "mrc-switchd")
		for i := range p.Switches {
			s := &p.Switches[i]
			os.Remove(s.CtlSock)
			pr, err := Launch(s.NS, s.Name, "mrc-switchd", bin, SwitchdArgs(s), s.Log)
			if err != nil {
				return err
			}
			st.Processes = append(st.Processes, *pr)
		}
		if err := st.Save(); err != nil {
			return err
		}
		var errs []error
		var wg sync.WaitGroup
		for i := range p.Switches {
			s := &p.Switches[i]
			pr := st.Processes[i]
			wg.Add(1)
			go func() {
				defer wg.Done()
				cctx, cancel := context.WithTimeout(ctx, o.ReadyTimeout)
				defer cancel()
				if err := waitReady(cctx, &pr, func(ctx context.Context) error { return o.Switchd.Ready(ctx, s) }); err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			return err
		}
	}
	if p.NICs {
		bin := FindBin(o.BinDir, "mrc-nicd")
		if bin == "" {
			for _, h := range p.Hosts {
				for _, hp := range h.Ports {
					if hp.DelayUS > 0 {
						// The host links' delay lives in mrc-nicd: without
						// it the topology would run without its delay.
						return fmt.Errorf("host %s: its link %s has a delay, which mrc-nicd holds (docs/testbed.md), but no mrc-nicd binary was found: run `make build` and pass --bin bin", h.Name, hp.Link)
					}
				}
			}
			o.Log.Warn("nics: true but no mrc-nicd binary found; hosts run without a NIC daemon")
			return nil
		}
		first := len(st.Processes)
		for i := range p.Hosts {
			h := &p.Hosts[i]
			os.Remove(NICSocket(h))
			pr, err := Launch(h.NS, h.Name, "mrc-nicd", bin, NICdArgs(h), h.Log)
			if err != nil {
				return err
			}
			st.Processes = append(st.Processes, *pr)
		}
		if err := st.Save(); err != nil {
			return err
		}
		// Ready = the device socket completes a verbs handshake, exactly
		// what an application does first.
		for i := range p.Hosts {
			h, pr := &p.Hosts[i], st.Processes[first+i]
			cctx, cancel := context.WithTimeout(ctx, o.ReadyTimeout)
			err := waitReady(cctx, &pr, func(ctx context.Context) error {
				pctx, pcancel := context.WithTimeout(ctx, time.Second)
				defer pcancel()
				return verbs.Ping(pctx, NICSocket(h))
			})
			cancel()
			if err != nil {
				return err
			}
		}
	}
	return nil
}

// NICSocket is the device socket mrc-nicd serves (plan.NICConfig sets it).
func NICSocket(h *plan.Host) string {
	return filepath.Join(filepath.Dir(h.NICConfig), h.Name+".sock")
}

// SwitchdArgs is the mrc-switchd command line for a switch (after argv[0]).
var SwitchdArgs = func(s *plan.Switch) []string { return []string{"run", "-c", s.Config} }

// NICdArgs is the mrc-nicd command line for a host (after argv[0]).
var NICdArgs = func(h *plan.Host) []string { return []string{"--config", h.NICConfig} }

// Launch starts bin in namespace ns, detached (own session, output to log),
// and returns its record. The caller's process reaps it if it exits first.
func Launch(ns, name, role, bin string, args []string, logPath string) (*Proc, error) {
	lf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer lf.Close()
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = lf, lf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	// The child inherits the network namespace of the thread that forks it.
	if err := netns.Do(ns, cmd.Start); err != nil {
		return nil, fmt.Errorf("start %s in %s: %w", role, ns, err)
	}
	go cmd.Wait() // reap; the record's start time guards against PID reuse
	ticks, _ := procStartTicks(cmd.Process.Pid)
	return &Proc{Name: name, Role: role, NS: ns, PID: cmd.Process.Pid, StartTicks: ticks, Argv: append([]string{bin}, args...), Log: logPath}, nil
}

// waitReady polls ready until it succeeds, the process dies or ctx ends.
func waitReady(ctx context.Context, pr *Proc, ready func(context.Context) error) error {
	var last error
	for {
		if !pr.Alive() {
			return fmt.Errorf("%s %s exited during start-up; last lines of %s:\n%s", pr.Role, pr.Name, pr.Log, tail(pr.Log, 10))
		}
		if last = ready(ctx); last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s %s not ready: %v (log %s:\n%s)", pr.Role, pr.Name, last, pr.Log, tail(pr.Log, 10))
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func tail(path string, n int) string {
	b, _ := os.ReadFile(path)
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// health lists what is wrong with a recorded run (empty = healthy).
func health(st *State) []string {
	var bad []string
	for _, ns := range st.Namespaces {
		if !netns.Exists(ns) {
			bad = append(bad, "namespace "+ns+" missing")
		}
	}
	for _, p := range st.Processes {
		if !p.Alive() {
			bad = append(bad, fmt.Sprintf("%s %s (pid %d) gone", p.Role, p.Name, p.PID))
		}
	}
	return bad
}

// Down removes everything the run directory's state lists: daemons, then
// namespaces (their veths and the bridge go with them), bpffs pins under the
// run's glob, the files it wrote and, if it made it, the directory. It is
// safe to repeat and works after a crash at any point of Up.
func Down(dir string, log *slog.Logger) error {
	return DownWith(dir, DownOptions{Log: log})
}

// DownOptions are Down's.
type DownOptions struct {
	Log *slog.Logger
	// KeepLogs, when set, is a folder the daemons' logs are copied into
	// (made if missing) once they have stopped, before the run's folder
	// is removed: what a run's daemons said outlives the run.
	KeepLogs string
}

// DownWith is Down with options.
func DownWith(dir string, o DownOptions) error {
	log := o.Log
	if log == nil {
		log = slog.Default()
	}
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		// A second down, or one after a run that never started: there is
		// nothing to remove, and scripts that repeat down (docs/testbed.md:
		// "safe to repeat") must not fail on it.
		log.Info("nothing to remove: no run folder", "dir", dir)
		return nil
	}
	unlock, err := lock(dir)
	if err != nil {
		return err
	}
	st, err := LoadState(dir)
	if err != nil {
		unlock()
		if errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("no state file in %s: nothing recorded to remove", dir)
		}
		return err
	}
	err = teardown(st, o.KeepLogs, log)
	unlock()
	if err == nil && st.CreatedDir {
		err = os.RemoveAll(dir)
	}
	return err
}

func teardown(st *State, keepLogs string, log *slog.Logger) error {
	var errs []error
	for i := range st.Processes {
		p := &st.Processes[i]
		if err := p.stop(3 * time.Second); err != nil {
			errs = append(errs, err)
		}
	}
	// Anything else still running inside the run's namespaces (say a daemon
	// started with `mrc-testbed exec`) would keep them, and their veths,
	// alive after the unmount: stop it too.
	if err := stopStrays(st.Namespaces, log); err != nil {
		errs = append(errs, err)
	}
	for _, ns := range st.Namespaces {
		if err := netns.Delete(ns); err != nil {
			errs = append(errs, err)
		}
	}
	if st.PinGlob != "" && strings.HasPrefix(st.PinGlob, plan.BPFRoot+"/") {
		pins, _ := filepath.Glob(st.PinGlob)
		for _, pin := range pins {
			if err := os.RemoveAll(pin); err != nil {
				errs = append(errs, fmt.Errorf("remove pin %s: %w", pin, err))
			}
		}
	}
	for _, f := range st.Files {
		if err := os.Remove(f); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	if keepLogs != "" {
		// Keeping the logs is a courtesy: a failure to copy them must not
		// leave the run half torn down (its state file kept).
		if err := copyLogs(st.Processes, keepLogs); err != nil {
			log.Warn("the daemons' logs were not kept", "dir", keepLogs, "err", err)
		}
	}
	for _, p := range st.Processes {
		os.Remove(p.Log)
	}
	for _, d := range []string{"switch", "host", "log"} {
		os.Remove(filepath.Join(st.RunDir, d)) // only if empty
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	log.Info("run down", "prefix", st.Prefix, "namespaces", len(st.Namespaces), "processes", len(st.Processes))
	return os.Remove(StatePath(st.RunDir))
}

// LoadPlan reads the plan a run wrote (plan.yaml in its directory).
func LoadPlan(dir string) (*plan.Plan, error) {
	b, err := os.ReadFile(filepath.Join(dir, "plan.yaml"))
	if err != nil {
		return nil, fmt.Errorf("run %s: %w (is it up?)", dir, err)
	}
	var p plan.Plan
	if err := yaml.Unmarshal(b, &p); err != nil {
		return nil, fmt.Errorf("run %s: plan.yaml: %w", dir, err)
	}
	return &p, nil
}

// EnsureBPFFS makes sure /sys/fs/bpf is a bpffs mount (mounting one there if
// it is not, as the kernel documentation and iproute2 do) and that
// plan.BPFRoot exists. The mount is left in place by down: it is the
// standard, shared location, not something this run owns.
func EnsureBPFFS(log *slog.Logger) error {
	var sfs unix.Statfs_t
	if err := unix.Statfs("/sys/fs/bpf", &sfs); err != nil {
		return fmt.Errorf("bpffs: %w", err)
	}
	if sfs.Type != unix.BPF_FS_MAGIC {
		if err := unix.Mount("bpf", "/sys/fs/bpf", "bpf", 0, "mode=0700"); err != nil {
			return fmt.Errorf("/sys/fs/bpf is not a bpffs and mounting one failed (%w): mount -t bpf bpf /sys/fs/bpf", err)
		}
		log.Info("mounted bpffs on /sys/fs/bpf (it was not mounted)")
	}
	return os.MkdirAll(plan.BPFRoot, 0o700)
}

// stopStrays stops every process whose network namespace is one of nss.
func stopStrays(nss []string, log *slog.Logger) error {
	want := map[string]string{}
	for _, ns := range nss {
		var st unix.Stat_t
		if unix.Stat(netns.Path(ns), &st) == nil {
			want[fmt.Sprintf("net:[%d]", st.Ino)] = ns
		}
	}
	if len(want) == 0 {
		return nil
	}
	ents, _ := os.ReadDir("/proc")
	var strays []Proc
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		link, err := os.Readlink(filepath.Join("/proc", e.Name(), "ns", "net"))
		if ns, ok := want[link]; err == nil && ok {
			ticks, alive := procStartTicks(pid)
			if alive {
				strays = append(strays, Proc{Name: ns, Role: "process", NS: ns, PID: pid, StartTicks: ticks})
			}
		}
	}
	var errs []error
	for i := range strays {
		log.Info("stopping a process left in the run's namespace", "pid", strays[i].PID, "ns", strays[i].NS)
		if err := strays[i].stop(3 * time.Second); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// copyLogs copies each process's log into dir once (a restarted daemon
// appends to its first log).
func copyLogs(procs []Proc, dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("keep the daemons' logs: %w", err)
	}
	seen := map[string]bool{}
	var errs []error
	for _, p := range procs {
		if p.Log == "" || seen[p.Log] {
			continue
		}
		seen[p.Log] = true
		b, err := os.ReadFile(p.Log)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err == nil {
			err = os.WriteFile(filepath.Join(dir, filepath.Base(p.Log)), b, 0o644)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("keep %s's log: %w", p.Name, err))
		}
	}
	return errors.Join(errs...)
}
