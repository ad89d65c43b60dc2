package daemon

import (
	"crypto/rand"
	"encoding/hex"
	"os/exec"
	"strings"
	"testing"
)

// scratchNetns creates a network namespace named prefix + 6 random hex
// digits, deleted by t's cleanup (with everything in it), and returns its
// name, the random part (for unique interface names) and a runner of
// ip(8) that fails t on error.
func scratchNetns(t *testing.T, prefix string) (ns, id string, ip func(args ...string)) {
	t.Helper()
	var r [3]byte
	rand.Read(r[:])
	id = hex.EncodeToString(r[:])
	ns = prefix + id
	ip = func(args ...string) {
		t.Helper()
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
	ip("netns", "add", ns)
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", ns).Run() })
	return ns, id, ip
}
