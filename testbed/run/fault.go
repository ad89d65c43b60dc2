package run

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/softmrc/softmrc/internal/probability"
	"github.com/softmrc/softmrc/switchd/ctl"
	"github.com/softmrc/softmrc/testbed/netns"
	"github.com/softmrc/softmrc/testbed/plan"
	"github.com/softmrc/softmrc/testbed/topo"
)

// Op is a parsed fault operation.
type Op struct {
	Kind string // down | up | blackhole | loss | flap | hang | restart | clear
	// Loss is the drop probability (0..1] for Kind loss.
	Loss float64
	// FlapOn and FlapOff are the up and down phases for Kind flap.
	FlapOn, FlapOff time.Duration
}

func (o Op) String() string {
	switch o.Kind {
	case "loss":
		return "loss=" + strconv.FormatFloat(o.Loss, 'g', -1, 64)
	case "flap":
		return "flap=" + o.FlapOn.String() + "/" + o.FlapOff.String()
	}
	return o.Kind
}

// OpsHelp lists the fault operations.
const OpsHelp = "down | up | blackhole | loss=P (0<P<=1, or N%) | flap=ON/OFF (durations, e.g. 50ms/50ms) | hang (switch) | restart (switch: SIGKILL mrc-switchd, start it again) | clear"

// ParseOp parses a fault operation.
func ParseOp(s string) (Op, error) {
	k, v, hasV := strings.Cut(s, "=")
	switch {
	case !hasV && (k == "down" || k == "up" || k == "blackhole" || k == "hang" || k == "restart" || k == "clear"):
		return Op{Kind: k}, nil
	case hasV && k == "loss":
		f, err := probability.Parse(v)
		if err != nil || f == 0 {
			return Op{}, fmt.Errorf("fault %q: loss must be a probability in (0, 1] or a percentage, e.g. loss=0.01 or loss=1%%", s)
		}
		return Op{Kind: "loss", Loss: f}, nil
	case hasV && k == "flap":
		a, b, ok := strings.Cut(v, "/")
		on, err1 := time.ParseDuration(a)
		off, err2 := time.ParseDuration(b)
		if !ok || err1 != nil || err2 != nil || on <= 0 || off <= 0 {
			return Op{}, fmt.Errorf("fault %q: flap needs ON/OFF durations, e.g. flap=100ms/50ms", s)
		}
		return Op{Kind: "flap", FlapOn: on, FlapOff: off}, nil
	}
	return Op{}, fmt.Errorf("unknown fault %q: allowed %s", s, OpsHelp)
}

// SwitchControl is how faults and readiness reach a running mrc-switchd.
type SwitchControl interface {
	// Ready returns nil once the switch has attached and answers.
	Ready(ctx context.Context, s *plan.Switch) error
	// PortFault applies op (down, up, blackhole, loss, flap, clear) to a port.
	PortFault(ctx context.Context, s *plan.Switch, port string, op Op) error
	// SwitchFault applies op to the whole switch: hang, or down/up/blackhole/
	// loss/flap/clear on every port.
	SwitchFault(ctx context.Context, s *plan.Switch, op Op) error
}

// SwitchdCtl talks to mrc-switchd over its control socket (switchd/ctl).
type SwitchdCtl struct{}

// Ready implements SwitchControl: the daemon answers and says ready.
func (SwitchdCtl) Ready(ctx context.Context, s *plan.Switch) error {
	c, err := ctl.Dial(ctx, s.CtlSock)
	if err != nil {
		return err
	}
	defer c.Close()
	r, err := c.Ready(ctx)
	if err != nil {
		return err
	}
	if !r.Ready {
		return fmt.Errorf("mrc-switchd %s answers but is not ready", s.Name)
	}
	return nil
}

// PortFault implements SwitchControl.
func (SwitchdCtl) PortFault(ctx context.Context, s *plan.Switch, port string, op Op) error {
	return setFault(ctx, s, ctlFault(port, op))
}

// SwitchFault implements SwitchControl.
func (SwitchdCtl) SwitchFault(ctx context.Context, s *plan.Switch, op Op) error {
	return setFault(ctx, s, ctlFault(ctl.TargetSwitch, op))
}

func ctlFault(target string, op Op) ctl.Fault {
	return ctl.Fault{Target: target, Action: op.Kind, Loss: op.Loss, FlapOnNS: int64(op.FlapOn), FlapOffNS: int64(op.FlapOff)}
}

func setFault(ctx context.Context, s *plan.Switch, f ctl.Fault) error {
	c, err := ctl.Dial(ctx, s.CtlSock)
	if err != nil {
		return err
	}
	defer c.Close()
	if err := c.SetFault(ctx, f); err != nil {
		return fmt.Errorf("switch %s: %w", s.Name, err)
	}
	return nil
}

// end is one side of a target: a switch port or a NIC (host) port.
type end struct {
	sw     *plan.Switch // nil for a host end
	ns     string
	ifname string
}

// resolve turns a target name into the ends it affects. Targets: a link
// (h0--p0-t0-0, p0-t0-0--p0-t1-1), a NIC port (h0:p0), a switch port
// (p0-t0-0:u1) or a switch (p0-t1-1).
func resolve(p *plan.Plan, target string) (ends []end, isSwitch *plan.Switch, err error) {
	endOf := func(e plan.End) end {
		return end{sw: p.Switch(e.Node), ns: e.NS, ifname: e.Ifname}
	}
	if l := p.Link(target); l != nil {
		if l.Kind == plan.LinkMgmt {
			return nil, nil, fmt.Errorf("fault %s: the management network takes no faults", target)
		}
		return []end{endOf(l.A), endOf(l.B)}, nil, nil
	}
	if s := p.Switch(target); s != nil {
		return nil, s, nil
	}
	if node, ifname, ok := strings.Cut(target, ":"); ok {
		for _, l := range p.Links {
			for _, e := range []plan.End{l.A, l.B} {
				if e.Node == node && e.Ifname == ifname && l.Kind != plan.LinkMgmt {
					return []end{endOf(e)}, nil, nil
				}
			}
		}
	}
	return nil, nil, fmt.Errorf("unknown fault target %q: name a link (e.g. %s), a NIC port (e.g. %s:%s), a switch port (e.g. %s:%s) or a switch (e.g. %s); `mrc-testbed plan` lists them",
		target, p.Links[0].Name, p.Hosts[0].Name, p.Hosts[0].Ports[0].Ifname, p.Switches[0].Name, p.Switches[0].Ports[0].Ifname, p.Switches[0].Name)
}

// Fault applies op to target in the run in dir and records it in the state.
//
// On switch ends faults go to mrc-switchd's port faults; on NIC (host) ends
// only down/up/clear exist and are `ip link set down/up` (so the NIC sees
// carrier loss). A link fault acts on both ends; down on a switch downs all
// its ports; hang stops a switch's data plane while mrc-switchd keeps
// answering. With the kernel dataplane only down/up/clear exist (link state).
func Fault(ctx context.Context, dir, target string, op Op, o Options) error {
	return Faults(ctx, dir, []FaultReq{{Target: target, Op: op}}, o)
}

// FaultReq is one fault of a batch.
type FaultReq struct {
	Target string
	Op     Op
}

// Faults applies several faults at once, in order, under one lock and one
// state write, as Fault does for one: for experiments whose faults share a
// time (mrc-lab). It stops at the first that fails; the ones before it stay
// applied and recorded.
func Faults(ctx context.Context, dir string, reqs []FaultReq, o Options) error {
	o.defaults()
	unlock, err := lock(dir)
	if err != nil {
		return err
	}
	defer unlock()
	st, err := LoadState(dir)
	if err != nil {
		return fmt.Errorf("run %s: %w", dir, err)
	}
	p, err := LoadPlan(dir)
	if err != nil {
		return err
	}
	for _, r := range reqs {
		if err = applyFault(ctx, p, st, r.Target, r.Op, o); err != nil {
			break
		}
	}
	return errors.Join(err, st.Save())
}

// misfit says why op cannot apply to a resolved target on this plan (nil:
// it can): the one rule a fault and ValidateFault follow.
func misfit(p *plan.Plan, target string, op Op, ends []end, sw *plan.Switch) error {
	xdp := p.Dataplane == topo.DataplaneXDP
	basic := op.Kind == "down" || op.Kind == "up" || op.Kind == "clear"
	switch {
	case op.Kind == "restart" && (sw == nil || !xdp):
		return errors.New("restart applies to a switch run by mrc-switchd (xdp dataplane), not a link, port or kernel switch")
	case op.Kind == "hang" && sw == nil:
		return errors.New("hang applies to a switch, not a link or port")
	case !basic && !xdp:
		return fmt.Errorf("%s needs the xdp dataplane (kernel switches take down|up|clear)", op.Kind)
	case sw == nil && !basic && !slices.ContainsFunc(ends, func(e end) bool { return e.sw != nil }):
		return fmt.Errorf("a NIC port takes down|up|clear only; put %s on its link (e.g. %s) to apply it at the T0 end", op, linkOf(p, target))
	}
	return nil
}

// ValidateFault says why op cannot apply to target on plan p, as a fault
// would refuse it, without applying anything (nil: it can). An op the
// target cannot take is the reason alone; the caller names the fault
// (mrc-lab check: file, line and field).
func ValidateFault(p *plan.Plan, target string, op Op) error {
	ends, sw, err := resolve(p, target)
	if err != nil {
		return err
	}
	return misfit(p, target, op, ends, sw)
}

func applyFault(ctx context.Context, p *plan.Plan, st *State, target string, op Op, o Options) error {
	ends, sw, err := resolve(p, target)
	if err != nil {
		return err
	}
	if err := misfit(p, target, op, ends, sw); err != nil {
		return fmt.Errorf("fault %s %s: %w", target, op, err)
	}
	switch {
	case op.Kind == "restart":
		// Not a lasting fault: nothing to record in the state's faults.
		return restartSwitchd(ctx, p, st, sw, o)
	case sw != nil && p.Dataplane == topo.DataplaneXDP:
		// mrc-switchd's "switch" target covers every port, and hang.
		if err := o.Switchd.SwitchFault(ctx, sw, op); err != nil {
			return fmt.Errorf("fault %s %s: %w", target, op, err)
		}
	case sw != nil:
		for _, pt := range sw.Ports {
			ends = append(ends, end{sw: sw, ns: sw.NS, ifname: pt.Ifname})
		}
	}
	for _, e := range ends {
		if err := applyEnd(ctx, p, e, op, o); err != nil {
			return fmt.Errorf("fault %s %s: %w", target, op, err)
		}
	}
	if p.Dataplane == topo.DataplaneKernel && (op.Kind == "up" || op.Kind == "clear") {
		// A link down flushed the kernel routes through it: put them back.
		if err := restoreKernelRoutes(p, ends); err != nil {
			return err
		}
	}
	st.SetFault(target, op.String(), time.Now().UTC())
	return nil
}

func applyEnd(ctx context.Context, p *plan.Plan, e end, op Op, o Options) error {
	if e.sw == nil || p.Dataplane == topo.DataplaneKernel {
		switch op.Kind {
		case "down":
			return netns.SetLinkUp(e.ns, e.ifname, false)
		case "up", "clear":
			return netns.SetLinkUp(e.ns, e.ifname, true)
		}
		if e.sw == nil {
			// The switch end of the same link carries the fault (if the
			// target is a link); a bare NIC port cannot.
			return nil
		}
		return fmt.Errorf("%s needs the xdp dataplane (kernel switches take down|up|clear)", op.Kind)
	}
	return o.Switchd.PortFault(ctx, e.sw, e.ifname, op)
}

func restoreKernelRoutes(p *plan.Plan, ends []end) error {
	nss := map[string]bool{}
	for _, e := range ends {
		nss[e.ns] = true
		// The far end's routes went too (carrier loss).
		for _, l := range p.Links {
			if l.A.NS == e.ns && l.A.Ifname == e.ifname {
				nss[l.B.NS] = true
			}
			if l.B.NS == e.ns && l.B.Ifname == e.ifname {
				nss[l.A.NS] = true
			}
		}
	}
	var errs []error
	for ns := range nss {
		h, err := netns.Handle(ns)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for i := range p.Switches {
			if p.Switches[i].NS == ns {
				errs = append(errs, netns.KernelFIB(h, p, &p.Switches[i]))
			}
		}
		for i := range p.Hosts {
			if p.Hosts[i].NS == ns {
				errs = append(errs, netns.HostL3(h, p, &p.Hosts[i]))
			}
		}
		h.Close()
	}
	return errors.Join(errs...)
}

// Exec runs argv inside a node's namespace (host, switch or "mgmt") with the
// given stdio and returns its exit error. On a host the command also gets
// HostEnv (its NIC's device socket as MRC_DEVICE), so that the verbs tools
// find the host's mrc-nicd as they do in a group. When ctx ends (mrc-testbed
// got SIGINT/SIGTERM) the command gets SIGTERM, and SIGKILL 5 s later, so that
// killing `mrc-testbed exec` never leaves a daemon running in a namespace.
func Exec(ctx context.Context, dir, node string, argv []string, stdin *os.File, stdout, stderr *os.File) error {
	p, err := LoadPlan(dir)
	if err != nil {
		return err
	}
	ns := ""
	var env []string
	switch {
	case node == "mgmt":
		ns = p.Mgmt.NS
	case p.Host(node) != nil:
		ns = p.Host(node).NS
		env = HostEnv(p, p.Host(node))
	case p.Switch(node) != nil:
		ns = p.Switch(node).NS
	default:
		return fmt.Errorf("exec: unknown node %q (hosts h0..h%d, switches like %s, or mgmt)", node, len(p.Hosts)-1, p.Switches[0].Name)
	}
	if len(argv) == 0 {
		return errors.New("exec: no command given (mrc-testbed exec HOST -- CMD ...)")
	}
	cmd := stoppable(ctx, argv)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, stdout, stderr
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	if err := netns.Do(ns, cmd.Start); err != nil {
		return err
	}
	return waitStoppable(ctx, cmd)
}

// stoppable is argv as a command that gets SIGTERM when ctx ends, and
// SIGKILL 5 s later.
func stoppable(ctx context.Context, argv []string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 5 * time.Second
	return cmd
}

// waitStoppable waits for a stoppable command and returns its own exit
// status: once ctx has ended, exec's Wait reports the context's error even
// when the command caught the signal and exited 0 (mrc-write-bw prints
// what it completed and exits 0 on SIGINT), and `mrc-testbed exec` then
// said "context canceled" and exited 1.
func waitStoppable(ctx context.Context, cmd *exec.Cmd) error {
	err := cmd.Wait()
	if ctx.Err() == nil || cmd.ProcessState == nil || !errors.Is(err, ctx.Err()) {
		return err
	}
	if cmd.ProcessState.Success() {
		return nil
	}
	return &exec.ExitError{ProcessState: cmd.ProcessState}
}

// linkOf names the link a NIC port target belongs to (for error messages).
func linkOf(p *plan.Plan, target string) string {
	node, ifname, _ := strings.Cut(target, ":")
	for _, l := range p.Links {
		if l.A.Node == node && l.A.Ifname == ifname {
			return l.Name
		}
	}
	return "the link"
}

// restartSwitchd is the "reboot" of a switch with no coordination: it
// SIGKILLs the switch's mrc-switchd (no clean shutdown, as a crash) and starts
// it again exactly as Up does, then waits until it answers. The XDP program
// and its maps stay pinned in bpffs while no daemon runs, so forwarding
// continues, and the new daemon adopts them (docs/switchd.md), faults
// included: a hang survives a restart until it is cleared.
func restartSwitchd(ctx context.Context, p *plan.Plan, st *State, sw *plan.Switch, o Options) error {
	bin := FindBin(o.BinDir, "mrc-switchd")
	if bin == "" {
		return ErrNoSwitchd
	}
	idx := -1
	for i, pr := range st.Processes {
		if pr.Role == "mrc-switchd" && pr.Name == sw.Name {
			idx = i
		}
	}
	if idx < 0 {
		return fmt.Errorf("restart %s: the run's state records no mrc-switchd for it (was the testbed brought up by this version?)", sw.Name)
	}
	old := st.Processes[idx]
	if old.Alive() {
		if err := syscall.Kill(old.PID, syscall.SIGKILL); err != nil {
			return fmt.Errorf("restart %s: kill mrc-switchd pid %d: %w", sw.Name, old.PID, err)
		}
		deadline := time.Now().Add(5 * time.Second)
		for old.Alive() {
			if time.Now().After(deadline) {
				return fmt.Errorf("restart %s: mrc-switchd pid %d still alive 5 s after SIGKILL", sw.Name, old.PID)
			}
			time.Sleep(5 * time.Millisecond) // no event for another process's exit
		}
	}
	os.Remove(sw.CtlSock)
	pr, err := Launch(sw.NS, sw.Name, "mrc-switchd", bin, SwitchdArgs(sw), sw.Log)
	if err != nil {
		return fmt.Errorf("restart %s: %w", sw.Name, err)
	}
	st.Processes[idx] = *pr
	o.Log.Info("restarted mrc-switchd", "switch", sw.Name, "old_pid", old.PID, "pid", pr.PID)
	cctx, cancel := context.WithTimeout(ctx, o.ReadyTimeout)
	defer cancel()
	return waitReady(cctx, pr, func(ctx context.Context) error { return o.Switchd.Ready(ctx, sw) })
}
