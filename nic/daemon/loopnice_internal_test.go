package daemon

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/softmrc/softmrc/nic/config"
)

// TestLoopNice: loop_nice sets the run loop's thread's nice value and no
// other thread's of the daemon. 7, because raising a nice value needs no
// privilege.
func TestLoopNice(t *testing.T) {
	var logs syncBuf
	d := runPipeDaemon(t, func(c *config.Config) { c.LoopNice = 7 }, &logs)
	var loopTID int
	if err := d.exec(func() { loopTID = unix.Gettid() }); err != nil {
		t.Fatal(err)
	}
	niced := threadsWithNice(t, 7)
	if len(niced) != 1 || niced[0] != loopTID {
		t.Fatalf("threads at nice 7: %v, want only the loop's (%d)\nlog:\n%s", niced, loopTID, logs.String())
	}
	if !strings.Contains(logs.String(), "run loop priority") {
		t.Errorf("no \"run loop priority\" line:\n%s", logs.String())
	}
}

// threadsWithNice lists this process's threads whose nice value is n
// (/proc/self/task/TID/stat, field 19).
func threadsWithNice(t *testing.T, n int) []int {
	t.Helper()
	tasks, err := filepath.Glob("/proc/self/task/*/stat")
	if err != nil {
		t.Fatal(err)
	}
	var tids []int
	for _, p := range tasks {
		b, err := os.ReadFile(p)
		if err != nil {
			continue // the thread ended
		}
		// The command name may hold spaces: count fields after its ')'.
		f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
		if len(f) < 17 {
			t.Fatalf("%s: %q", p, b)
		}
		if nice, _ := strconv.Atoi(f[16]); nice == n {
			tid, _ := strconv.Atoi(filepath.Base(filepath.Dir(p)))
			tids = append(tids, tid)
		}
	}
	return tids
}
