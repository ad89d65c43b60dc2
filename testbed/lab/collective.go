package lab

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/softmrc/softmrc/nic/collperf"
	"github.com/softmrc/softmrc/testbed/lab/scenario"
	"github.com/softmrc/softmrc/testbed/run"
)

// CollectiveStall is the collective tools' --stall: an operation with no
// completion for this long fails the run (a QP that went to error).
const CollectiveStall = 30 * time.Second

// collectiveArgs is the command line of a collective flow, one size
// (-b = -e = Size), f.Warmup untimed iterations first, --json for rank 0's
// table.
func collectiveArgs(bin string, f scenario.Flow) []string {
	size := strconv.Itoa(f.Size)
	check := "0"
	if f.Check {
		check = "1"
	}
	args := []string{bin, "--json", "-b", size, "-e", size, "-n", strconv.Itoa(f.Iters), "-w", strconv.Itoa(max(f.Warmup, 1)), "-c", check,
		"--qps", strconv.Itoa(f.QPs), "--timeout", f.Timeout.String(), "--stall", CollectiveStall.String()}
	if f.Transport != "" {
		args = append(args, "--transport", f.Transport)
	}
	if f.Slots > 0 {
		args = append(args, "--slots", strconv.Itoa(f.Slots))
	}
	if f.SlotBytes > 0 {
		args = append(args, "--slot_bytes", strconv.Itoa(f.SlotBytes))
	}
	return args
}

// runCollective runs one collective flow on its group (rank i on
// f.Hosts[i], run.ExecGroup) and records rank 0's report in r. The tools'
// output goes to flow-NAME.txt in outDir.
func runCollective(ctx context.Context, dir, outDir, bin string, f scenario.Flow, r *FlowResult) error {
	path := filepath.Join(outDir, "flow-"+f.Name+".txt")
	w, err := os.Create(path)
	if err != nil {
		return err
	}
	defer w.Close()
	var stdout bytes.Buffer
	err = run.ExecGroup(ctx, dir, strings.Join(f.Hosts, ","), collectiveArgs(bin, f), &stdout, w)
	_, _ = w.Write(stdout.Bytes())
	rep, perr := parseCollective(stdout.Bytes(), f.Hosts[0])
	switch {
	case err != nil:
		r.Err = fmt.Errorf("%s on %s: %w (see %s)", f.Tool, strings.Join(f.Hosts, ","), err, path)
	case perr != nil:
		r.Err = fmt.Errorf("%s: %w (see %s)", f.Tool, perr, path)
	default:
		r.Collective = rep
	}
	return nil
}

// parseCollective reads rank 0's --json report from the group's output,
// whose lines run.ExecGroup prefixed with "HOST: ".
func parseCollective(out []byte, rank0 string) (*collperf.Report, error) {
	var js bytes.Buffer
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if l, ok := strings.CutPrefix(sc.Text(), rank0+": "); ok {
			js.WriteString(l)
			js.WriteByte('\n')
		}
	}
	var rep collperf.Report
	if err := json.Unmarshal(js.Bytes(), &rep); err != nil {
		return nil, fmt.Errorf("rank 0 (%s) printed no --json report: %v", rank0, err)
	}
	if len(rep.Rows) == 0 {
		return nil, fmt.Errorf("rank 0 (%s) reported no rows", rank0)
	}
	return &rep, nil
}

// FlowValues are a flow's measured values (scenario.Keys): rate in Mbit/s
// for mrc-write-bw (0 when it failed: what it delivered to the claims on
// shares and fairness, as the seed counts a flow that died); busbw, algbw
// in Mbit/s and wrong for a collective (job_busbw: the bus bandwidth of
// all its timed operations together), none of them when it failed (a
// collective that did not finish has no bus bandwidth, and a claim
// "RoCE well below MRC" must not pass on a RoCE run that broke), wrong
// absent when not checked.
func FlowValues(r FlowResult) map[string]float64 {
	v := map[string]float64{}
	if !r.Flow.IsCollective() {
		v["rate"] = r.Average * (1 << 20) * 8 / 1e6 // MiB/s → Mbit/s
		if r.Err != nil {
			v["rate"] = 0
		}
		return v
	}
	if r.Err != nil || r.Collective == nil {
		return v
	}
	var bus, alg, busTime, time float64
	var n int
	checked := false
	var wrong int64
	for _, row := range r.Collective.Rows {
		for _, h := range []collperf.Result{row.Out, row.In} {
			bus += h.BusBW
			alg += h.AlgBW
			busTime += h.BusBW * h.TimeUs
			time += h.TimeUs
			n++
			if h.Wrong >= 0 {
				checked = true
				wrong += h.Wrong
			}
		}
	}
	if n > 0 {
		v["busbw"], v["algbw"] = bus/float64(n)*8000, alg/float64(n)*8000 // GB/s → Mbit/s
	}
	if time > 0 {
		// Each half's bus bytes over the halves' total time: one set of
		// operations that met a 4.3 s ACK timeout and one that met none
		// average to more than half the loss-free rate as rates, and to
		// what a job running both back to back would see this way.
		v["job_busbw"] = busTime / time * 8000
	}
	if checked {
		v["wrong"] = float64(wrong)
	}
	return v
}
