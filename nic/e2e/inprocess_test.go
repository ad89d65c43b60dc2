package e2e

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"
)

// inProcessPair runs name's server on h[1] and client on h[0], each with
// its NIC inside the tool (--in-process, the host's config through
// MRC_NIC_CONFIG, as mrc-testbed exec passes it), and returns the client's
// output and error.
func (tp *topo) inProcessPair(t *testing.T, timeout time.Duration, name string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	srv := tp.h[1].tool(ctx, name, append([]string{"--in-process"}, args...)...)
	srv.Env = append(os.Environ(), "MRC_NIC_CONFIG="+tp.h[1].path)
	var sout lockedBuffer
	srv.Stdout, srv.Stderr = &sout, &sout
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	cli := tp.h[0].tool(ctx, name, append([]string{"--in-process"}, append(args, tp.h[1].addrs[0].String())...)...)
	cli.Env = append(os.Environ(), "MRC_NIC_CONFIG="+tp.h[0].path)
	out, err := cli.CombinedOutput()
	if serr := srv.Wait(); err != nil || serr != nil {
		t.Logf("server output (exit: %v):\n%s", serr, sout.String())
		if err == nil {
			err = serr
		}
	}
	return string(out), err
}

// TestInProcessNIC runs the perftest tools with the NIC inside each tool
// over real AF_XDP ports on two planes, the hosts' mrc-nicd not running:
// every byte verified, both tables printed.
func TestInProcessNIC(t *testing.T) {
	requireNetns(t)
	tp := newTopoStart(t, 2, false)
	out, err := tp.inProcessPair(t, 2*time.Minute, "mrc-write-lat", "-n", "300", "--verify")
	t.Logf("\n%s", out)
	if err != nil {
		t.Fatalf("mrc-write-lat --in-process: %v", err)
	}
	if m := latRow.FindStringSubmatch(out); m == nil || m[1] != "2" || m[2] != "300" {
		t.Fatalf("mrc-write-lat --in-process: no 2 B row of 300 iterations")
	}
	out, err = tp.inProcessPair(t, 2*time.Minute, "mrc-write-bw", "-s", "65536", "-n", "400", "-q", "2", "--verify")
	t.Logf("\n%s", out)
	if err != nil {
		t.Fatalf("mrc-write-bw --in-process: %v", err)
	}
	if rows := bwRow.FindAllStringSubmatch(out, -1); len(rows) != 1 || rows[0][1] != "65536" {
		t.Fatalf("mrc-write-bw --in-process: want one 64 KiB row, got %d", len(rows))
	}
}

// TestInProcessNICWhileDaemonRuns: with the host's mrc-nicd holding its
// ports, --in-process fails at once and says what to do.
func TestInProcessNICWhileDaemonRuns(t *testing.T) {
	requireNetns(t)
	tp := newTopo(t, 1)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := tp.h[0].tool(ctx, "mrc-write-lat", "--in-process", "--nic-config", tp.h[0].path, "-n", "10", tp.h[1].addrs[0].String())
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("--in-process beside a running mrc-nicd succeeded:\n%s", out)
	}
	if !strings.Contains(string(out), "stop the host's mrc-nicd") {
		t.Fatalf("--in-process beside a running mrc-nicd: %v: %s, want the fix named", err, out)
	}
}
