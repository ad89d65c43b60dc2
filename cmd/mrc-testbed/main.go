// Command mrc-testbed builds softmrc testbeds: multi-plane Clos fabrics of
// XDP switches in network namespaces, from a topology file or a preset, and
// breaks them on demand. See docs/testbed.md.
//
//	mrc-testbed up FILE | up --preset NAME [--prefix P] [--dir RUNDIR] [--bin DIR]
//	mrc-testbed plan FILE | plan --preset NAME [--prefix P]
//	mrc-testbed status [--dir RUNDIR | --prefix P] [--json]
//	mrc-testbed fault [--dir RUNDIR | --prefix P] TARGET down|up|blackhole|loss=P|flap=ON/OFF|hang|clear
//	mrc-testbed exec [--dir RUNDIR | --prefix P] NODE -- CMD...
//	mrc-testbed exec [--dir RUNDIR | --prefix P] h0,h1,... | hosts -- CMD...
//	mrc-testbed down [--dir RUNDIR | --prefix P]
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/softmrc/softmrc/internal/cliargs"
	nicconfig "github.com/softmrc/softmrc/nic/config"
	"github.com/softmrc/softmrc/testbed/plan"
	"github.com/softmrc/softmrc/testbed/run"
	"github.com/softmrc/softmrc/testbed/topo"
)

const usage = `usage:
  mrc-testbed up FILE | up --preset NAME [--prefix P] [--dir RUNDIR] [--bin DIR] [--mode srv6|ecmp] [--dataplane xdp|kernel]
                [--roce-mtu 1024|2048|4096] [--mtu BYTES] [--nics] [--nic-threads N]
  mrc-testbed plan FILE | plan --preset NAME [--prefix P] [--dir RUNDIR]
  mrc-testbed status [--dir RUNDIR | --prefix P] [--json]
  mrc-testbed fault [--dir RUNDIR | --prefix P] TARGET OP
      OP: ` + run.OpsHelp + `
      TARGET: a link (h0--p0-t0-0, p0-t0-0--p0-t1-1), a NIC port (h0:p0),
              a switch port (p0-t0-0:u1) or a switch (p0-t1-1)
  mrc-testbed exec [--dir RUNDIR | --prefix P] NODE -- CMD...
      NODE: a host (h0), a switch (p0-t1-1) or mgmt; in a host CMD gets
      MRC_DEVICE=<its NIC socket>, MRC_NIC_CONFIG=<its NIC config>, MRC_HOST and
      MRC_HOSTS=h0=<mgmt addr>,..., so the verbs tools need no -d and take host
      names: exec h0 -- mrc-write-bw h3 (and, on a testbed up without --nics,
      exec h0 -- mrc-write-lat --in-process h3)
  mrc-testbed exec [--dir RUNDIR | --prefix P] h0,h1,... | hosts -- CMD...
      a group: CMD runs in every listed host (hosts: all) at once, member i
      with MRC_RANK=i MRC_NRANKS=n MRC_RENDEZVOUS=<first host's mgmt address>
      MRC_DEVICE=<its NIC socket> MRC_HOST MRC_HOSTS; output lines are prefixed "HOST: "
  mrc-testbed down [--dir RUNDIR | --prefix P]
presets: pair, clos-2p, clos-4p, clos-8p
`

func main() {
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	slog.SetDefault(log)
	if len(os.Args) < 2 {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := dispatch(ctx, os.Args[1], os.Args[2:], log)
	os.Exit(exitCode(os.Args[1], err, os.Stderr))
}

// exitCode reports err on w and returns the exit status: a command's own
// (exec), silently when the error is just its exit; a group's failure
// ("h1: exit status 3") is printed, since it names the members that failed.
func exitCode(cmd string, err error, w io.Writer) int {
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		if err != error(ee) {
			fmt.Fprintf(w, "mrc-testbed %s: %v\n", cmd, err)
		}
		return ee.ExitCode()
	case errors.Is(err, flag.ErrHelp):
		return 0
	case err != nil:
		fmt.Fprintf(w, "mrc-testbed %s: %v\n", cmd, err)
		return 1
	}
	return 0
}

type flags struct {
	fs        *flag.FlagSet
	preset    *string
	prefix    *string
	dir       *string
	bin       *string
	mode      *string
	dataplane *string
	roceMTU   *int
	mtu       *int
	threads   *int
	probes    *time.Duration
	nics      *bool
	json      *bool
}

func newFlags(cmd string) *flags {
	fs := flag.NewFlagSet(cmd, flag.ContinueOnError)
	fs.Usage = func() { fmt.Fprint(os.Stderr, usage) }
	return &flags{
		fs:        fs,
		preset:    fs.String("preset", "", "built-in topology: pair, clos-2p, clos-4p, clos-8p"),
		prefix:    fs.String("prefix", "", "run prefix (names every namespace and pin; overrides the file)"),
		dir:       fs.String("dir", "", "run directory (default "+run.DefaultRoot+"/PREFIX)"),
		bin:       fs.String("bin", "", "directory holding mrc-switchd and mrc-nicd (default: beside mrc-testbed, then $MRC_BIN, then PATH)"),
		mode:      fs.String("mode", "", "override the topology's forwarding mode: srv6 | ecmp"),
		dataplane: fs.String("dataplane", "", "override the topology's dataplane: xdp | kernel"),
		roceMTU:   fs.Int("roce-mtu", 0, "override the NICs' RoCE MTU: 1024 | 2048 | 4096 (the links' MTU follows unless given)"),
		mtu:       fs.Int("mtu", 0, "override the links' (veth) MTU in bytes"),
		threads:   fs.Int("nic-threads", 0, fmt.Sprintf("override the topology's nic_threads: every mrc-nicd's engine threads, 1..%d (each NIC-T0 link gets that many queues)", nicconfig.MaxThreads)),
		probes:    fs.Duration("nic-path-probes", 0, "override the topology's nic_path_probes: every mrc-nicd's path-probe interval (e.g. 5ms; what mrc-mapper map --dir reads; srv6 only)"),
		nics:      fs.Bool("nics", false, "start mrc-nicd in every host namespace (the topology's nics: true; the presets leave it false)"),
		json:      fs.Bool("json", false, "machine-readable output (status)"),
	}
}

// parse accepts flags anywhere before "--" and returns the positionals and
// everything after "--".
func (f *flags) parse(args []string) (pos, rest []string, err error) {
	for i, a := range args {
		if a == "--" {
			args, rest = args[:i], args[i+1:]
			break
		}
	}
	pos, err = cliargs.Parse(f.fs, args)
	return pos, rest, err
}

func (f *flags) topology(pos []string) (*topo.Topology, error) {
	var t *topo.Topology
	var err error
	switch {
	case *f.preset != "" && len(pos) > 0:
		return nil, errors.New("give a topology FILE or --preset, not both")
	case *f.preset != "":
		t, err = topo.Preset(*f.preset)
	case len(pos) == 1:
		t, err = topo.Load(pos[0])
	default:
		return nil, errors.New("give one topology FILE or --preset NAME")
	}
	if err != nil {
		return nil, err
	}
	if *f.mode != "" {
		t.Mode = topo.Mode(*f.mode)
	}
	if *f.dataplane != "" {
		t.Dataplane = topo.Dataplane(*f.dataplane)
	}
	if *f.mtu != 0 {
		t.SetMTU(*f.mtu)
	}
	if *f.roceMTU != 0 {
		t.SetRoCEMTU(*f.roceMTU)
	}
	if *f.nics {
		t.NICs = true
	}
	if *f.probes != 0 {
		t.NICPathProbes = *f.probes
	}
	if n := *f.threads; n != 0 {
		if n < 1 || n > nicconfig.MaxThreads {
			return nil, fmt.Errorf("--nic-threads %d: want 1..%d", n, nicconfig.MaxThreads)
		}
		t.NICThreads = n
	}
	return t, nil
}

func (f *flags) plan(pos []string) (*plan.Plan, error) {
	t, err := f.topology(pos)
	if err != nil {
		return nil, err
	}
	prefix := *f.prefix
	if prefix == "" {
		prefix = t.Prefix
	}
	dir := *f.dir
	if dir == "" {
		dir = filepath.Join(run.DefaultRoot, prefix)
	}
	if dir, err = filepath.Abs(dir); err != nil {
		return nil, err
	}
	return plan.Build(t, plan.Options{Prefix: prefix, RunDir: dir})
}

// runDir finds the run a command acts on.
func (f *flags) runDir() (string, error) {
	if *f.dir != "" {
		return filepath.Abs(*f.dir)
	}
	if *f.prefix != "" {
		return filepath.Join(run.DefaultRoot, *f.prefix), nil
	}
	runs := run.Runs(run.DefaultRoot)
	switch len(runs) {
	case 1:
		return runs[0], nil
	case 0:
		return "", fmt.Errorf("no run under %s: give --dir RUNDIR or --prefix P", run.DefaultRoot)
	}
	return "", fmt.Errorf("several runs under %s (%s): give --dir or --prefix", run.DefaultRoot, strings.Join(runs, ", "))
}

func dispatch(ctx context.Context, cmd string, args []string, log *slog.Logger) error {
	f := newFlags(cmd)
	pos, rest, err := f.parse(args)
	if err != nil {
		return err
	}
	switch cmd {
	case "plan":
		p, err := f.plan(pos)
		if err != nil {
			return err
		}
		b, err := p.YAML()
		if err != nil {
			return err
		}
		_, err = os.Stdout.Write(b)
		return err
	case "up":
		p, err := f.plan(pos)
		if err != nil {
			return err
		}
		st, err := run.Up(ctx, p, run.Options{BinDir: *f.bin, Log: log})
		if err != nil {
			if _, serr := os.Stat(run.StatePath(p.RunDir)); serr == nil {
				err = fmt.Errorf("%w\n(the partial run is recorded: logs in %s/log; `mrc-testbed down --dir %s` removes it, `up` again rebuilds it)", err, p.RunDir, p.RunDir)
			}
			return err
		}
		fmt.Printf("up: %s (%d namespaces, %d links, %d daemons) in %s\n", p.Prefix, len(st.Namespaces), len(st.Veths), len(st.Processes), st.RunDir)
		return nil
	case "down":
		dir, err := f.runDir()
		if err != nil {
			return err
		}
		return run.Down(dir, log)
	case "status":
		dir, err := f.runDir()
		if err != nil {
			return err
		}
		s, err := run.GetStatus(dir)
		if err != nil {
			return err
		}
		if *f.json {
			e := json.NewEncoder(os.Stdout)
			e.SetIndent("", "  ")
			return e.Encode(s)
		}
		s.Print(os.Stdout)
		return nil
	case "fault":
		if len(pos) != 2 {
			return errors.New("fault needs TARGET OP, e.g. `mrc-testbed fault p0-t0-0--p0-t1-1 blackhole`")
		}
		dir, err := f.runDir()
		if err != nil {
			return err
		}
		op, err := run.ParseOp(pos[1])
		if err != nil {
			return err
		}
		return run.Fault(ctx, dir, pos[0], op, run.Options{BinDir: *f.bin, Log: log})
	case "exec":
		if len(pos) != 1 || len(rest) == 0 {
			return errors.New("exec needs NODE -- CMD..., e.g. `mrc-testbed exec h0 -- ip -6 addr`")
		}
		dir, err := f.runDir()
		if err != nil {
			return err
		}
		if run.IsGroup(pos[0]) {
			return run.ExecGroup(ctx, dir, pos[0], rest, os.Stdout, os.Stderr)
		}
		return run.Exec(ctx, dir, pos[0], rest, os.Stdin, os.Stdout, os.Stderr)
	case "help", "-h", "--help":
		fmt.Print(usage)
		return nil
	}
	fmt.Fprint(os.Stderr, usage)
	return fmt.Errorf("unknown command %q", cmd)
}
