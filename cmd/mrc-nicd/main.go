// Command mrc-nicd is the softmrc soft NIC: one AF_XDP port per plane, the
// MRC engine on a locked OS thread, the verbs device socket for
// applications (nic/verbs, mrc-write-bw, mrcctl) and Prometheus metrics.
//
//	mrc-nicd -config /run/mrc/tb/h0.nic.yaml
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
	showSock := flag.Bool("show-socket", false, "print the config's device socket path and exit (scripts)")
	flag.Parse()
	if *cfgPath == "" {
		fmt.Fprintln(os.Stderr, "mrc-nicd: -config is required (the testbed writes one per host: <run dir>/<host>.nic.yaml)")
		os.Exit(2)
	}
	cfg, err := config.LoadAny(*cfgPath)
	if err != nil {
		fmt.Fprintln(os.Stderr, "mrc-nicd:", err)
		os.Exit(2)
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
	d, err := daemon.New(daemon.Options{Config: cfg, Logger: log, Capture: *capFile, CapturePort: *capPort, CaptureMax: *capMax})
	if err != nil {
		log.Error("start failed", "err", err)
		os.Exit(1)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := d.Run(ctx); err != nil {
		log.Error("run failed", "err", err)
		os.Exit(1)
	}
}
