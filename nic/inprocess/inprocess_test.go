package inprocess

import (
	"bytes"
	"context"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/softmrc/softmrc/internal/wire"
	"github.com/softmrc/softmrc/nic/config"
)

// TestStartFails: a config that cannot be loaded or whose port cannot be
// opened fails Start with the reason, and leaves the program as it was:
// its Ps given back, no socket folder left behind. (The runs over real
// ports are nic/e2e's TestInProcessNIC and TestInProcessNICWhileDaemonRuns.)
func TestStartFails(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	dir := t.TempDir()
	c := &config.Config{Host: "h0", Mode: config.ModeECMP, EVs: 8, DeviceSocket: filepath.Join(dir, "h0.sock"),
		Ports: []config.Port{{Name: "p0", Interface: "mrcnoiface0", Plane: 0, MAC: wire.MAC{2, 0, 0, 0, 0, 1},
			NeighborMAC: wire.MAC{2, 0, 0, 0, 0, 2}, Address: netip.MustParseAddr("fd00:0:0::1")}}}
	c.SetDefaults()
	good := filepath.Join(dir, "h0.nic.yaml")
	if err := c.Write(good); err != nil {
		t.Fatal(err)
	}
	procs := runtime.GOMAXPROCS(0)
	for _, tc := range []struct{ path, want string }{
		{filepath.Join(dir, "none.yaml"), "none.yaml"},
		{good, "mrcnoiface0"},
	} {
		var logs bytes.Buffer
		n, err := Start(context.Background(), tc.path, &logs, nil)
		if err == nil {
			n.Stop()
			t.Fatalf("Start(%s) succeeded", tc.path)
		}
		if !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "--in-process: ") {
			t.Errorf("Start(%s): %v, want an --in-process error naming %s", tc.path, err, tc.want)
		}
		if strings.Contains(err.Error(), "stop the host's mrc-nicd") {
			t.Errorf("Start(%s): %v: the hint for a port another socket holds, for another error", tc.path, err)
		}
		if got := runtime.GOMAXPROCS(0); got != procs {
			t.Errorf("after a failed Start GOMAXPROCS is %d, want %d", got, procs)
		}
	}
	if left, _ := os.ReadDir(tmp); len(left) != 0 {
		t.Errorf("a failed Start left %d entries in the temporary folder, e.g. %s", len(left), left[0].Name())
	}
}
