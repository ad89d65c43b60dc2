// Package collperf is the engine of mrc-allreduce-perf and
// mrc-alltoall-perf, nccl-tests' all_reduce_perf and alltoall_perf for the
// softmrc soft NIC: the same flags (-b -e -f -i -n -w -c; -g is accepted
// and ignored), the same table (out-of-place and in-place time, algbw,
// busbw, #wrong) and bus bandwidth formulas, one process per rank joined by
// an out-of-band rendezvous over the management network (rank 0 is the
// meeting point).
package collperf

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/softmrc/softmrc/nic/collective"
	"github.com/softmrc/softmrc/nic/rendezvous"
)

// Kind is the collective.
type Kind int

// Collectives.
const (
	AllReduce Kind = iota
	AllToAll
)

// Name is the tool's name.
func (k Kind) Name() string {
	if k == AllToAll {
		return "mrc-alltoall-perf"
	}
	return "mrc-allreduce-perf"
}

// DefaultDevice is the device socket when neither --device nor MRC_DEVICE
// says.
const DefaultDevice = "/run/mrc/nic.sock"

// Params are the run's options.
type Params struct {
	Kind       Kind
	MinBytes   int64
	MaxBytes   int64
	StepBytes  int64
	StepFactor int
	Iters      int
	Warmup     int
	Check      int
	GPUs       int // -g: accepted, ignored
	Datatype   string
	Op         string
	Rank       int
	NRanks     int
	Rendezvous string
	Device     string
	Transport  string
	QPs        int
	Slots      int
	SlotSize   int
	Algo       collective.Algo // all-reduce: auto, ring or direct
	DirectMax  int64           // all-reduce: auto's largest direct size in bytes
	Timeout    time.Duration
	Stall      time.Duration
	JSON       bool
	// InProcess runs the NIC inside the tool (nic/inprocess) from the
	// mrc-nicd config NICConfig instead of connecting to Device.
	InProcess bool
	NICConfig string

	// OnListen (tests): rank 0's rendezvous address once it listens.
	OnListen func(string) `json:"-"`
}

// ErrUsage marks a bad command line.
var ErrUsage = errors.New("usage")

// sizeFlag parses nccl-tests sizes: a number with an optional K, M or G
// (powers of 1024).
type sizeFlag struct{ v *int64 }

func (s sizeFlag) String() string {
	if s.v == nil {
		return ""
	}
	return strconv.FormatInt(*s.v, 10)
}

func (s sizeFlag) Set(v string) error {
	n, err := ParseSize(v)
	if err != nil {
		return err
	}
	*s.v = n
	return nil
}

// ParseSize reads 8, 1K, 32M, 1G (K = 1024).
func ParseSize(v string) (int64, error) {
	mult := int64(1)
	switch strings.ToUpper(v[len(v)-min(len(v), 1):]) {
	case "K":
		mult = 1 << 10
	case "M":
		mult = 1 << 20
	case "G":
		mult = 1 << 30
	}
	if mult > 1 {
		v = v[:len(v)-1]
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("size %q: want a number of bytes with an optional K, M or G", v)
	}
	return n * mult, nil
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil {
		return v
	}
	return def
}

func envStr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// Parse reads a command line. Rank, size, rendezvous and device default to
// MRC_RANK, MRC_NRANKS, MRC_RENDEZVOUS and MRC_DEVICE, which
// `mrc-testbed exec h0,h1,... --` sets for every host it starts.
func Parse(kind Kind, args []string, stderr io.Writer) (*Params, error) {
	p := &Params{Kind: kind, MinBytes: 32 << 20, MaxBytes: 32 << 20, StepBytes: 1 << 20}
	fs := flag.NewFlagSet(kind.Name(), flag.ContinueOnError)
	fs.SetOutput(stderr)
	both := func(short, long string, f func(name string)) { f(short); f(long) }
	both("b", "minbytes", func(n string) {
		fs.Var(sizeFlag{&p.MinBytes}, n, "minimum size in bytes to start with (K, M, G suffixes)")
	})
	both("e", "maxbytes", func(n string) { fs.Var(sizeFlag{&p.MaxBytes}, n, "maximum size in bytes to end at") })
	both("i", "stepbytes", func(n string) { fs.Var(sizeFlag{&p.StepBytes}, n, "fixed increment between sizes when -f is 1") })
	both("f", "stepfactor", func(n string) {
		fs.IntVar(&p.StepFactor, n, 1, "multiplication factor between sizes (1: add -i instead)")
	})
	both("n", "iters", func(n string) { fs.IntVar(&p.Iters, n, 20, "timed iterations per size") })
	both("w", "warmup_iters", func(n string) { fs.IntVar(&p.Warmup, n, 5, "untimed warmup iterations per size") })
	both("c", "check", func(n string) {
		fs.IntVar(&p.Check, n, 1, "1: check every element of one more run per size (#wrong); 0: #wrong is N/A")
	})
	both("g", "ngpus", func(n string) {
		fs.IntVar(&p.GPUs, n, 1, "accepted for nccl-tests command lines and ignored: one rank per process and host")
	})
	both("d", "datatype", func(n string) { fs.StringVar(&p.Datatype, n, "float", "data type: float (float32) only") })
	both("o", "op", func(n string) { fs.StringVar(&p.Op, n, "sum", "reduction (all-reduce): sum only") })
	fs.IntVar(&p.Rank, "rank", envInt("MRC_RANK", 0), "this process's rank, 0..nranks-1 (env MRC_RANK)")
	fs.IntVar(&p.NRanks, "nranks", envInt("MRC_NRANKS", 1), "number of ranks, one process each (env MRC_NRANKS)")
	fs.StringVar(&p.Rendezvous, "rendezvous", os.Getenv("MRC_RENDEZVOUS"),
		fmt.Sprintf("rank 0's management address, host[:port] (default port %d; env MRC_RENDEZVOUS); rank 0 listens there", rendezvous.DefaultPort))
	fs.StringVar(&p.Device, "device", envStr("MRC_DEVICE", DefaultDevice), "mrc-nicd's device socket (env MRC_DEVICE)")
	fs.BoolVar(&p.InProcess, "in-process", false, "run the NIC inside this rank instead of connecting to mrc-nicd: it opens the host's ports from --nic-config and runs the engine on the rank's own thread (the host's mrc-nicd must not run; docs/nic.md, The in-process NIC)")
	fs.StringVar(&p.NICConfig, "nic-config", os.Getenv("MRC_NIC_CONFIG"), "with --in-process: the host's mrc-nicd config (env MRC_NIC_CONFIG, which mrc-testbed exec sets)")
	fs.StringVar(&p.Transport, "transport", "mrc", "transport of every QP: "+transportsHelp)
	fs.IntVar(&p.QPs, "qps", 1, "QPs per peer (messages are striped over them)")
	fs.IntVar(&p.Slots, "slots", 8, "receive FIFO slots per QP (messages in flight)")
	fs.IntVar(&p.SlotSize, "slot_bytes", 64<<10, "bytes per slot: the largest message")
	algoHelp := ""
	if kind == AllReduce {
		fs.Var(algoFlag{&p.Algo}, "algo", "all-reduce algorithm: ring, direct (every rank sends its buffer to every peer and sums them all: one step) or auto (direct up to --direct_max, ring above)")
		p.DirectMax = collective.DefaultDirectMax
		fs.Var(sizeFlag{&p.DirectMax}, "direct_max", "--algo auto: the largest all-reduce run direct, in bytes (K, M, G suffixes)")
		algoHelp = fmt.Sprintf("\n\t[--algo auto|ring|direct]                     default auto: direct up to --direct_max, ring above\n\t[--direct_max <bytes>]                        default %s", sizeName(collective.DefaultDirectMax))
	}
	fs.BoolVar(&p.JSON, "json", false, "rank 0 prints the results as JSON on stdout (the table goes to stderr)")
	fs.DurationVar(&p.Timeout, "timeout", 10*time.Minute, "the whole run stops with an error after this long")
	fs.DurationVar(&p.Stall, "stall", 30*time.Second, "an operation with no completion for this long fails (a peer died)")
	fs.Usage = func() {
		fmt.Fprintf(stderr, `USAGE: %s (one process per rank; rank 0 prints the table)
	[-b,--minbytes <min size in bytes>]           default 32M (K, M, G suffixes)
	[-e,--maxbytes <max size in bytes>]           default 32M
	[-i,--stepbytes <increment size>]             default 1M
	[-f,--stepfactor <increment factor>]          default 1 (then -i is added)
	[-n,--iters <iteration count>]                default 20
	[-w,--warmup_iters <warmup iteration count>]  default 5
	[-c,--check <0/1>]                            default 1: check every element (#wrong)
	[-g,--ngpus <gpus per thread>]                accepted and ignored: one rank per process and host
	[-d,--datatype <float>]                       float (float32) only
	[-o,--op <sum>]                               sum only
	[--rank <r>] [--nranks <n>]                   env MRC_RANK, MRC_NRANKS
	[--rendezvous <rank 0 mgmt host[:port]>]      env MRC_RENDEZVOUS; port %d
	[--device <mrc-nicd socket>]                  env MRC_DEVICE; default %s
	[--in-process [--nic-config <file>]]          the NIC inside this rank, from the host's mrc-nicd config (env MRC_NIC_CONFIG)
	[--transport %s]
	[--qps <QPs per peer>]                        default 1
	[--slots <n>] [--slot_bytes <bytes>]          receive FIFO per QP: default 8 x 64K%s
	[--timeout <duration>]                        default 10m: the whole run stops by then
	[--stall <duration>]                          default 30s: an operation without progress fails
	[--json]                                      rank 0: results as JSON on stdout, the table on stderr
	[-h,--help]

Rank 0 prints the table on stdout and a progress line on stderr every 5 s.
Start every rank at once, e.g. on a testbed:
  mrc-testbed exec h0,h1,h2,h3 -- %s -b 8 -e 64M -f 2
Bus bandwidth as in nccl-tests: %s.
`, kind.Name(), rendezvous.DefaultPort, DefaultDevice, transportsHelp, algoHelp, kind.Name(), busHelp(kind))
	}
	if err := fs.Parse(args); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrUsage, err)
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("%w: unexpected arguments %q", ErrUsage, fs.Args())
	}
	return p, p.check()
}

func busHelp(k Kind) string {
	if k == AllToAll {
		return "busbw = algbw x (n-1)/n"
	}
	return "busbw = algbw x 2(n-1)/n"
}

func (p *Params) check() error {
	var errs []string
	bad := func(f string, a ...any) { errs = append(errs, fmt.Sprintf(f, a...)) }
	if p.MinBytes < 0 || p.MaxBytes < p.MinBytes || p.MaxBytes > 1<<30 {
		bad("-b %d -e %d: want 0 <= min <= max <= 1G", p.MinBytes, p.MaxBytes)
	}
	if p.StepFactor < 1 || (p.StepFactor == 1 && p.StepBytes < 1 && p.MaxBytes > p.MinBytes) {
		bad("-f %d -i %d: want a factor > 1, or factor 1 with -i > 0", p.StepFactor, p.StepBytes)
	}
	if p.StepFactor > 1 && p.MinBytes == 0 && p.MaxBytes > 0 {
		bad("-b 0 with -f %d never grows: start at -b 4 or more", p.StepFactor)
	}
	if p.InProcess && p.NICConfig == "" {
		bad("--in-process: no NIC config: pass --nic-config FILE (the host's mrc-nicd config; mrc-testbed exec sets MRC_NIC_CONFIG)")
	}
	if p.Iters < 1 || p.Iters > 100000 {
		bad("-n %d: want 1..100000", p.Iters)
	}
	if p.Warmup < 0 || p.Warmup > 100000 {
		bad("-w %d: want 0..100000", p.Warmup)
	}
	if p.Check != 0 && p.Check != 1 {
		bad("-c %d: want 0 or 1", p.Check)
	}
	if p.Datatype != "float" && p.Datatype != "float32" {
		bad("-d %s: only float (float32) is implemented", p.Datatype)
	}
	if p.Op != "sum" {
		bad("-o %s: only sum is implemented", p.Op)
	}
	if p.NRanks < 1 || p.NRanks > 1024 || p.Rank < 0 || p.Rank >= p.NRanks {
		bad("--rank %d --nranks %d: want 0 <= rank < nranks <= 1024", p.Rank, p.NRanks)
	}
	if p.NRanks > 1 && p.Rendezvous == "" {
		bad("--nranks %d needs --rendezvous (rank 0's management address) or MRC_RENDEZVOUS", p.NRanks)
	}
	if _, err := parseTransport(p.Transport); err != nil {
		bad("%v", err)
	}
	if p.Kind == AllReduce {
		if p.DirectMax < 1 || p.DirectMax > 1<<30 {
			bad("--direct_max %d: want 1 .. 1G bytes", p.DirectMax)
		}
	}
	if p.Timeout <= 0 || p.Stall <= 0 {
		bad("--timeout and --stall must be > 0")
	}
	if len(errs) > 0 {
		return fmt.Errorf("%w: %s", ErrUsage, strings.Join(errs, "; "))
	}
	return nil
}

// Sizes lists the sizes in bytes as nccl-tests does: from -b to -e,
// multiplied by -f, or stepping by -i when -f is 1.
func (p *Params) Sizes() []int64 {
	var s []int64
	for size := p.MinBytes; size <= p.MaxBytes; {
		s = append(s, size)
		if p.StepFactor > 1 {
			if size == 0 {
				break
			}
			size *= int64(p.StepFactor)
		} else {
			if p.StepBytes < 1 {
				break
			}
			size += p.StepBytes
		}
	}
	return s
}

// algoFlag parses --algo into a collective.Algo (its zero value, auto, is
// the default).
type algoFlag struct{ v *collective.Algo }

func (a algoFlag) String() string {
	if a.v == nil {
		return collective.AlgoAuto.String()
	}
	return a.v.String()
}

func (a algoFlag) Set(s string) error {
	v, err := collective.ParseAlgo(s)
	if err != nil {
		return err
	}
	*a.v = v
	return nil
}

// sizeName prints a byte count as -b and -e take it (64K, 1M, 100).
func sizeName(n int64) string {
	switch {
	case n > 0 && n%(1<<30) == 0:
		return fmt.Sprintf("%dG", n>>30)
	case n > 0 && n%(1<<20) == 0:
		return fmt.Sprintf("%dM", n>>20)
	case n > 0 && n%(1<<10) == 0:
		return fmt.Sprintf("%dK", n>>10)
	}
	return strconv.FormatInt(n, 10)
}
