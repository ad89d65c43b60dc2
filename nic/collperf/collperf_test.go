package collperf

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/softmrc/softmrc/nic/collective"
	"github.com/softmrc/softmrc/nic/daemon/daemontest"
)

func TestSizes(t *testing.T) {
	for _, c := range []struct {
		args string
		want []int64
	}{
		{"-b 8 -e 64 -f 2", []int64{8, 16, 32, 64}},
		{"-b 4 -e 1K -f 4", []int64{4, 16, 64, 256, 1024}},
		{"-b 1M -e 3M -i 1M", []int64{1 << 20, 2 << 20, 3 << 20}},
		{"", []int64{32 << 20}},
		{"-b 0 -e 0", []int64{0}},
	} {
		p, err := Parse(AllReduce, strings.Fields(c.args), io.Discard)
		if err != nil {
			t.Fatalf("%q: %v", c.args, err)
		}
		if got := p.Sizes(); fmt.Sprint(got) != fmt.Sprint(c.want) {
			t.Errorf("%q: sizes %v, want %v", c.args, got, c.want)
		}
	}
	for _, bad := range []string{"-b 2M -e 1M", "-d half", "-o max", "-c 2", "-n 0", "--nranks 2", "--rank 3 --nranks 2 --rendezvous x", "--transport ib", "-b 1X"} {
		if _, err := Parse(AllReduce, strings.Fields(bad), io.Discard); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	// -g is accepted (and ignored) so nccl-tests command lines run.
	if _, err := Parse(AllToAll, strings.Fields("-b 8 -e 128M -f 2 -g 8"), io.Discard); err != nil {
		t.Errorf("-g refused: %v", err)
	}
}

// nccl-tests' bus bandwidth: all-reduce 2(n−1)/n, all-to-all (n−1)/n.
func TestBusBandwidth(t *testing.T) {
	for _, c := range []struct {
		k            Kind
		n            int
		bytes        int64
		us           float64
		algbw, busbw float64
	}{
		{AllReduce, 4, 1e9, 1e6, 1, 1.5},
		{AllReduce, 2, 5e8, 1e6, 0.5, 0.5},
		{AllToAll, 4, 2e9, 1e6, 2, 1.5},
		{AllToAll, 8, 1e9, 5e5, 2, 1.75},
	} {
		r := Result{TimeUs: c.us}
		bandwidth(&r, c.bytes, c.k, c.n)
		if r.AlgBW != c.algbw || r.BusBW != c.busbw {
			t.Errorf("%+v: algbw %v busbw %v", c, r.AlgBW, r.BusBW)
		}
	}
	for _, c := range []struct {
		us   float64
		want string
	}{{12.345, "  12.35"}, {123.45, "  123.5"}, {12345.6, "  12346"}} {
		if got := timeStr(c.us); got != c.want {
			t.Errorf("timeStr(%v) = %q, want %q", c.us, got, c.want)
		}
	}
}

// The check counts exactly the elements that are wrong.
func TestCheckCountsWrongElements(t *testing.T) {
	for _, k := range []Kind{AllReduce, AllToAll} {
		r := &runner{p: &Params{Kind: k, Rank: 1}, n: 3}
		b := make([]float32, 30)
		if k == AllReduce {
			for i := range b {
				for s := 0; s < 3; s++ {
					b[i] += arValue(s, i)
				}
			}
		} else {
			for s := 0; s < 3; s++ {
				for i := 0; i < 10; i++ {
					b[s*10+i] = a2aValue(s, 1, i)
				}
			}
		}
		if w := r.wrong(b); w != 0 {
			t.Fatalf("%v: %d wrong in a right buffer", k, w)
		}
		b[0]++
		b[29] = 0
		if w := r.wrong(b); w != 2 {
			t.Fatalf("%v: %d wrong, want 2", k, w)
		}
	}
}

var rowRE = regexp.MustCompile(`(?m)^ +(\d+) +(\d+) +float +(sum|none) +-1 +([\d.]+) +([\d.]+) +([\d.]+) +(\S+) +([\d.]+) +([\d.]+) +([\d.]+) +(\S+)$`)

// Both tools on two ranks over two in-process mrc-nicd daemons: one row per
// size from 4 B to 1 MiB, every element checked, #wrong 0.
func TestToolsTwoRanks(t *testing.T) {
	if testing.Short() {
		t.Skip("-short")
	}
	nics := daemontest.Start(t, 2)
	for _, k := range []Kind{AllReduce, AllToAll} {
		t.Run(k.Name(), func(t *testing.T) {
			addr := make(chan string, 1)
			var outs [2]bytes.Buffer
			errs := make([]error, 2)
			var wg sync.WaitGroup
			for r := 0; r < 2; r++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					args := strings.Fields(fmt.Sprintf("-b 4 -e 1M -f 4 -n 3 -w 1 --rank %d --nranks 2 --device %s --rendezvous 127.0.0.1:0 --timeout 1m", r, nics.Sock[r]))
					if k == AllReduce {
						// Direct up to 1 KiB, the ring above.
						args = append(args, "--direct_max", "1K")
					}
					p, err := Parse(k, args, io.Discard)
					if err != nil {
						errs[r] = err
						return
					}
					if r == 0 {
						p.OnListen = func(a string) { addr <- strings.Replace(a, "[::]", "127.0.0.1", 1) }
					} else {
						p.Rendezvous = <-addr
					}
					errs[r] = Run(context.Background(), p, &outs[r], io.Discard)
				}()
			}
			wg.Wait()
			t.Logf("\n%s", outs[0].String())
			for r, err := range errs {
				if err != nil {
					t.Fatalf("rank %d: %v", r, err)
				}
			}
			rows := rowRE.FindAllStringSubmatch(outs[0].String(), -1)
			if len(rows) != 10 {
				t.Fatalf("%d rows, want 10 (4 B .. 1 MiB by 4)", len(rows))
			}
			for _, m := range rows {
				if m[7] != "0" || m[11] != "0" {
					t.Errorf("row %q: #wrong not 0", m[0])
				}
			}
			if outs[1].Len() != 0 {
				t.Errorf("rank 1 printed:\n%s", outs[1].String())
			}
			if !strings.Contains(outs[0].String(), "# Out of bounds values : 0 OK") {
				t.Error("no OK footer")
			}
			if banner := "# all-reduce algorithm: direct up to 1K"; (k == AllReduce) != strings.Contains(outs[0].String(), banner) {
				t.Errorf("%v: banner line %q present: %v", k, banner, !strings.Contains(outs[0].String(), banner))
			}
		})
	}
}

// --json carries the rows, not-checked as -1, and the average busbw.
func TestJSONReport(t *testing.T) {
	var js bytes.Buffer
	if err := writeJSON(&js, &Params{Kind: AllReduce, NRanks: 2, Transport: "mrc", QPs: 1}, []Row{{Bytes: 8, Count: 2, Type: "float", Redop: "sum", Root: -1,
		Out: Result{TimeUs: 10, AlgBW: 0.0008, BusBW: 0.0008, Wrong: 3}, In: Result{TimeUs: 20, AlgBW: 0.0004, BusBW: 0.0004, Wrong: -1}}}); err != nil {
		t.Fatal(err)
	}
	var rep Report
	if err := json.Unmarshal(js.Bytes(), &rep); err != nil || len(rep.Rows) != 1 || rep.Rows[0].In.Wrong != -1 ||
		math.Abs(rep.AvgBusBW-0.0006) > 1e-12 || rep.Wrong != 3 || rep.Collective != "mrc-allreduce-perf" {
		t.Errorf("json report %+v (%v):\n%s", rep, err, js.String())
	}
}

// --algo and --direct_max: all-reduce only, checked.
func TestAlgoFlags(t *testing.T) {
	for _, c := range []struct {
		kind Kind
		args string
		ok   bool
	}{
		{AllReduce, "", true},
		{AllReduce, "--algo ring", true},
		{AllReduce, "--algo direct --direct_max 4M", true},
		{AllReduce, "--algo tree", false},
		{AllReduce, "--direct_max 0", false},
		{AllReduce, "--direct_max 2G", false},
		{AllToAll, "--algo ring", false},
		{AllToAll, "--direct_max 1K", false},
	} {
		p, err := Parse(c.kind, strings.Fields(c.args), io.Discard)
		if (err == nil) != c.ok || (err != nil && !errors.Is(err, ErrUsage)) {
			t.Errorf("%v %q: %v, want ok %v (a usage error otherwise)", c.kind, c.args, err, c.ok)
		}
		if c.args == "" && err == nil && (p.Algo != collective.AlgoAuto || p.DirectMax != collective.DefaultDirectMax) {
			t.Errorf("defaults: --algo %v --direct_max %d", p.Algo, p.DirectMax)
		}
	}
}
