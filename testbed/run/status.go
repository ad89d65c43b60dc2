package run

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/softmrc/softmrc/switchd/ctl"

	"github.com/softmrc/softmrc/testbed/netns"
)

// Status is what `mrc-testbed status` shows.
type Status struct {
	State     *State        `json:"state"`
	Processes []ProcStatus  `json:"processes"`
	Missing   []string      `json:"missing_namespaces,omitempty"`
	Faults    []FaultRecord `json:"faults"`
	// Live is what each running mrc-switchd reports right now: every port
	// whose fault state is not ok, and "switch hang". It is the data plane's
	// view of the recorded faults.
	Live    []LiveFault `json:"live,omitempty"`
	Healthy bool        `json:"healthy"`
}

// LiveFault is a fault state read back from a switch, or a NIC port that is
// administratively down.
type LiveFault struct {
	Node  string `json:"node"`
	Port  string `json:"port"` // "switch" for hang
	State string `json:"state"`
}

// ProcStatus is one daemon and whether it runs.
type ProcStatus struct {
	Proc
	Alive bool `json:"alive"`
}

// GetStatus reads a run's state and checks it against the system.
func GetStatus(dir string) (*Status, error) {
	st, err := LoadState(dir)
	if err != nil {
		return nil, fmt.Errorf("run %s: %w", dir, err)
	}
	s := &Status{State: st, Faults: st.Faults}
	for _, ns := range st.Namespaces {
		if !netns.Exists(ns) {
			s.Missing = append(s.Missing, ns)
		}
	}
	for _, p := range st.Processes {
		s.Processes = append(s.Processes, ProcStatus{Proc: p, Alive: p.Alive()})
	}
	s.Healthy = st.Phase == PhaseUp && len(health(st)) == 0
	s.Live = liveFaults(st)
	return s, nil
}

// liveFaults asks every running mrc-switchd of the run for its fault state
// and reads the link state of every NIC port.
func liveFaults(st *State) []LiveFault {
	p, err := LoadPlan(st.RunDir)
	if err != nil {
		return nil
	}
	var out []LiveFault
	for _, pr := range st.Processes {
		sw := p.Switch(pr.Name)
		if pr.Role != "mrc-switchd" || sw == nil || !pr.Alive() {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		stats, err := switchStats(ctx, sw.CtlSock)
		cancel()
		if err != nil {
			out = append(out, LiveFault{Node: sw.Name, Port: "-", State: "no answer: " + err.Error()})
			continue
		}
		if stats.Hang {
			out = append(out, LiveFault{Node: sw.Name, Port: "switch", State: "hang"})
		}
		for _, ps := range stats.Ports {
			if f := ps.Fault.String(); f != "ok" {
				out = append(out, LiveFault{Node: sw.Name, Port: ps.Name, State: f})
			}
		}
	}
	for _, h := range p.Hosts {
		nh, err := netns.Handle(h.NS)
		if err != nil {
			continue
		}
		for _, hp := range h.Ports {
			if lk, err := nh.LinkByName(hp.Ifname); err == nil && lk.Attrs().Flags&net.FlagUp == 0 {
				out = append(out, LiveFault{Node: h.Name, Port: hp.Ifname, State: "link down"})
			}
		}
		nh.Close()
	}
	return out
}

func switchStats(ctx context.Context, sock string) (*ctl.Stats, error) {
	c, err := ctl.Dial(ctx, sock)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	return c.Stats(ctx)
}

// Print writes a human summary.
func (s *Status) Print(w io.Writer) {
	st := s.State
	alive := 0
	for _, p := range s.Processes {
		if p.Alive {
			alive++
		}
	}
	health := "healthy"
	if !s.Healthy {
		health = "NOT healthy (run `mrc-testbed up` again to rebuild, or `down`)"
	}
	fmt.Fprintf(w, "run %s in %s: phase %s, %s\n", st.Prefix, st.RunDir, st.Phase, health)
	fmt.Fprintf(w, "namespaces: %d listed, %d missing; veths: %d; daemons: %d/%d running\n",
		len(st.Namespaces), len(s.Missing), len(st.Veths), alive, len(s.Processes))
	for _, ns := range s.Missing {
		fmt.Fprintf(w, "  missing namespace %s\n", ns)
	}
	for _, p := range s.Processes {
		if !p.Alive {
			fmt.Fprintf(w, "  %s %s (pid %d) is not running; log %s\n", p.Role, p.Name, p.PID, p.Log)
		}
	}
	if len(s.Faults) == 0 {
		fmt.Fprintln(w, "faults: none")
	} else {
		fmt.Fprintln(w, "faults:")
		f := append([]FaultRecord(nil), s.Faults...)
		sort.Slice(f, func(i, j int) bool { return f[i].Target < f[j].Target })
		for _, x := range f {
			fmt.Fprintf(w, "  %-24s %-16s since %s\n", x.Target, x.Op, x.Since.Format("15:04:05.000"))
		}
	}
	if len(s.Live) > 0 {
		fmt.Fprintln(w, "data plane (as switches and NIC ports report it):")
		for _, l := range s.Live {
			fmt.Fprintf(w, "  %-12s %-7s %s\n", l.Node, l.Port, l.State)
		}
	}
}

// Runs lists run directories under root that hold a state file.
func Runs(root string) []string {
	ents, _ := os.ReadDir(root)
	var out []string
	for _, e := range ents {
		d := filepath.Join(root, e.Name())
		if _, err := os.Stat(StatePath(d)); err == nil {
			out = append(out, d)
		}
	}
	return out
}
