package e2e

import (
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/softmrc/softmrc/nic/vproto"
)

// portTotals sums a host's AF_XDP port counters (mrcctl -json ports).
func portTotals(t *testing.T, bin, sock string) (txFrames, txBytes uint64) {
	t.Helper()
	b, err := exec.Command(filepath.Join(bin, "mrcctl"), "-json", "-d", sock, "ports").Output()
	if err != nil {
		t.Fatalf("mrcctl ports: %v", err)
	}
	var ps []vproto.PortStatus
	if err := json.Unmarshal(b, &ps); err != nil {
		t.Fatalf("mrcctl ports: %v: %s", err, b)
	}
	for _, p := range ps {
		txFrames += p.Stats["TxFrames"]
		txBytes += p.Stats["TxBytes"]
	}
	return txFrames, txBytes
}

// TestTestbedMTU4096: clos-2p with --roce-mtu 4096 (links at 4228, every
// XDP program frags-aware, the NICs' sockets multi-buffer): mrc-write-bw
// --mtu 4096 from h0 to h3, across a T1, 64 KiB and 8 MiB messages, every
// byte verified, and the frames really were 4 KiB-MTU ones (the sender's
// average transmitted frame is above what a 2048 MTU can produce).
func TestTestbedMTU4096(t *testing.T) {
	requireNetns(t)
	tb := upTestbedArgs(t, "clos-2p", []string{"--roce-mtu", "4096"}, nil, nil, "h0", "h3")
	if m := tb.hosts["h0"].cfg.MTU; m != 4096 {
		t.Fatalf("the testbed wrote mtu %d into h0's NIC config, want 4096", m)
	}
	for _, size := range []string{"65536", "8388608"} {
		f0, b0 := portTotals(t, tb.bin, tb.hosts["h0"].cfg.DeviceSocket)
		out, err := tb.run(t, "mrc-write-bw", "h0", "h3", "--mtu", "4096", "-s", size, "-n", "20", "--verify")
		t.Logf("\n%s", out)
		if err != nil {
			t.Fatalf("mrc-write-bw --mtu 4096 -s %s --verify: %v", size, err)
		}
		if !strings.Contains(out, "Mtu             : 4096[B]") || bwRow.FindStringSubmatch(out) == nil {
			t.Fatalf("no 4096-MTU result row:\n%s", out)
		}
		f1, b1 := portTotals(t, tb.bin, tb.hosts["h0"].cfg.DeviceSocket)
		avg := float64(b1-b0) / float64(max(f1-f0, 1))
		t.Logf("-s %s: h0 sent %d frames, %.0f bytes on average", size, f1-f0, avg)
		if avg < 3000 {
			t.Errorf("-s %s: h0's average frame is %.0f bytes: 4 KiB-MTU data frames are about 4.2 KB", size, avg)
		}
	}
}

// TestPathMTUMismatch: NICs configured for a 4096 RoCE MTU on 2048-byte
// links: the connect fails, and the tool's error says what is wrong and
// what to change (pathmtu.Error).
func TestPathMTUMismatch(t *testing.T) {
	requireNetns(t)
	tp := newTopoMTU(t, 1, true, 2048, 4096)
	out, err := tp.pairRun(t, time.Minute, "mrc-write-bw", "-s", "65536", "-n", "5")
	t.Logf("\n%s", out)
	if err == nil {
		t.Fatal("mrc-write-bw with a 4096 RoCE MTU on 2048-MTU ports succeeded")
	}
	for _, want := range []string{"path MTU: a RoCE MTU of 4096 needs an interface MTU of at least 4188",
		"has MTU 2048", "raise the interface MTU to 4188"} {
		if !strings.Contains(out, want) {
			t.Errorf("the error does not say %q", want)
		}
	}
}
