// Package run brings a planned testbed up and down: it records everything it
// is about to create in a state file before creating it, so `down` removes
// exactly that (also after a crash or kill), starts mrc-switchd (and
// mrc-nicd) in the namespaces, waits until they are ready, injects faults and
// reports status.
package run

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// StateVersion is the state file format version.
const StateVersion = 1

// DefaultRoot holds one run directory per prefix unless --dir is given.
const DefaultRoot = "/run/softmrc"

// Phases of a run.
const (
	PhaseApplying = "applying" // resources listed, being created
	PhaseUp       = "up"       // everything created and ready
)

// State is the run's state file (state.json in the run directory). Every
// resource is listed before it is created.
type State struct {
	Version    int       `json:"version"`
	Prefix     string    `json:"prefix"`
	RunDir     string    `json:"run_dir"`
	Source     string    `json:"source"`
	PlanHash   string    `json:"plan_hash"`
	Phase      string    `json:"phase"`
	Created    time.Time `json:"created"`
	Namespaces []string  `json:"namespaces"`
	Veths      []Veth    `json:"veths"`
	Bridge     Veth      `json:"bridge"`
	PinGlob    string    `json:"pin_glob"`
	// CreatedDir is true when this run made RunDir (down then removes it).
	CreatedDir bool          `json:"created_dir"`
	Files      []string      `json:"files"`
	Processes  []Proc        `json:"processes"`
	Faults     []FaultRecord `json:"faults"`
}

// Veth is one interface the run made (or the management bridge).
type Veth struct {
	NS     string `json:"ns"`
	Ifname string `json:"ifname"`
	Peer   string `json:"peer,omitempty"` // ns/ifname
}

// Proc is a daemon the run started.
type Proc struct {
	Name string `json:"name"` // switch or host name
	Role string `json:"role"` // mrc-switchd | mrc-nicd
	NS   string `json:"ns"`
	PID  int    `json:"pid"`
	// StartTicks is /proc/PID/stat field 22, so a recycled PID is never
	// mistaken for the daemon.
	StartTicks uint64   `json:"start_ticks"`
	Argv       []string `json:"argv"`
	Log        string   `json:"log"`
}

// FaultRecord is an active fault.
type FaultRecord struct {
	Target string    `json:"target"`
	Op     string    `json:"op"`
	Since  time.Time `json:"since"`
}

// StatePath is the state file of a run directory.
func StatePath(dir string) string { return filepath.Join(dir, "state.json") }

// LoadState reads a run's state; os.ErrNotExist when there is none.
func LoadState(dir string) (*State, error) {
	b, err := os.ReadFile(StatePath(dir))
	if err != nil {
		return nil, err
	}
	var s State
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("state file %s is corrupt (%v): remove what it made by hand (ip netns list) and delete it", StatePath(dir), err)
	}
	if s.Version != StateVersion {
		return nil, fmt.Errorf("state file %s has version %d, this build reads %d", StatePath(dir), s.Version, StateVersion)
	}
	return &s, nil
}

// Save writes the state atomically (write + rename + fsync of the file) so
// a crash leaves either the old or the new state.
func (s *State) Save() error {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	tmp := StatePath(s.RunDir) + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("write state: %w", err)
	}
	if _, err := f.Write(append(b, '\n')); err != nil {
		f.Close()
		return fmt.Errorf("write state: %w", err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, StatePath(s.RunDir))
}

// SetFault records op on target (op "clear" or "up" removes the record).
func (s *State) SetFault(target, op string, now time.Time) {
	out := s.Faults[:0]
	for _, f := range s.Faults {
		if f.Target != target {
			out = append(out, f)
		}
	}
	s.Faults = out
	if op != "clear" && op != "up" {
		s.Faults = append(s.Faults, FaultRecord{Target: target, Op: op, Since: now})
	}
}

// lock takes an exclusive flock on the run directory so two mrc-testbed
// commands never change one run at the same time.
func lock(dir string) (func(), error) {
	f, err := os.OpenFile(filepath.Join(dir, "lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
		f.Close()
		return nil, err
	}
	return func() { unix.Flock(int(f.Fd()), unix.LOCK_UN); f.Close() }, nil
}

// procStartTicks returns field 22 of /proc/PID/stat and whether the process
// exists and is not a zombie.
func procStartTicks(pid int) (uint64, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, false
	}
	// The command name may contain spaces; fields restart after the last ')'.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 20 || f[0] == "Z" || f[0] == "X" {
		return 0, false
	}
	t, err := strconv.ParseUint(f[19], 10, 64)
	return t, err == nil
}

// Alive reports whether the recorded process is still the one we started.
func (p *Proc) Alive() bool {
	t, ok := procStartTicks(p.PID)
	return ok && t == p.StartTicks
}

// stop sends SIGTERM, waits up to grace for the process to go, then SIGKILLs.
func (p *Proc) stop(grace time.Duration) error {
	if !p.Alive() {
		return nil
	}
	_ = syscall.Kill(p.PID, syscall.SIGTERM)
	deadline := time.Now().Add(grace)
	for time.Now().Before(deadline) {
		if !p.Alive() {
			return nil
		}
		time.Sleep(10 * time.Millisecond)
	}
	_ = syscall.Kill(p.PID, syscall.SIGKILL)
	deadline = time.Now().Add(2 * time.Second)
	for time.Now().Before(deadline) {
		if !p.Alive() {
			return nil
		}
		time.Sleep(10 * time.Millisecond)
	}
	return fmt.Errorf("%s %s (pid %d) did not exit after SIGKILL", p.Role, p.Name, p.PID)
}
