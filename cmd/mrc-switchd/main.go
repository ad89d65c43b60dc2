// Command mrc-switchd runs one softmrc XDP SRv6 micro-SID switch and
// controls a running one.
//
//	mrc-switchd [run] -c FILE           run the switch described by FILE
//	mrc-switchd check -c FILE           validate FILE and print a summary
//	mrc-switchd fault TARGET SPEC       TARGET: port name or "switch";
//	                                    SPEC: down|up|blackhole|loss=P|flap=ON/OFF|hang|clear
//	mrc-switchd stats [--json]          per-port counters by reason, faults
//	mrc-switchd routes [--json]         the FIB as the data plane holds it
//	mrc-switchd wait [--timeout D]      wait until the switch is ready
//	mrc-switchd watch [--interval 10ms] [--count N] [--duration 10s]
//	                                    per-port telemetry as JSON Lines
//	mrc-switchd detach                  remove programs, links and pins; stop
//
// Control commands find the daemon with --ctl PATH, --name NAME
// (/run/softmrc/NAME.sock) or -c FILE (the file's control_socket).
// See docs/switchd.md.
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
	"os/signal"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/softmrc/softmrc/internal/telemetry"
	"github.com/softmrc/softmrc/internal/telemetry/watch"
	"github.com/softmrc/softmrc/switchd/config"
	"github.com/softmrc/softmrc/switchd/ctl"
	"github.com/softmrc/softmrc/switchd/daemon"
	"github.com/softmrc/softmrc/switchd/dataplane"
)

const usage = `usage:
  mrc-switchd [run] -c FILE [--attach auto|native|generic] [--log-level L] [--log-json]
  mrc-switchd check -c FILE
  mrc-switchd fault  [CTL] TARGET down|up|blackhole|loss=P|flap=ON/OFF|hang|clear
  mrc-switchd stats  [CTL] [--json]
  mrc-switchd routes [CTL] [--json]
  mrc-switchd wait   [CTL] [--timeout 10s]
  mrc-switchd watch  [CTL] [--interval 10ms] [--count N] [--duration 10s]
      one JSON Lines sample per port every interval (1ms..10s): tx/rx bytes,
      drops, ECN marks, trims, queue depth (docs/telemetry.md); stops after N
      samples or the duration (default 10s; both 0: until Ctrl-C)
  mrc-switchd detach [CTL]
CTL selects the daemon: --ctl PATH | --name SWITCH | -c FILE (default: --name from -c)
TARGET is a port name or "switch"; P is a probability (0.01) or a percentage (1%);
ON/OFF are durations (200ms/50ms). See docs/switchd.md.
`

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	cmd := "run"
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		cmd, args = args[0], args[1:]
	}
	var err error
	switch cmd {
	case "run":
		err = cmdRun(args, stderr)
	case "check":
		err = cmdCheck(args, stdout, stderr)
	case "fault", "stats", "routes", "wait", "detach", "watch":
		err = cmdControl(cmd, args, stdout, stderr)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return 0
	default:
		fmt.Fprintf(stderr, "mrc-switchd: unknown command %q\n%s", cmd, usage)
		return 2
	}
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		var ue usageError
		if errors.As(err, &ue) {
			fmt.Fprintf(stderr, "mrc-switchd %s: %v\n%s", cmd, err, usage)
			return 2
		}
		fmt.Fprintf(stderr, "mrc-switchd %s: %v\n", cmd, err)
		return 1
	}
	return 0
}

type usageError struct{ error }

func newFlags(name string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("mrc-switchd "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, usage) }
	return fs
}

func cmdRun(args []string, stderr io.Writer) error {
	fs := newFlags("run", stderr)
	file := fs.String("c", "", "config file (YAML)")
	attach := fs.String("attach", "auto", "XDP attach mode: auto (native, else generic), native or generic")
	level := fs.String("log-level", "info", "log level: debug, info, warn or error")
	jsonLog := fs.Bool("log-json", false, "log JSON lines instead of text")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *file == "" || fs.NArg() > 0 {
		return usageError{errors.New("want -c FILE and no other arguments")}
	}
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(*level)); err != nil {
		return usageError{fmt.Errorf("--log-level %q: want debug, info, warn or error", *level)}
	}
	var am dataplane.AttachMode
	switch *attach {
	case "auto":
		am = dataplane.AttachNativeOrGeneric
	case "native":
		am = dataplane.AttachNative
	case "generic":
		am = dataplane.AttachGeneric
	default:
		return usageError{fmt.Errorf("--attach %q: want auto, native or generic", *attach)}
	}
	hopts := &slog.HandlerOptions{Level: lv}
	var h slog.Handler = slog.NewTextHandler(stderr, hopts)
	if *jsonLog {
		h = slog.NewJSONHandler(stderr, hopts)
	}
	log := slog.New(h)

	cfg, err := config.Load(*file)
	if err != nil {
		return err
	}
	d, err := daemon.New(daemon.Options{Config: cfg, Logger: log, AttachMode: am})
	if err != nil {
		return err
	}
	// SIGTERM/SIGINT stop the daemon; the pinned switch keeps forwarding.
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	log.Info("starting", "config", *file, "summary", cfg.String(), "pid", os.Getpid())
	return d.Run(ctx)
}

func cmdCheck(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("check", stderr)
	file := fs.String("c", "", "config file (YAML)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *file == "" || fs.NArg() > 0 {
		return usageError{errors.New("want -c FILE")}
	}
	cfg, err := config.Load(*file)
	if err != nil {
		return err
	}
	if err := daemon.CheckLimits(cfg); err != nil {
		return fmt.Errorf("%s: %w", *file, err)
	}
	fmt.Fprintf(stdout, "%s: ok: %s\n", *file, cfg)
	return nil
}

func cmdControl(cmd string, args []string, stdout, stderr io.Writer) error {
	fs := newFlags(cmd, stderr)
	ctlPath := fs.String("ctl", "", "control socket path")
	name := fs.String("name", "", "switch name (control socket /run/softmrc/NAME.sock)")
	file := fs.String("c", "", "config file whose control_socket to use")
	asJSON := fs.Bool("json", false, "print JSON (stats, routes)")
	timeout := fs.Duration("timeout", 10*time.Second, "how long to wait for the daemon")
	wo := watch.Options{Stream: watch.Switch}
	if cmd == "watch" {
		fs.DurationVar(&wo.Interval, "interval", telemetry.DefaultInterval, "sampling interval (1ms to 10s)")
		fs.IntVar(&wo.Count, "count", 0, "stop after this many samples (0: no limit)")
		fs.DurationVar(&wo.Duration, "duration", 10*time.Second, "stop after this long (0: no limit; with --count 0, run until Ctrl-C)")
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	var cfg *config.Config
	path := *ctlPath
	switch {
	case path != "":
	case *name != "":
		path = fmt.Sprintf(config.DefaultControlFmt, *name)
	case *file != "":
		c, err := config.Load(*file)
		if err != nil {
			return err
		}
		cfg, path = c, c.Control
	default:
		return usageError{errors.New("which switch? give --ctl PATH, --name SWITCH or -c FILE")}
	}
	if cmd == "watch" {
		if fs.NArg() != 0 {
			return usageError{fmt.Errorf("watch takes no arguments, got %q", fs.Args())}
		}
		sctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		n, err := watch.Print(sctx, stdout, path, wo)
		if err == nil && n == 0 && sctx.Err() == nil {
			err = fmt.Errorf("no sample from %s within %v", path, wo.Duration)
		}
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()

	if cmd == "wait" {
		if fs.NArg() != 0 {
			return usageError{errors.New("wait takes no arguments")}
		}
		r, err := ctl.WaitReady(ctx, path)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "%s ready (pid %d, adopted=%v)\n", r.Switch, r.PID, r.Adopted)
		return nil
	}

	var f ctl.Fault
	switch cmd {
	case "fault":
		if fs.NArg() != 2 {
			return usageError{errors.New("want TARGET SPEC, e.g. 'fault up0 loss=0.01' or 'fault switch hang'")}
		}
		var err error
		if f, err = ctl.ParseFault(fs.Arg(0), fs.Arg(1)); err != nil {
			return err
		}
	default:
		if fs.NArg() != 0 {
			return usageError{fmt.Errorf("%s takes no arguments, got %q", cmd, fs.Args())}
		}
	}

	c, err := ctl.Dial(ctx, path)
	if err != nil {
		if cmd == "detach" && cfg != nil {
			// No daemon: remove what a killed one left pinned.
			return detachOffline(cfg, stdout, err)
		}
		return err
	}
	defer c.Close()
	switch cmd {
	case "fault":
		if err := c.SetFault(ctx, f); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "fault %s: ok\n", f)
	case "detach":
		if err := c.Detach(ctx); err != nil {
			return err
		}
		fmt.Fprintln(stdout, "detached")
	case "stats":
		st, err := c.Stats(ctx)
		if err != nil {
			return err
		}
		if *asJSON {
			return writeJSON(stdout, st)
		}
		printStats(stdout, st)
	case "routes":
		rs, err := c.Routes(ctx)
		if err != nil {
			return err
		}
		if *asJSON {
			return writeJSON(stdout, rs)
		}
		printRoutes(stdout, rs)
	}
	return nil
}

func detachOffline(cfg *config.Config, stdout io.Writer, dialErr error) error {
	if _, err := os.Stat(cfg.PinDir); errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("%w; and nothing is pinned in %s", dialErr, cfg.PinDir)
	}
	d, err := dataplane.Adopt(cfg.PinDir)
	if err != nil {
		return fmt.Errorf("daemon not running and pins in %s cannot be adopted (%v); remove them by hand: rm -r %s", cfg.PinDir, err, cfg.PinDir)
	}
	if err := d.Destroy(); err != nil {
		return fmt.Errorf("remove pins in %s: %w", cfg.PinDir, err)
	}
	fmt.Fprintf(stdout, "daemon not running; removed the pinned switch in %s\n", cfg.PinDir)
	return nil
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func printStats(w io.Writer, st *ctl.Stats) {
	state := "forwarding"
	if st.Hang {
		state = "HUNG"
	}
	fmt.Fprintf(w, "switch %s mode %s %s, up since %s, adopted=%v\n", st.Switch, st.Mode, state, st.Started.Format(time.RFC3339), st.Adopted)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "PORT\tIF\tROLE\tFAULT\tRX\tRX_BYTES\tTX\tTX_BYTES\tFWD\tPASS\tECN\tTRIM\tNO_ROUTE\tHOP_LIMIT\tFAULT_DROP\tBUFFER\tMALFORMED\tEND_CONT\t")
	row := func(name, ifn, role, fault string, c ctl.Counters) {
		d := c.Drops
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t\n",
			name, ifn, role, fault, c.RxPackets, c.RxBytes, c.TxPackets, c.TxBytes, c.Forwarded, c.Pass,
			c.ECNMarked, c.Trimmed, d.NoRoute, d.HopLimit, d.Fault, d.Buffer, d.Malformed, d.EndOfContainer)
	}
	for _, p := range st.Ports {
		row(p.Name, p.Interface, p.Role, p.Fault.String(), p.Counters)
	}
	row("(unmapped)", "-", "-", "-", st.Unmapped)
	tw.Flush()
}

func printRoutes(w io.Writer, rs []ctl.Route) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "PREFIX\tNEXT HOP")
	for _, r := range rs {
		if r.Group != "" {
			fmt.Fprintf(tw, "%s\tgroup %s [%s]\n", r.Prefix, r.Group, strings.Join(r.Ports, " "))
		} else {
			fmt.Fprintf(tw, "%s\tport %s\n", r.Prefix, r.Port)
		}
	}
	tw.Flush()
}
