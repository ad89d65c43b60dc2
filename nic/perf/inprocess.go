package perf

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"time"

	"github.com/softmrc/softmrc/nic/config"
	"github.com/softmrc/softmrc/nic/daemon"
)

// inProcessSpin is a cooperative wait's default spin (verbs.Options.Spin
// with Cooperative): yielding to the NIC's loop costs nothing the loop
// does not need, so it lasts as long as a test's answer may take on a
// busy machine; only then the wait naps.
const inProcessSpin = 20 * time.Millisecond

// inProcessNIC is the NIC of --in-process: mrc-nicd's daemon built from the
// host's config and run on this program's one P (nic/daemon
// Options.Cooperative), serving this tool alone on a private device socket.
type inProcessNIC struct {
	sock   string
	dir    string
	cancel context.CancelFunc
	done   chan error
	procs  int // GOMAXPROCS before
}

// startInProcessNIC opens the ports of the config at path and starts the
// NIC's loop. The program runs with one P until stop: the loop and the
// test share it and hand it to each other (runtime.Gosched), so a
// completion reaches the test without waking a thread.
func startInProcessNIC(ctx context.Context, path string, logw io.Writer) (*inProcessNIC, error) {
	cfg, err := config.Load(path)
	if err != nil {
		return nil, fmt.Errorf("--in-process: %w", err)
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
	n := &inProcessNIC{sock: cfg.DeviceSocket, dir: dir, done: make(chan error, 1), procs: runtime.GOMAXPROCS(1)}
	log := slog.New(slog.NewTextHandler(logw, &slog.HandlerOptions{Level: slog.LevelWarn})).With("host", cfg.Host, "nic", "in-process")
	d, err := daemon.New(daemon.Options{Config: cfg, Logger: log, Cooperative: true})
	if err != nil {
		n.release()
		return nil, fmt.Errorf("--in-process: %w (the in-process NIC opens the host's ports itself: stop the host's mrc-nicd, or bring the testbed up without --nics)", err)
	}
	rctx, cancel := context.WithCancel(context.Background())
	n.cancel = cancel
	go func() { n.done <- d.Run(rctx) }()
	rdy, rcancel := context.WithTimeout(ctx, 10*time.Second)
	defer rcancel()
	if err := d.Ready(rdy); err != nil {
		_ = n.stop()
		return nil, fmt.Errorf("--in-process: the NIC's loop did not start: %w", err)
	}
	return n, nil
}

// stop shuts the NIC down (its QPs, its ports' XDP programs and sockets)
// and gives the program its Ps back.
func (n *inProcessNIC) stop() error {
	n.cancel()
	err := <-n.done
	n.release()
	if errors.Is(err, context.Canceled) {
		err = nil
	}
	return err
}

func (n *inProcessNIC) release() {
	os.RemoveAll(n.dir)
	runtime.GOMAXPROCS(n.procs)
}
