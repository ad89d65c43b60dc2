package collperf

import (
	"encoding/json"
	"fmt"
	"io"
)

// The table's header, as nccl-tests prints it.
const header = `#
#                                                              out-of-place                       in-place          
#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)       
`

// Result is one half of a row (out-of-place or in-place).
type Result struct {
	TimeUs float64 `json:"time_us"`
	AlgBW  float64 `json:"algbw"` // GB/s (10^9 bytes)
	BusBW  float64 `json:"busbw"`
	Wrong  int64   `json:"wrong"` // -1: not checked
}

// Row is one size.
type Row struct {
	Bytes int64  `json:"size"`
	Count int64  `json:"count"`
	Type  string `json:"type"`
	Redop string `json:"redop"`
	Root  int    `json:"root"`
	// Algo is the all-reduce algorithm this size ran (ring or direct).
	Algo string `json:"algo,omitempty"`
	Out  Result `json:"out_of_place"`
	In   Result `json:"in_place"`
}

// Report is --json's output: the run and its rows (wrong -1: not checked).
type Report struct {
	Collective string  `json:"collective"`
	Ranks      int     `json:"ranks"`
	Transport  string  `json:"transport"`
	QPs        int     `json:"qps_per_peer"`
	Iters      int     `json:"iters"`
	Warmup     int     `json:"warmup_iters"`
	Rows       []Row   `json:"rows"`
	AvgBusBW   float64 `json:"avg_busbw"`
	Wrong      int64   `json:"wrong"`
}

func writeJSON(w io.Writer, p *Params, rows []Row) error {
	r := Report{Collective: p.Kind.Name(), Ranks: p.NRanks, Transport: p.Transport, QPs: p.QPs, Iters: p.Iters,
		Warmup: p.Warmup, Rows: rows}
	n := 0
	for _, row := range rows {
		for _, h := range []Result{row.Out, row.In} {
			r.AvgBusBW += h.BusBW
			n++
			if h.Wrong > 0 {
				r.Wrong += h.Wrong
			}
		}
	}
	if n > 0 {
		r.AvgBusBW /= float64(n)
	}
	e := json.NewEncoder(w)
	e.SetIndent("", "  ")
	return e.Encode(r)
}

// busFactor is nccl-tests' correction from algorithm to bus bandwidth:
// what each rank's link carries relative to the buffer.
func busFactor(k Kind, n int) float64 {
	if n <= 1 {
		return 0
	}
	if k == AllToAll {
		return float64(n-1) / float64(n)
	}
	return 2 * float64(n-1) / float64(n)
}

// bandwidth fills AlgBW and BusBW from the size and the time.
func bandwidth(r *Result, bytes int64, k Kind, n int) {
	if r.TimeUs <= 0 {
		return
	}
	r.AlgBW = float64(bytes) / (r.TimeUs * 1e-6) / 1e9
	r.BusBW = r.AlgBW * busFactor(k, n)
}

// timeStr formats µs as nccl-tests does: fewer decimals for longer times.
func timeStr(us float64) string {
	switch {
	case us >= 10000:
		return fmt.Sprintf("%7.0f", us)
	case us >= 100:
		return fmt.Sprintf("%7.1f", us)
	}
	return fmt.Sprintf("%7.2f", us)
}

func wrongStr(w int64) string {
	if w < 0 {
		return "N/A"
	}
	return fmt.Sprint(w)
}

// printRow prints one line of the table.
func printRow(w io.Writer, r Row) {
	fmt.Fprintf(w, "%12d  %12d  %8s  %6s  %6d", r.Bytes, r.Count, r.Type, r.Redop, r.Root)
	for _, h := range []Result{r.Out, r.In} {
		fmt.Fprintf(w, "  %7s  %6.2f  %6.2f  %5s", timeStr(h.TimeUs), h.AlgBW, h.BusBW, wrongStr(h.Wrong))
	}
	fmt.Fprintln(w)
}

// printFooter prints nccl-tests' closing lines.
func printFooter(w io.Writer, rows []Row) {
	var wrong int64
	var bw float64
	n := 0
	for _, r := range rows {
		for _, h := range []Result{r.Out, r.In} {
			if h.Wrong > 0 {
				wrong += h.Wrong
			}
			bw += h.BusBW
			n++
		}
	}
	verdict := "OK"
	if wrong > 0 {
		verdict = "FAILED"
	}
	fmt.Fprintf(w, "# Out of bounds values : %d %s\n", wrong, verdict)
	if n > 0 {
		bw /= float64(n)
	}
	fmt.Fprintf(w, "# Avg bus bandwidth    : %g \n#\n", roundTo(bw, 6))
}

func roundTo(v float64, digits int) float64 {
	var x float64
	fmt.Sscanf(fmt.Sprintf("%.*g", digits, v), "%g", &x)
	return x
}
