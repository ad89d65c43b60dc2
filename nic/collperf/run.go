package collperf

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sync/atomic"
	"time"

	"github.com/softmrc/softmrc/nic/collective"
	"github.com/softmrc/softmrc/nic/inprocess"
	"github.com/softmrc/softmrc/nic/rendezvous"
	"github.com/softmrc/softmrc/nic/verbs"
)

// rankDesc is what each rank tells rank 0 for the "Using devices" lines.
type rankDesc struct {
	Host   string `json:"host"`
	PID    int    `json:"pid"`
	Device string `json:"device"`
	Planes int    `json:"planes"`
	EVs    int    `json:"evs"`
}

// ErrWrong is returned when -c found wrong elements.
var ErrWrong = fmt.Errorf("wrong elements found")

// Run runs the test on this rank; rank 0 prints the banner and the table to
// stdout. Every rank stops by itself: on completion, on an error of any
// rank, after --stall without progress, or after --timeout.
func Run(ctx context.Context, p *Params, stdout, stderr io.Writer) (err error) {
	ctx, cancel := context.WithTimeout(ctx, p.Timeout)
	defer cancel()
	qpc, err := parseTransport(p.Transport)
	if err != nil {
		return err
	}
	var dev *verbs.Device
	devName := p.Device
	if p.InProcess {
		var nic *inprocess.NIC
		// The loop keeps mrc-nicd's spin gate: ranks may outnumber the
		// host's cores (a testbed on a small VM), and spinning ranks then
		// take the CPU the others need.
		if nic, err = inprocess.Start(ctx, p.NICConfig, stderr, nil); err != nil {
			return err
		}
		defer func() {
			if e := nic.Stop(); e != nil && err == nil {
				err = fmt.Errorf("--in-process: the NIC: %w", e)
			}
		}()
		devName = "in-process NIC of " + p.NICConfig
		dev, err = verbs.OpenWith(nic.Socket(), nic.VerbsOptions())
	} else {
		dev, err = verbs.Open(p.Device)
	}
	if err != nil {
		return err
	}
	defer dev.Close()
	g, err := rendezvous.Join(ctx, rendezvous.Config{Rank: p.Rank, Size: p.NRanks, Addr: p.Rendezvous,
		Timeout: min(p.Timeout, 2*time.Minute), OnListen: p.OnListen})
	if err != nil {
		return err
	}
	defer g.Close()
	info := dev.Info()
	me, _ := json.Marshal(rankDesc{Host: info.Host, PID: os.Getpid(), Device: devName, Planes: len(info.Ports), EVs: info.EVs})
	descs, err := g.AllGather(ctx, me)
	if err != nil {
		return err
	}
	cfg := collective.Config{QPsPerPeer: p.QPs, Slots: p.Slots, SlotSize: p.SlotSize, QP: qpc, Stall: p.Stall}
	if p.Kind == AllReduce {
		cfg.AllReduce, cfg.DirectMax = p.Algo, int(p.DirectMax)
	}
	comm, err := collective.New(ctx, dev, g, cfg)
	if err != nil {
		return err
	}
	out := io.Discard
	if p.Rank == 0 {
		out = stdout
		if p.JSON {
			out = stderr // the table goes there; stdout gets the JSON
		}
	}
	printBanner(out, p, descs)
	fmt.Fprint(out, header)
	r := &runner{p: p, comm: comm, g: g, n: p.NRanks}
	if p.Rank == 0 {
		defer r.progress(ctx, stderr, 5*time.Second)()
	}
	sizes := p.Sizes()
	maxCount := r.count(sizes[len(sizes)-1])
	r.send, r.recv = make([]float32, maxCount), make([]float32, maxCount)
	var rows []Row
	for _, size := range sizes {
		row, err := r.size(ctx, size)
		if err != nil {
			comm.Close(ctx)
			return fmt.Errorf("rank %d, %d bytes: %w", p.Rank, size, err)
		}
		if p.Rank == 0 {
			printRow(out, row)
		}
		rows = append(rows, row)
	}
	if err := comm.Close(ctx); err != nil {
		return err
	}
	printFooter(out, rows)
	if p.JSON && p.Rank == 0 {
		if err := writeJSON(stdout, p, rows); err != nil {
			return err
		}
	}
	for _, row := range rows {
		if row.Out.Wrong > 0 || row.In.Wrong > 0 {
			return ErrWrong
		}
	}
	return nil
}

func printBanner(w io.Writer, p *Params, descs [][]byte) {
	fmt.Fprintf(w, "# nThread 1 nGpus 1 minBytes %d maxBytes %d step: %s warmup iters: %d iters: %d agg iters: 1 validation: %d graph: 0\n",
		p.MinBytes, p.MaxBytes, stepStr(p), p.Warmup, p.Iters, p.Check)
	if p.GPUs != 1 {
		fmt.Fprintf(w, "# -g %d ignored: one rank per process, one process per host (start one with mrc-testbed exec per host)\n", p.GPUs)
	}
	fmt.Fprintf(w, "#\n# Using devices (transport %s, %d QP(s) per peer, %d slots x %d B)\n", p.Transport, p.QPs, p.Slots, p.SlotSize)
	if p.Kind == AllReduce {
		switch p.Algo {
		case collective.AlgoAuto:
			fmt.Fprintf(w, "# all-reduce algorithm: direct up to %s (one step: every rank sends its buffer to every peer), ring above (--algo, --direct_max)\n", sizeName(p.DirectMax))
		default:
			fmt.Fprintf(w, "# all-reduce algorithm: %s (--algo)\n", p.Algo)
		}
	}
	if t, _ := parseTransport(p.Transport); t.Transport == verbs.TransportRoCE {
		fmt.Fprintf(w, "# RoCE baseline: go-back-N and DCQCN; the softmrc XDP switches have no PFC (lossless RoCE is not modelled)\n")
	}
	for r, b := range descs {
		var d rankDesc
		_ = json.Unmarshal(b, &d)
		fmt.Fprintf(w, "#  Rank %2d Group  0 Pid %6d on %10s device  0 [%s] mrc-nicd, %d plane(s), %d EVs\n", r, d.PID, d.Host, d.Device, d.Planes, d.EVs)
	}
}

func stepStr(p *Params) string {
	if p.StepFactor > 1 {
		return fmt.Sprintf("%d(factor)", p.StepFactor)
	}
	return fmt.Sprintf("%d(bytes)", p.StepBytes)
}

type runner struct {
	p          *Params
	comm       *collective.Comm
	g          *rendezvous.Group
	n          int
	send, recv []float32
	// progress: the size running and the operations done in it
	curSize atomic.Int64
	curOps  atomic.Int64
}

// progress prints a line to w every period while a size runs (a 64 MiB row
// can take minutes on a loaded machine); the returned function stops it.
func (r *runner) progress(ctx context.Context, w io.Writer, period time.Duration) func() {
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(period)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-t.C:
				fmt.Fprintf(w, "# progress: %d B: %d operations so far (of %d per size)\n", r.curSize.Load(), r.curOps.Load(), r.opsPerSize())
			}
		}
	}()
	return func() { close(done) }
}

func (r *runner) opsPerSize() int {
	n := r.p.Warmup + r.p.Iters + r.p.Check
	return 2 * n
}

// count is the element count of a size: all-to-all rounds down to a
// multiple of the ranks, as nccl-tests does.
func (r *runner) count(size int64) int {
	c := int(size / 4)
	if r.p.Kind == AllToAll {
		c = c / r.n * r.n
	}
	return c
}

func (r *runner) op(ctx context.Context, send, recv []float32) error {
	defer r.curOps.Add(1)
	if r.p.Kind == AllToAll {
		return r.comm.AllToAll(ctx, send, recv)
	}
	return r.comm.AllReduce(ctx, send, recv)
}

// fill writes this rank's input: small integers, so that every sum of up
// to 1024 ranks is exact in float32.
func (r *runner) fill(b []float32) {
	rank := r.p.Rank
	if r.p.Kind == AllToAll {
		blk := len(b) / r.n
		for d := 0; d < r.n; d++ {
			for i := 0; i < blk; i++ {
				b[d*blk+i] = a2aValue(rank, d, i)
			}
		}
		return
	}
	for i := range b {
		b[i] = arValue(rank, i)
	}
}

func arValue(rank, i int) float32 { return float32((i*7 + rank*13) % 101) }

func a2aValue(src, dst, i int) float32 { return float32(src*1000 + dst*100 + i%97) }

// wrong counts the elements of the result that are not exactly right.
func (r *runner) wrong(b []float32) int64 {
	var w int64
	if r.p.Kind == AllToAll {
		blk := len(b) / r.n
		for s := 0; s < r.n; s++ {
			for i := 0; i < blk; i++ {
				if b[s*blk+i] != a2aValue(s, r.p.Rank, i) {
					w++
				}
			}
		}
		return w
	}
	for i, v := range b {
		var want float32
		for k := 0; k < r.n; k++ {
			want += arValue(k, i)
		}
		if v != want {
			w++
		}
	}
	return w
}

type rankResult struct {
	TimeUs [2]float64 `json:"time_us"`
	Wrong  [2]int64   `json:"wrong"`
}

// size runs one size out of place and in place on every rank and returns
// the row (rank 0's has the average time over the ranks and the sum of
// their wrong elements).
func (r *runner) size(ctx context.Context, size int64) (Row, error) {
	count := r.count(size)
	send, recv := r.send[:count], r.recv[:count]
	r.curSize.Store(size)
	r.curOps.Store(0)
	var mine rankResult
	for k, inPlace := range []bool{false, true} {
		in := send
		if inPlace {
			in = recv
		}
		r.fill(in)
		for i := 0; i < r.p.Warmup; i++ {
			if err := r.op(ctx, in, recv); err != nil {
				return Row{}, err
			}
		}
		if err := r.g.Barrier(ctx); err != nil {
			return Row{}, err
		}
		start := time.Now()
		for i := 0; i < r.p.Iters; i++ {
			if err := r.op(ctx, in, recv); err != nil {
				return Row{}, err
			}
		}
		mine.TimeUs[k] = float64(time.Since(start).Nanoseconds()) / 1e3 / float64(r.p.Iters)
		mine.Wrong[k] = -1
		if r.p.Check == 1 {
			r.fill(in)
			if !inPlace {
				clear(recv) // a result left from the timed runs must not pass the check
			}
			if err := r.op(ctx, in, recv); err != nil {
				return Row{}, err
			}
			mine.Wrong[k] = r.wrong(recv)
		}
	}
	b, _ := json.Marshal(mine)
	all, err := r.g.AllGather(ctx, b)
	if err != nil {
		return Row{}, err
	}
	row := Row{Bytes: int64(count) * 4, Count: int64(count), Type: "float", Redop: "sum", Root: -1}
	if r.p.Kind == AllReduce {
		row.Algo = r.comm.AllReduceAlgo(count).String()
	}
	if r.p.Kind == AllToAll {
		row.Redop = "none"
	}
	for k, h := range []*Result{&row.Out, &row.In} {
		var sum float64
		h.Wrong = 0
		for _, b := range all {
			var rr rankResult
			if err := json.Unmarshal(b, &rr); err != nil {
				return Row{}, fmt.Errorf("a rank's result: %w", err)
			}
			sum += rr.TimeUs[k]
			if rr.Wrong[k] < 0 {
				h.Wrong = -1
			} else if h.Wrong >= 0 {
				h.Wrong += rr.Wrong[k]
			}
		}
		h.TimeUs = sum / float64(len(all))
		bandwidth(h, row.Bytes, r.p.Kind, r.n)
	}
	return row, nil
}
