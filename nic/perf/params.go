// Package perf is the engine of mrc-write-bw and mrc-write-lat, perftest's
// ib_write_bw and ib_write_lat for the softmrc soft NIC: the same roles
// (server without an address, client with the server's address), the same
// flags, the same out-of-band TCP exchange on port 18515 and the same
// result tables, plus --verify (the server checks every byte landed) and
// --json.
package perf

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/softmrc/softmrc/internal/cliargs"
	"github.com/softmrc/softmrc/internal/wire"
	"github.com/softmrc/softmrc/nic/verbs"
)

// Kind is the test: bandwidth or latency.
type Kind int

// Tests.
const (
	BW Kind = iota
	Lat
)

func (k Kind) String() string {
	if k == Lat {
		return "Latency"
	}
	return "BW"
}

// DefaultPort is perftest's out-of-band TCP port.
const DefaultPort = 18515

// DefaultDevice is the device socket used when -d is not given and
// MRC_DEVICE is unset.
const DefaultDevice = "/run/mrc/nic.sock"

// Params are the test's options. The client's test parameters (sizes,
// iterations, duration, QPs, depth, -b, --verify) are sent to the server,
// which follows them, so the server may be started with defaults.
type Params struct {
	Kind     Kind
	Server   string // empty: this is the server
	Device   string
	Port     int
	Bind     string // server: the address to listen on
	Size     int
	All      bool
	Iters    int
	Duration int // seconds; 0 = iteration mode
	QPs      int
	MTU      int
	TxDepth  int
	Bidir    bool
	Gbits    bool
	Infinite bool
	Verify   bool
	JSON     bool
	Unsig    bool
	// CQMod asks for one completion per CQMod work requests of a QP
	// (perftest's --cq-mod); bandwidth test only, at most TxDepth.
	CQMod int
	// Transport of every QP; both sides must be started with the same
	// (checked in the out-of-band exchange).
	Transport verbs.Transport
	// EVs, when set, pins every QP of this side to exactly these entropy
	// values (verbs.Remote.EVs): the paths this side sends on. Not sent to
	// the peer; each side pins its own.
	EVs []uint32

	// Spin is how long this side polls its completion ring before it
	// sleeps (verbs.Options.Spin); NoRing keeps it on the device socket.
	// Each side its own: not sent to the peer.
	Spin   time.Duration `json:"-"`
	NoRing bool          `json:"-"`
	// HeldWait is verbs.Options.HeldWait (env MRC_VERBS_HELD_WAIT).
	HeldWait time.Duration `json:"-"`
	// RateLimit, when not 0, caps what this side posts (mrc-write-bw):
	// messages are posted no faster than RateLimit (bit/s, or messages/s
	// with RatePPS), perftest's --rate_limit with the software limiter.
	// Not sent to the peer (the peer's own flag limits its side).
	RateLimit float64
	RatePPS   bool

	// OnListen, when set, is called with the server's listening address
	// (tests listen on port 0).
	OnListen func(addr string) `json:"-"`
	// MaxReports bounds --run_infinitely (0: until interrupted).
	MaxReports int
	// InProcess runs the NIC inside the tool (inprocess.go) from the
	// mrc-nicd config NICConfig, instead of connecting to mrc-nicd at
	// Device. Each side its own: not sent to the peer.
	InProcess bool   `json:"-"`
	NICConfig string `json:"-"`
}

// sizes returns the message sizes to run.
func (p *Params) sizes() []int {
	if !p.All {
		return []int{p.Size}
	}
	var s []int
	for n := 2; n <= 1<<23; n *= 2 {
		s = append(s, n)
	}
	return s
}

// DefaultCQMod is mrc-write-bw's --cq-mod bound, perftest's default: a
// completion per work request costs the application a wakeup and the daemon
// a futex call per message, which at 64 KiB was a tenth of a sending
// daemon's CPU per byte (docs/performance.md).
const DefaultCQMod = 100

// cqMod is the CQ moderation the bandwidth test applies. Given (--cq-mod):
// that, at most the send queue depth, else a full queue could hold no
// signaled request and nothing would complete. By default: DefaultCQMod, at
// most half the depth, so that the queue is refilled before it drains
// (perftest clamps only to the depth, and a -t at or below 100 then runs
// in bursts).
func (p *Params) cqMod() uint64 {
	if p.CQMod == 0 {
		return uint64(max(1, min(DefaultCQMod, p.TxDepth/2)))
	}
	return uint64(max(1, min(p.CQMod, p.TxDepth)))
}

// ErrUsage is returned for bad command lines (the message says which).
var ErrUsage = errors.New("usage")

// Parse reads a perftest-style command line. Flags may come before or after
// the server address; -x and --x are the same.
func Parse(kind Kind, args []string, stderr io.Writer) (*Params, error) {
	p := &Params{Kind: kind}
	name := "mrc-write-bw"
	defSize, defIters, defDepth := 65536, 5000, 128
	if kind == Lat {
		name, defSize, defIters, defDepth = "mrc-write-lat", 2, 1000, 1
	}
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	dev := os.Getenv("MRC_DEVICE")
	if dev == "" {
		dev = DefaultDevice
	}
	fs.StringVar(&p.Device, "d", dev, "device: mrc-nicd's device socket (env MRC_DEVICE)")
	fs.StringVar(&p.Device, "ib-dev", dev, "same as -d")
	fs.IntVar(&p.Port, "p", DefaultPort, "TCP port of the out-of-band exchange")
	fs.IntVar(&p.Port, "port", DefaultPort, "same as -p")
	fs.StringVar(&p.Bind, "bind", "", "server: address to listen on (default: every address)")
	fs.IntVar(&p.Size, "s", defSize, "message size in bytes")
	fs.IntVar(&p.Size, "size", defSize, "same as -s")
	fs.BoolVar(&p.All, "a", false, "run sizes 2 .. 2^23 (powers of two)")
	fs.BoolVar(&p.All, "all", false, "same as -a")
	fs.IntVar(&p.Iters, "n", defIters, "iterations per size (at least 5)")
	fs.IntVar(&p.Iters, "iters", defIters, "same as -n")
	fs.IntVar(&p.Duration, "D", 0, "run each size for this many seconds instead of -n iterations")
	fs.IntVar(&p.Duration, "duration", 0, "same as -D")
	qpHelp := "number of QPs"
	if kind == Lat {
		qpHelp = "number of QPs: the latency test runs on one, more are refused"
	}
	fs.IntVar(&p.QPs, "q", 1, qpHelp)
	fs.IntVar(&p.QPs, "qp", 1, "same as -q")
	fs.IntVar(&p.MTU, "m", 0, "RoCE MTU (1024, 2048, 4096); must equal mrc-nicd's (its config mtu: or its -mtu flag sets it)")
	fs.IntVar(&p.MTU, "mtu", 0, "same as -m")
	fs.IntVar(&p.TxDepth, "t", defDepth, "send queue depth: work requests in flight per QP")
	fs.IntVar(&p.TxDepth, "tx-depth", defDepth, "same as -t")
	fs.BoolVar(&p.Bidir, "b", false, "bidirectional: both sides write at once")
	fs.BoolVar(&p.Bidir, "bidirectional", false, "same as -b")
	fs.BoolVar(&p.Gbits, "report_gbits", false, "report Gb/sec (10^9 bit) instead of MiB/sec")
	fs.BoolVar(&p.Infinite, "run_infinitely", false, "repeat -D (default 5 s) rounds until interrupted")
	fs.BoolVar(&p.Verify, "verify", false, "check that every byte landed (the server reports mismatches)")
	fs.BoolVar(&p.JSON, "json", false, "print results as JSON on stdout (the banner goes to stderr)")
	fs.BoolVar(&p.Unsig, "unsignaled", false, "only the last of each batch of work requests asks for a completion (instead of --cq-mod)")
	if kind == BW {
		const cqHelp = "CQ moderation, as perftest's: one work request in N asks for a completion, and the last of the run (1: every one; at most -t; 0: 100, at most half of -t)"
		fs.IntVar(&p.CQMod, "Q", 0, cqHelp)
		fs.IntVar(&p.CQMod, "cq-mod", 0, "same as -Q")
	}
	transport := fs.String("transport", "mrc", "QP transport: mrc, or roce (the RoCEv2 RC baseline: one path per QP, go-back-N, DCQCN; docs/roce.md); both sides must use the same")
	evs := fs.String("evs", "", "pin every QP of this side to these EVs (the paths it sends on), comma-separated: a number (0x10000000) or PLANE.T1 (1.0 = plane 1 through T1 0, several of one PLANE.T1 get distinct entropy); empty: mrc-nicd spreads its EVs over every plane and T1")
	vo, err := verbs.DefaultOptions()
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrUsage, err)
	}
	fs.DurationVar(&p.Spin, "spin", vo.Spin, "poll the completion ring this long before sleeping (0: sleep at once; costs a CPU while it spins; env MRC_VERBS_SPIN); see docs/performance.md for what pays on this machine")
	fs.DurationVar(&p.HeldWait, "held-wait", vo.HeldWait, "sleep this long at most on the completion ring without giving the Go scheduler its P back (0 .. 1ms; 0: never; by default 1ms when the tool runs with one P, as mrc-write-lat does, else 0; env MRC_VERBS_HELD_WAIT); see docs/nic.md, The latency path")
	fs.BoolVar(&p.NoRing, "no-ring", vo.NoRing, "post and complete through the device socket instead of the shared-memory rings (env MRC_VERBS_RING=0)")
	fs.BoolVar(&p.InProcess, "in-process", false, "run the NIC inside this tool instead of connecting to mrc-nicd: it opens the host's ports from --nic-config itself and polls them on the tool's own thread, yielding to the test between turns, so no thread is woken per message (the host's mrc-nicd must not be running: bring the testbed up without --nics); -d is not used. See docs/nic.md, The in-process NIC")
	fs.StringVar(&p.NICConfig, "nic-config", os.Getenv("MRC_NIC_CONFIG"), "with --in-process: the host's mrc-nicd config file (env MRC_NIC_CONFIG, which mrc-testbed exec sets)")
	rate := fs.Float64("rate_limit", 0, "cap what this side posts at this rate in --rate_units (a software limiter spacing the messages; 0: none)")
	units := fs.String("rate_units", "g", "units of --rate_limit: M (Mbit/s), g (Gbit/s) or p (messages/s), as perftest's")
	fs.IntVar(&p.MaxReports, "max_reports", 0, "with --run_infinitely: stop after this many reports (0: until SIGINT)")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: %s [options]            (server)\n       %s [options] SERVER     (client)\n\n", name, name)
		fs.PrintDefaults()
	}
	pos, err := cliargs.Parse(fs, args)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrUsage, err)
	}
	if len(pos) > 1 {
		return nil, fmt.Errorf("%w: one server address expected, got %q", ErrUsage, pos)
	}
	tr, err := verbs.ParseTransport(*transport)
	if err != nil {
		return nil, fmt.Errorf("%w: --transport: %v", ErrUsage, err)
	}
	p.Transport = tr
	if p.EVs, err = ParseEVs(*evs); err != nil {
		return nil, fmt.Errorf("%w: --evs: %v", ErrUsage, err)
	}
	if len(p.EVs) > 0 && tr != verbs.TransportMRC {
		return nil, fmt.Errorf("%w: --evs: only the mrc transport takes an EV set (roce uses one path per QP)", ErrUsage)
	}
	if len(pos) == 1 {
		p.Server = pos[0]
	}
	if err := p.setRate(*rate, *units); err != nil {
		return nil, err
	}
	return p, p.check()
}

// setRate reads --rate_limit and --rate_units.
func (p *Params) setRate(rate float64, units string) error {
	if rate < 0 || math.IsNaN(rate) || math.IsInf(rate, 0) {
		return fmt.Errorf("%w: --rate_limit %g: want a rate > 0, or 0 for none", ErrUsage, rate)
	}
	switch units {
	case "M":
		p.RateLimit = rate * 1e6
	case "g":
		p.RateLimit = rate * 1e9
	case "p":
		p.RateLimit, p.RatePPS = rate, rate > 0
	default:
		return fmt.Errorf("%w: --rate_units %q: want M (Mbit/s), g (Gbit/s) or p (messages/s)", ErrUsage, units)
	}
	if rate > 0 && p.Kind == Lat {
		return fmt.Errorf("%w: --rate_limit: the latency test sends one message at a time already", ErrUsage)
	}
	return nil
}

func (p *Params) check() error {
	var errs []string
	if p.Size < 1 || p.Size > 1<<30 {
		errs = append(errs, fmt.Sprintf("-s %d: want 1 .. 2^30 bytes", p.Size))
	}
	if p.Iters < 5 {
		errs = append(errs, fmt.Sprintf("-n %d: at least 5 iterations", p.Iters))
	}
	if p.QPs < 1 || p.QPs > 256 {
		errs = append(errs, fmt.Sprintf("-q %d: want 1..256 QPs", p.QPs))
	}
	if p.TxDepth < 1 || p.TxDepth > 8192 {
		errs = append(errs, fmt.Sprintf("-t %d: want 1..8192", p.TxDepth))
	}
	if p.CQMod < 0 {
		errs = append(errs, fmt.Sprintf("--cq-mod %d: want at least 1 (0: the default)", p.CQMod))
	}
	if p.Duration < 0 {
		errs = append(errs, fmt.Sprintf("-D %d: want seconds >= 0", p.Duration))
	}
	if p.Infinite && p.Duration == 0 {
		p.Duration = 5
	}
	if p.Port < 0 || p.Port > 65535 {
		errs = append(errs, fmt.Sprintf("-p %d: not a TCP port", p.Port))
	}
	if p.Spin < 0 || p.Spin > time.Second {
		errs = append(errs, fmt.Sprintf("--spin %v: want 0 .. 1s", p.Spin))
	}
	if p.HeldWait < 0 || p.HeldWait > verbs.DefaultHeldWait {
		errs = append(errs, fmt.Sprintf("--held-wait %v: want 0 .. %v", p.HeldWait, verbs.DefaultHeldWait))
	}
	if p.InProcess && p.NICConfig == "" {
		errs = append(errs, "--in-process: no NIC config: pass --nic-config FILE (the host's mrc-nicd config; mrc-testbed writes <run dir>/host/<host>.nic.yaml and exec sets MRC_NIC_CONFIG)")
	}
	if p.Kind == Lat && p.Bidir {
		errs = append(errs, "-b: the latency test is a ping-pong already")
	}
	if p.Kind == Lat && p.QPs > 1 {
		// The ping-pong runs on one QP: more would be connected and idle.
		errs = append(errs, fmt.Sprintf("-q %d: the latency test runs on one QP", p.QPs))
	}
	if len(errs) > 0 {
		return fmt.Errorf("%w: %s", ErrUsage, strings.Join(errs, "; "))
	}
	return nil
}

// perMessage is the time --rate_limit allots one message of size bytes
// (0: no limit).
func (p *Params) perMessage(size int) time.Duration {
	switch {
	case p.RateLimit <= 0:
		return 0
	case p.RatePPS:
		return time.Duration(float64(time.Second) / p.RateLimit)
	}
	return time.Duration(float64(size) * 8 / p.RateLimit * float64(time.Second))
}

func (p *Params) dur() time.Duration { return time.Duration(p.Duration) * time.Second }

// maxEVs is the largest EV set a QP takes (nic/vproto ConnectQP.EVs).
const maxEVs = 256

// ParseEVs reads --evs: comma-separated EVs, each a number (any Go integer
// syntax: 0x10000000, 268435456) or PLANE.T1, which builds the EV of that
// plane and T1 (docs/conventions.md bit layout) with an entropy that differs
// between repeats of one PLANE.T1, so "1.0,1.0" is two paths through T1 0.
// Empty gives no set (the daemon chooses).
func ParseEVs(s string) ([]uint32, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, nil
	}
	var evs []uint32
	seen := map[uint32]bool{}
	for _, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		var ev uint32
		if plane, t1, ok := strings.Cut(item, "."); ok {
			pl, err := strconv.ParseUint(plane, 10, 8)
			if err != nil || pl >= wire.MaxPlanes {
				return nil, fmt.Errorf("%q: plane %q is not 0..%d", item, plane, wire.MaxPlanes-1)
			}
			t, err := strconv.ParseUint(t1, 10, 8)
			if err != nil {
				return nil, fmt.Errorf("%q: T1 %q is not 0..255", item, t1)
			}
			// The entropy is the item's position, offset so that it is
			// never 0: distinct EVs for repeated PLANE.T1 items.
			ev = uint32(wire.MakeEV(wire.Plane(pl), uint8(t), 0x100+uint32(len(evs))))
		} else {
			n, err := strconv.ParseUint(item, 0, 32)
			if err != nil {
				return nil, fmt.Errorf("%q: want a 32-bit number (0x10000000) or PLANE.T1 (1.0)", item)
			}
			ev = uint32(n)
		}
		if seen[ev] {
			return nil, fmt.Errorf("%q: EV %s given twice", item, wire.EV(ev))
		}
		seen[ev] = true
		evs = append(evs, ev)
	}
	if len(evs) > maxEVs {
		return nil, fmt.Errorf("%d EVs: a QP takes at most %d", len(evs), maxEVs)
	}
	return evs, nil
}
