// Package inprocess runs a soft NIC inside the calling program: mrc-nicd's
// daemon (nic/daemon) built from a host's config, its loop sharing the
// program's one P with the application (daemon.Options.Cooperative), and
// serving the program alone on a private device socket. The perftest- and
// nccl-tests-like tools' --in-process flag is this package.
package inprocess

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"syscall"
	"time"

	"github.com/softmrc/softmrc/nic/config"
	"github.com/softmrc/softmrc/nic/daemon"
	"github.com/softmrc/softmrc/nic/verbs"
)

// NIC is a running in-process NIC.
type NIC struct {
	d      *daemon.Daemon
	notify chan struct{}
	sock   string
	dir    string
	cancel context.CancelFunc
	done   chan error
	procs  int // GOMAXPROCS before
}

// Start opens the ports of the mrc-nicd config at path and starts the NIC's
// loop; logw gets its warnings. The program runs with one P until Stop: the
// loop and the application share it and hand it to each other
// (runtime.Gosched), so a completion reaches the application without
// waking a thread. Open the device with VerbsOptions. edit, when not nil,
// changes the config before the NIC starts.
func Start(ctx context.Context, path string, logw io.Writer, edit func(*config.Config)) (*NIC, error) {
	cfg, err := config.Load(path)
	if err != nil {
		return nil, fmt.Errorf("--in-process: %w", err)
	}
	if edit != nil {
		edit(cfg)
	}
	if cfg.ThreadCount() > 1 {
		cfg.Threads = 1 // one loop, on the tool's P
	}
	dir, err := os.MkdirTemp("", "mrc-inprocess-")
	if err != nil {
		return nil, fmt.Errorf("--in-process: %w", err)
	}
	// The socket is the tool's own, and the metrics endpoint is mrc-nicd's
	// to serve: the in-process NIC has neither a user nor a port to share.
	cfg.DeviceSocket = filepath.Join(dir, "nic.sock")
	cfg.Metrics = ""
	n := &NIC{sock: cfg.DeviceSocket, dir: dir, done: make(chan error, 1), procs: runtime.GOMAXPROCS(1)}
	log := slog.New(slog.NewTextHandler(logw, &slog.HandlerOptions{Level: slog.LevelWarn})).With("host", cfg.Host, "nic", "in-process")
	n.notify = make(chan struct{}, 1)
	d, err := daemon.New(daemon.Options{Config: cfg, Logger: log, Cooperative: true, Notify: func() {
		select {
		case n.notify <- struct{}{}:
		default: // a wake-up is pending already
		}
	}})
	if err != nil {
		n.release()
		if errors.Is(err, syscall.EBUSY) {
			return nil, fmt.Errorf("--in-process: %w (the in-process NIC opens the host's ports itself: stop the host's mrc-nicd, or bring the testbed up without --nics)", err)
		}
		return nil, fmt.Errorf("--in-process: %w", err)
	}
	n.d = d
	rctx, cancel := context.WithCancel(context.Background())
	n.cancel = cancel
	go func() { n.done <- d.Run(rctx) }()
	rdy, rcancel := context.WithTimeout(ctx, 10*time.Second)
	defer rcancel()
	if err := d.Ready(rdy); err != nil {
		_ = n.Stop()
		return nil, fmt.Errorf("--in-process: the NIC's loop did not start: %w", err)
	}
	return n, nil
}

// Socket is the NIC's private device socket, for verbs.OpenWith.
func (n *NIC) Socket() string { return n.sock }

// VerbsOptions are the options to open Socket with: a cooperative device
// whose waits park until the loop did work and whose posts wake the loop.
// Spin stays 0: parking and waking are goroutine switches on one thread.
func (n *NIC) VerbsOptions() verbs.Options {
	return verbs.Options{Cooperative: true, Notify: n.notify, Kick: n.d.Wake}
}

// Stop shuts the NIC down (its QPs, its ports' XDP programs and sockets)
// and gives the program its Ps back.
func (n *NIC) Stop() error {
	n.cancel()
	err := <-n.done
	n.release()
	if errors.Is(err, context.Canceled) {
		err = nil
	}
	return err
}

func (n *NIC) release() {
	os.RemoveAll(n.dir)
	runtime.GOMAXPROCS(n.procs)
}
