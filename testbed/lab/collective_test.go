package lab

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/softmrc/softmrc/testbed/lab/scenario"
)

// rank 0's --json report as run.ExecGroup prints it: every line prefixed
// with its host, interleaved with another rank's lines.
const groupOut = `h0: {
h2: rendezvous with h0
h0:   "collective": "all-reduce",
h0:   "ranks": 4,
h0:   "rows": [
h0:     {"size": 2097152, "count": 524288, "type": "float", "redop": "sum", "root": -1,
h0:      "out_of_place": {"time_us": 300000, "algbw": 0.007, "busbw": 0.0105, "wrong": 0},
h0:      "in_place": {"time_us": 310000, "algbw": 0.0067, "busbw": 0.0095, "wrong": 2}}
h0:   ],
h0:   "avg_busbw": 0.01,
h0:   "wrong": 2
h0: }
`

func TestCollectiveArgsOptions(t *testing.T) {
	f := scenario.Flow{Name: "ar", Tool: "mrc-allreduce-perf", Hosts: []string{"h0", "h2"}, Size: 1 << 20, Iters: 5, QPs: 1, Timeout: time.Minute}
	if a := strings.Join(collectiveArgs("x", f), " "); strings.Contains(a, "--slot") {
		t.Errorf("args %q: slots given without being set", a)
	}
	if a := strings.Join(collectiveArgs("x", f), " "); !strings.Contains(a, " -w 1 ") {
		t.Errorf("args %q: want one warm-up iteration by default", a)
	}
	f.Slots, f.SlotBytes, f.Warmup = 32, 16<<10, 5
	if a := strings.Join(collectiveArgs("x", f), " "); !strings.Contains(a, " --slots 32") || !strings.Contains(a, " --slot_bytes 16384") || !strings.Contains(a, " -w 5 ") {
		t.Errorf("args %q: want -w 5 --slots 32 --slot_bytes 16384", a)
	}
}

func TestParseCollective(t *testing.T) {
	rep, err := parseCollective([]byte(groupOut), "h0")
	if err != nil {
		t.Fatal(err)
	}
	f := scenario.Flow{Name: "ar", Tool: "mrc-allreduce-perf", Hosts: []string{"h0", "h2"}}
	v := FlowValues(FlowResult{Flow: f, Collective: rep})
	// busbw: the mean of out-of-place and in-place, GB/s × 8000 = Mbit/s.
	if got := v["busbw"]; got < 79.99 || got > 80.01 {
		t.Errorf("busbw %v Mbit/s, want 80", got)
	}
	// job_busbw: the bus bytes of both halves over their total time,
	// (0.0105 × 300000 + 0.0095 × 310000) / 610000 GB/s.
	if got, want := v["job_busbw"], (0.0105*300000+0.0095*310000)/610000*8000; got < want-0.01 || got > want+0.01 {
		t.Errorf("job_busbw %v Mbit/s, want %.2f", got, want)
	}
	if got := v["algbw"]; got < 54.79 || got > 54.81 {
		t.Errorf("algbw %v Mbit/s, want 54.8", got)
	}
	if v["wrong"] != 2 {
		t.Errorf("wrong %v, want 2", v["wrong"])
	}
	if _, err := parseCollective([]byte(groupOut), "h2"); err == nil {
		t.Error("h2 printed no report, but parseCollective found one")
	}
	if _, err := parseCollective([]byte(strings.ReplaceAll(groupOut, "2097152", "x")), "h0"); err == nil {
		t.Error("a broken report parsed")
	}
	// Not checked (-c 0: wrong -1): no wrong value; a failed run: no value.
	rep.Rows[0].Out.Wrong, rep.Rows[0].In.Wrong = -1, -1
	if _, ok := FlowValues(FlowResult{Flow: f, Collective: rep})["wrong"]; ok {
		t.Error("wrong reported for a run that checked nothing")
	}
	failed := FlowValues(FlowResult{Flow: f, Err: errors.New("RETRY_EXCEEDED")})
	if len(failed) != 0 {
		t.Errorf("failed collective values %v, want none (not measured)", failed)
	}
	// mrc-write-bw: MiB/s → Mbit/s, 0 when the flow failed.
	w := scenario.Flow{Name: "v", Tool: "mrc-write-bw"}
	if r := FlowValues(FlowResult{Flow: w, Average: 10})["rate"]; r < 83.88 || r > 83.89 {
		t.Errorf("rate %v, want 83.886 Mbit/s", r)
	}
	if r := FlowValues(FlowResult{Flow: w, Average: 10, Err: errors.New("x")})["rate"]; r != 0 {
		t.Errorf("failed flow rate %v, want 0", r)
	}
}
