// Command mrc-nicd is the softmrc soft NIC: one AF_XDP port per plane, the
// MRC engine on a locked OS thread, the verbs device socket for
// applications (nic/verbs, mrc-write-bw, mrcctl) and Prometheus metrics.
//
//	mrc-nicd -config /run/mrc/tb/h0.nic.yaml [-cpuprofile h0.pprof]
//
// SIGINT or SIGTERM shut it down cleanly: applications get a "device gone"
// error, the XDP programs detach, the sockets close.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"runtime"
	"runtime/pprof"
	"strings"
	"syscall"

	"github.com/softmrc/softmrc/nic/config"
	"github.com/softmrc/softmrc/nic/daemon"
)

func main() {
	cfgPath := flag.String("config", "", "the NIC config file (nic/config YAML; required)")
	logLevel := flag.String("log-level", "", "override the config's log_level: debug, info, warn, error")
	jsonLogs := flag.Bool("log-json", false, "log as JSON lines")
	check := flag.Bool("check", false, "validate the config and exit")
	capFile := flag.String("capture", "", "write every frame sent and received to this pcap file (AF_XDP bypasses tcpdump)")
	capPort := flag.String("capture-port", "", "with -capture: only this port (name or interface)")
	capMax := flag.Int("capture-max", 100000, "with -capture: stop after this many frames")
	cpuProf := flag.String("cpuprofile", "", "write a Go CPU profile of the daemon to this file until it stops (go tool pprof)")
	busyPoll := flag.Duration("busy-poll", 0, fmt.Sprintf("override the config's busy_poll: keep polling this long after the last work (e.g. 50us; 0 = sleep at once; without the flag or the config's busy_poll: %v)", config.DefaultBusyPoll))
	kickThread := flag.Bool("kick-thread", false, "override the config's kick_thread: each port's transmit kicks on a thread of its own (-kick-thread=false turns it off)")
	busyAlways := flag.Bool("busy-poll-always", false, "override the config's busy_poll_always: spin for busy_poll even while the run loop waits for a CPU (by default it stops spinning then)")
	roceMTU := flag.Int("mtu", 0, "override the config's RoCE MTU (payload bytes per packet): 1024, 2048 or 4096; the ports' interface MTU must carry it (4096: 4228 in srv6 mode)")
	stallClock := flag.Bool("stall-clock", false, "override the config's stall_clock: time the loop was kept off the CPU with ACKs waiting does not count against the engine's timers (docs/nic.md)")
	loopNice := flag.Int("loop-nice", 0, "override the config's loop_nice: the run loop thread's nice value, -20..19 (below 0 needs CAP_SYS_NICE)")
	threads := flag.Int("threads", 0, fmt.Sprintf("override the config's threads: engine threads, 1..%d; thread i has its own AF_XDP socket on queue q+i of every port (the ports need that many queues) and owns the QP numbers n with n mod N = i, each new QP going to the thread with the fewest; 1 = one thread", config.MaxThreads))
	showSock := flag.Bool("show-socket", false, "print the config's device socket path and exit (scripts)")
	flag.Parse()
	if *cfgPath == "" {
		fmt.Fprintln(os.Stderr, "mrc-nicd: -config is required (the testbed writes one per host: <run dir>/<host>.nic.yaml)")
		os.Exit(2)
	}
	cfg, err := config.Load(*cfgPath)
	if err != nil {
		fmt.Fprintln(os.Stderr, "mrc-nicd:", err)
		os.Exit(2)
	}
	if *roceMTU != 0 {
		cfg.MTU = *roceMTU
		if err := cfg.Validate(); err != nil {
			fmt.Fprintln(os.Stderr, "mrc-nicd: -mtu:", err)
			os.Exit(2)
		}
	}
	if *threads != 0 {
		cfg.Threads = *threads
		if err := cfg.Validate(); err != nil {
			fmt.Fprintln(os.Stderr, "mrc-nicd: -threads:", err)
			os.Exit(2)
		}
	}
	if *showSock {
		fmt.Println(cfg.DeviceSocket)
		return
	}
	if *check {
		fmt.Println("mrc-nicd: config OK:", *cfgPath)
		return
	}
	if *logLevel != "" {
		cfg.LogLevel = *logLevel
	}
	flag.Visit(func(f *flag.Flag) {
		if f.Name == "busy-poll" {
			cfg.BusyPoll = busyPoll
		}
		if f.Name == "stall-clock" {
			cfg.StallClock = *stallClock
		}
		if f.Name == "kick-thread" {
			cfg.KickThread = *kickThread
		}
		if f.Name == "busy-poll-always" {
			cfg.BusyPollAlways = *busyAlways
		}
		if f.Name == "loop-nice" {
			cfg.LoopNice = *loopNice
		}
	})
	var level slog.Level
	if err := level.UnmarshalText([]byte(strings.ToUpper(cfg.LogLevel))); err != nil {
		fmt.Fprintln(os.Stderr, "mrc-nicd: log level:", err)
		os.Exit(2)
	}
	opts := &slog.HandlerOptions{Level: level}
	var h slog.Handler = slog.NewTextHandler(os.Stderr, opts)
	if *jsonLogs {
		h = slog.NewJSONHandler(os.Stderr, opts)
	}
	log := slog.New(h).With("host", cfg.Host)
	slog.SetDefault(log)
	// Each engine thread's loop keeps its P through short sleeps when the
	// program has one P more than it has threads (nic/daemon, heldPoll):
	// give it that, unless GOMAXPROCS was set by hand. Ps above the CPU
	// count cost nothing here: the loops are locked to their OS threads
	// and mostly asleep, and the kernel shares the CPUs among them.
	if n := cfg.ThreadCount(); n > 1 && os.Getenv("GOMAXPROCS") == "" && runtime.GOMAXPROCS(0) <= n {
		log.Info("GOMAXPROCS raised for the engine threads", "from", runtime.GOMAXPROCS(0), "to", n+1)
		runtime.GOMAXPROCS(n + 1)
	}
	d, err := daemon.New(daemon.Options{Config: cfg, Logger: log, Capture: *capFile, CapturePort: *capPort, CaptureMax: *capMax})
	if err != nil {
		log.Error("start failed", "err", err)
		os.Exit(1)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if *cpuProf != "" {
		f, err := os.Create(*cpuProf)
		if err != nil {
			log.Error("cpu profile", "err", err)
			os.Exit(2)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			log.Error("cpu profile", "err", err)
			os.Exit(2)
		}
		defer f.Close()
		defer pprof.StopCPUProfile()
	}
	if err := d.Run(ctx); err != nil {
		log.Error("run failed", "err", err)
		os.Exit(1)
	}
}
