// Package daemon is mrc-nicd's core: it opens one AF_XDP port per plane,
// runs the MRC engine on one locked OS thread (frames from the ports into
// HandlePacket, Poll's frames out to the ports, wakeups on port readiness,
// requests and the engine's next deadline), feeds carrier changes to the
// engine as port down/up, serves the verbs device socket (nic/service) and
// exports Prometheus metrics.
package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/softmrc/softmrc/internal/mrc"
	"github.com/softmrc/softmrc/internal/pathtmpl"
	"github.com/softmrc/softmrc/internal/wire"
	"github.com/softmrc/softmrc/nic/config"
	"github.com/softmrc/softmrc/nic/denylist"
	"github.com/softmrc/softmrc/nic/oam"
	"github.com/softmrc/softmrc/nic/pathprobe"
	"github.com/softmrc/softmrc/nic/regions"
	"github.com/softmrc/softmrc/nic/service"
	"github.com/softmrc/softmrc/nic/vproto"
	"github.com/softmrc/softmrc/nic/xsk"
)

// Options configure New.
type Options struct {
	Config *config.Config
	// Ports, when set, are used instead of opening AF_XDP ports: Ports[i]
	// serves Config.Ports[i] (tests pass xsk.Pipe ends here).
	Ports []xsk.Port
	// NewEngine builds the engine; nil means the MRC engine (NewMRCEngine).
	NewEngine func(cfg *config.Config, mem mrc.Memory) (Engine, error)
	// NoCarrier skips the netlink carrier watchers (always for injected
	// ports).
	NoCarrier bool
	Logger    *slog.Logger
	// Capture, when set, is a pcap file that receives every frame the NIC
	// sends and receives (on CapturePort only, when set), at most
	// CaptureMax frames (0: 100000).
	Capture     string
	CapturePort string
	CaptureMax  int
	// Cooperative runs the engine loop as an ordinary goroutine that shares
	// the program's one P with the application in the same process (a
	// library NIC: mrc-write-lat --in-process). It never blocks in the
	// kernel: it yields the P (runtime.Gosched) after every turn, so a
	// goroutine its completions made runnable runs on the same thread at
	// once, with no thread wake-up; after busy_poll without work it naps
	// on the runtime's timers (at most coopNap), so a frame that arrives
	// then waits up to a nap. The caller sets GOMAXPROCS to 1 and polls
	// its completions the same way (verbs.Options.Cooperative); with more
	// Ps the loop still runs, as a spinning loop on a P of its own. One
	// engine thread only.
	Cooperative bool
	// Notify, with Cooperative, is called after every loop turn that did
	// work: nic/inprocess wakes the application's wait with it (the
	// application then finds its completions, or room to post).
	Notify func()

	// shard is set on the daemons of one NIC's engine threads (shard.go).
	shard *shardOpts
}

// Daemon is one soft NIC.
type Daemon struct {
	cfg       *config.Config
	log       *slog.Logger
	ports     []xsk.Port
	ifPorts   bool  // ports are AF_XDP sockets on cfg.Ports' interfaces (pathmtu.go)
	planes    []int // planes[i] is the plane of ports[i]
	byPlane   [wire.MaxPlanes]int
	eng       Engine
	tmpl      *pathtmpl.Template // srv6: for mrcctl's path column
	deny      *denylist.List     // the daemon's denylist (deny.go); loop-only after New
	oam       oamState           // uSID OAM probes in flight (oam.go); loop-only
	prober    *pathprobe.Prober  // path probes (pathprobe.go); nil when off; loop-only
	probeBuf  []pathprobe.Probe
	probesOff bool // paused by `paths stop` (overhead measurements)
	// qpRetired sums the counters of destroyed QPs (qpcounters.go), so
	// that the totals mrcctl and the metrics show never go back; loop only.
	qpRetired map[string]uint64
	qpScratch mrc.QPSnapshot
	// regions is the applications' registered memory and the engine's
	// mrc.Memory: each application (session) is one protection domain.
	regions *regions.Table
	svc     *service.Service
	metrics *http.Server

	start time.Time
	clk   loopClock  // the engine's clock (rx.go); loop only
	drain stallDrain // the backlog a stall left (rx.go); loop only
	gaps  gapWatch   // turns that start late (loopgap.go); loop only
	// wokeApp: this turn woke an application asleep on its ring (a futex
	// wake); loop only.
	wokeApp bool
	spin    spinGate // busy_poll off while the host is short of CPU (spingate.go); loop only
	// gapSlept is the loop's sleep that the gap watch does not count: each
	// sleep up to the timeout it asked for, so that a wake-up the scheduler
	// delays beyond it is a gap; loop only.
	gapSlept mrc.Time
	// heldPoll: the loop's short sleeps keep its P (heldPollMax); set
	// when the program has a P for every engine thread and one more.
	heldPoll bool
	coop     bool        // Options.Cooperative: coopLoop (coop.go)
	notify   func()      // Options.Notify
	cp       *coopPoller // coop with pollable ports: the loop's park (coop.go)
	cmds     chan func()
	pq       postQueue
	evfd     int
	sleep    atomic.Bool // the loop is (about to be) asleep: wake it
	fdPoll   bool        // every port has a pollable fd

	carriers []*xsk.Carrier
	portUp   []atomic.Bool

	// Loop-only state.
	rings    map[uint32]*ringSession // by owner (ring.go)
	ringList []*ringSession
	qps      map[wire.QPN]*qpState
	// backlogged lists the QPs with a backlog: feedBacklogs, every turn,
	// walks it instead of every QP (a map walk per turn was a tenth of a
	// busy receiver's profile, with no backlog anywhere).
	backlogged []*qpState
	comps      []mrc.Completion
	deliver    map[uint32][]vproto.CQE
	txq        []portTx
	delayed    []*delayPort // ports with a delay line (delay.go)
	// txSlot and txCommit are txSlotFn and txCommitFn bound once.
	txSlot   func(wire.Plane) []byte
	txCommit func(wire.Plane, int)
	// rxFns[i] hands port i's received frames to the engine at rxNow; bound
	// once in New, because a closure made per loop turn escapes (RecvFunc is
	// an interface call) and would allocate on every turn.
	rxFns   []func(frame []byte)
	rxNow   mrc.Time
	running atomic.Bool
	stopped chan struct{}
	// turnHook, when set (tests only, on the loop), runs at the start of
	// every loop turn: StallLoop blocks the loop with it.
	turnHook  func()
	cap       *capture
	capShared bool      // cap is the front thread's (shard.go): it closes it
	tele      teleState // telemetry.go

	// sh and shard: with threads > 1 this daemon is engine thread shard of
	// sh (shard.go); sh.ds[0] is the front that serves the device socket.
	// nil with one thread.
	sh    *shardSet
	shard int
	out   []outbox // by thread: frames this one received for it (shard.go)
	// compSpare is the completion batch drainCompletions reuses; loop only.
	compSpare []ownedCQE
	// fwd[j]: work requests from this thread's sessions' rings for QPs on
	// thread j, handed over after each drain (forwardPosts); loop only.
	fwd [][]postedWR

	c counters
}

// postQueue carries posted work requests from the session goroutines to the
// loop (Post, drainPosts).
type postQueue struct {
	mu      sync.Mutex
	drained sync.Cond // the loop took the queue (Post waits while it is full)
	wrs     []postedWR
	spare   []postedWR // loop-only: the drained batch, reused
	n       atomic.Int64
	closed  bool
}

// counters are the run loop's. Each one's metric and help tags name it in
// the metrics and `mrcctl counters` (metrics.go reads them): a counter
// added here is exported without other edits.
type counters struct {
	loops          atomic.Uint64 `metric:"loops" help:"Run-loop iterations."`
	sleeps         atomic.Uint64 `metric:"sleeps" help:"Times the run loop slept waiting for work."`
	spinTurns      atomic.Uint64 `metric:"busy_poll_turns" help:"Run-loop iterations that found no work and polled again instead of sleeping (busy_poll after the last work)."`
	wakes          atomic.Uint64 `metric:"wakes" help:"Times the run loop was woken."`
	rxFrames       atomic.Uint64 `metric:"rx_frames" help:"Frames the run loop took from the ports."`
	handedOut      atomic.Uint64 `metric:"shard_handoffs_out" help:"Frames this engine thread received for a QP of another thread and handed over (threads > 1)."`
	handedIn       atomic.Uint64 `metric:"shard_handoffs_in" help:"Frames another engine thread received and handed to this one (threads > 1)."`
	handDrops      atomic.Uint64 `metric:"shard_handoff_drops" help:"Frames dropped because the owning engine thread's hand-off queue was full (the engine recovers them as losses)."`
	txFrames       atomic.Uint64 `metric:"tx_frames" help:"Frames the run loop handed to the ports."`
	txBacklogFull  atomic.Uint64 `metric:"tx_queue_full" help:"Posts refused because a QP's backlog was full."`
	postErrors     atomic.Uint64 `metric:"post_errors" help:"Work requests the engine refused."`
	badOwner       atomic.Uint64 `metric:"not_owner" help:"Requests for a QP the session does not own."`
	cqes           atomic.Uint64 `metric:"cqes" help:"Completions delivered to sessions."`
	ringPosts      atomic.Uint64 `metric:"ring_posts" help:"Work requests taken from sessions' shared-memory rings."`
	ringBells      atomic.Uint64 `metric:"ring_doorbells" help:"Times a session's ring doorbell woke the run loop."`
	appWakes       atomic.Uint64 `metric:"ring_app_wakes" help:"Times the run loop woke an application sleeping on its ring."`
	appYields      atomic.Uint64 `metric:"app_yields" help:"Times the busy-polling run loop gave its CPU away (sched_yield) after waking an application."`
	ringFailures   atomic.Uint64 `metric:"ring_failures" help:"Sessions closed because their shared-memory ring was corrupt."`
	ringOverflows  atomic.Uint64 `metric:"ring_cq_overflows" help:"Sessions whose completion ring filled (their completions went to the socket)."`
	stalls         atomic.Uint64 `metric:"loop_stalls" help:"Times the run loop found a receive backlog after not running for more than 500 µs (descheduled, woke late)."`
	stalledNs      atomic.Uint64 `metric:"loop_stalled_ns" help:"Time the stalls took off the engine's clock, ns: the timers do not count it."`
	gaps           atomic.Uint64 `metric:"loop_gaps" help:"Run-loop turns that started 50 ms or more after the previous one, the loop's own sleep not counted: times no port was served (each is logged with its cause)."`
	gapMaxNs       atomic.Uint64 `metric:"loop_gap_max_ns" help:"The longest time between two run-loop turns so far, the loop's own sleep not counted, ns."`
	stallHeldTurns atomic.Uint64 `metric:"loop_stall_held_turns" help:"Loop turns whose transmit ran with the engine's timers held: the ACKs a stall left queued were still being read."`
	spinOffs       atomic.Uint64 `metric:"busy_poll_offs" help:"Times busy polling was turned off because the run loop had waited for a CPU for more than a quarter of 10 ms (it turns back on below a tenth)."`
}

// qpState is the daemon's view of one engine QP.
type qpState struct {
	owner   uint32
	qpn     wire.QPN
	sqDepth int
	backlog []mrc.WR // posted while the engine's send queue was full
	queued  bool     // in Daemon.backlogged
	peer    vproto.ConnectQP
	created time.Time
}

// maxBacklog bounds the work requests a QP may have waiting for the
// engine's send queue; beyond it posts fail with a completion error.
const maxBacklog = 1 << 16

// New builds the daemon: opens (or takes) the ports, builds the engine and
// listens on the device socket. Run starts it. With threads > 1 it builds
// one daemon per engine thread (shard.go) and returns the first, which
// serves the device socket and runs the others.
func New(opts Options) (_ *Daemon, err error) {
	cfg := opts.Config
	if cfg == nil {
		return nil, errors.New("daemon: no config")
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if opts.Cooperative {
		if cfg.ThreadCount() > 1 {
			return nil, fmt.Errorf("daemon: threads %d: a cooperative (in-process) NIC runs one engine thread; set threads to 1", cfg.ThreadCount())
		}
		// Its transmit kicks run on the loop's goroutine: a kick thread
		// would be a second thread to wake.
		c := *cfg
		c.KickThread = false
		cfg = &c
	}
	if cfg.ThreadCount() > 1 && opts.shard == nil {
		return newSharded(opts)
	}
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	d := &Daemon{cfg: cfg, log: log, start: time.Now(), cmds: make(chan func(), 4096), evfd: -1,
		qps: map[wire.QPN]*qpState{}, rings: map[uint32]*ringSession{}, deliver: map[uint32][]vproto.CQE{}, stopped: make(chan struct{})}
	if opts.shard != nil {
		d.start = opts.shard.start // one time base for all threads
	}
	d.clk.start = d.start
	// Every engine thread's loop may hold a P while it sleeps, so one
	// more is needed for everything else, and for a loop that wakes while
	// the others hold theirs: with 3 threads and 2 Ps a woken loop waited
	// for a P until another's held sleep ended (up to heldPollMax), and a
	// 4-host collective's small operations took 30-60 ms instead of 5.
	d.heldPoll = holdsP(runtime.GOMAXPROCS(0), cfg.ThreadCount())
	if opts.Cooperative {
		d.coop, d.heldPoll = true, false // its loop holds no thread and no P of its own
		d.notify = opts.Notify
	}
	d.pq.drained.L = &d.pq.mu
	d.tele.init()
	defer func() {
		if err != nil {
			d.closeResources()
		}
	}()
	d.regions = regions.New()
	if sh := opts.shard; sh != nil && sh.index > 0 {
		// One table for every engine thread: a session's QPs may sit on
		// several threads, and its keys are the same on all (the table's
		// lookups take no lock).
		d.regions = sh.set.ds[0].regions
	}
	for i := range d.byPlane {
		d.byPlane[i] = -1
	}
	if sh := opts.shard; sh != nil {
		// An engine thread: its sockets were opened by newSharded.
		d.sh, d.shard = sh.set, sh.index
		d.out = make([]outbox, len(sh.set.inbox))
		d.fwd = make([][]postedWR, len(sh.set.inbox))
		d.ports = sh.ports
		d.ifPorts = true
		if sh.index > 0 {
			opts.NoCarrier = true // the front watches the carriers for all
		}
		if sh.index == 0 {
			if err := d.checkPathMTU(); err != nil {
				log.Warn("daemon: the ports cannot carry the configured RoCE MTU; QPs will not connect", "err", err)
			}
			d.warnQueueGaps()
		}
	} else if opts.Ports != nil {
		if len(opts.Ports) != len(cfg.Ports) {
			return nil, fmt.Errorf("daemon: %d injected ports for %d configured", len(opts.Ports), len(cfg.Ports))
		}
		d.ports = opts.Ports
		opts.NoCarrier = true
	} else {
		for _, p := range cfg.Ports {
			xc := xsk.Config{Name: p.PortName(), Ifname: p.Interface, Queue: p.Queue, Attach: attachMode(cfg.Attach),
				Addrs: []netip.Addr{p.Address}, Logger: log, KickThread: cfg.KickThread}
			if cfg.Mode == config.ModeSRv6 {
				xc.USIDPrefixes = append(xc.USIDPrefixes, p.Locator)
			}
			port, err := xsk.Open(xc)
			if err != nil {
				return nil, fmt.Errorf("daemon: port %s: %w", p.PortName(), err)
			}
			d.ports = append(d.ports, port)
		}
		d.ifPorts = true
		if err := d.checkPathMTU(); err != nil {
			// Every connect will fail with this until it is fixed.
			log.Warn("daemon: the ports cannot carry the configured RoCE MTU; QPs will not connect", "err", err)
		}
		d.warnQueueGaps()
	}
	d.portUp = make([]atomic.Bool, len(d.ports))
	d.fdPoll = true
	for i, p := range cfg.Ports {
		d.planes = append(d.planes, p.Plane)
		d.byPlane[p.Plane] = i
		d.portUp[i].Store(true)
		if _, ok := d.ports[i].(interface{ FD() int }); !ok {
			d.fdPoll = false
		}
	}
	if d.evfd, err = unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC); err != nil {
		return nil, fmt.Errorf("daemon: eventfd: %w", err)
	}
	if cfg.Mode == config.ModeSRv6 {
		d.tmpl, _ = pathtmpl.Load(cfg.Template) // an error is the engine's to report
	}
	newEngine := opts.NewEngine
	if newEngine == nil {
		newEngine = NewMRCEngine
	}
	if d.eng, err = newEngine(cfg, d.regions); err != nil {
		return nil, fmt.Errorf("daemon: engine: %w", err)
	}
	if err := d.loadDenylist(); err != nil {
		return nil, fmt.Errorf("daemon: %w", err)
	}
	if err := d.initPathProbes(); err != nil {
		return nil, fmt.Errorf("daemon: %w", err)
	}
	if opts.Capture != "" {
		idx := -1
		if opts.CapturePort != "" {
			for i, p := range cfg.Ports {
				if p.PortName() == opts.CapturePort || p.Interface == opts.CapturePort {
					idx = i
				}
			}
			if idx < 0 {
				return nil, fmt.Errorf("daemon: capture port %q is not a configured port name or interface", opts.CapturePort)
			}
		}
		max := opts.CaptureMax
		if max <= 0 {
			max = 100000
		}
		if d.cap, err = newCapture(opts.Capture, idx, max); err != nil {
			return nil, err
		}
	}
	if err := d.wrapDelayPorts(); err != nil {
		return nil, err
	}
	d.txq = make([]portTx, len(d.ports))
	d.txSlot, d.txCommit = d.txSlotFn, d.txCommitFn
	d.rxFns = make([]func([]byte), len(d.ports))
	for i := range d.rxFns {
		d.rxFns[i] = d.rxFn(i)
	}
	for i := range d.txq {
		d.txq[i].init(d.ports[i])
	}
	if !opts.NoCarrier {
		for _, p := range cfg.Ports {
			ifi, err := net.InterfaceByName(p.Interface)
			if err != nil {
				return nil, fmt.Errorf("daemon: port %s: %w", p.PortName(), err)
			}
			c, err := xsk.WatchCarrier(ifi.Index, nil)
			if err != nil {
				return nil, fmt.Errorf("daemon: port %s: %w", p.PortName(), err)
			}
			d.carriers = append(d.carriers, c)
		}
		if d.sh == nil {
			d.watchCarriers() // with engine threads, once all exist (newSharded)
		}
	}
	if d.shard > 0 {
		return d, nil // the front serves the socket and the metrics
	}
	var nic service.NIC = d
	if d.sh != nil {
		nic = &shardFront{set: d.sh}
	}
	d.svc = service.New(nic, log)
	if err := d.svc.Listen(cfg.DeviceSocket); err != nil {
		return nil, err
	}
	if cfg.Metrics != "" {
		ln, err := net.Listen("tcp", cfg.Metrics)
		if err != nil {
			return nil, fmt.Errorf("daemon: metrics listener %s: %w", cfg.Metrics, err)
		}
		d.metrics = &http.Server{Handler: d.metricsHandler(), ReadHeaderTimeout: 5 * time.Second}
		go func() { _ = d.metrics.Serve(ln) }()
	}
	return d, nil
}

// Run runs the engine loop and the device socket until ctx ends, then shuts
// down cleanly: sessions are told, QPs destroyed, ports closed.
func (d *Daemon) Run(ctx context.Context) error {
	go func() {
		if err := d.svc.Serve(); err != nil {
			d.log.Error("device socket", "err", err)
		}
	}()
	loopErr := make(chan error, 1)
	go func() { loopErr <- d.loop(ctx) }()
	others := d.runShards(ctx)
	d.log.Info("mrc-nicd running", "host", d.cfg.Host, "ports", len(d.ports), "mode", d.cfg.Mode,
		"device_socket", d.cfg.DeviceSocket, "metrics", d.cfg.Metrics)
	var err error
	select {
	case <-ctx.Done():
		err = <-loopErr
	case err = <-loopErr:
	}
	if e := others(); err == nil {
		err = e
	}
	d.log.Info("mrc-nicd stopping", "loop_stalls", d.c.stalls.Load(), "stalled_off_clock", time.Duration(d.c.stalledNs.Load()),
		"loop_gaps", d.c.gaps.Load(), "loop_gap_max", time.Duration(d.c.gapMaxNs.Load()).Round(time.Microsecond))
	d.running.Store(false)
	d.svc.Close("mrc-nicd is shutting down")
	d.closeResources()
	return err
}

func attachMode(s string) xsk.AttachMode {
	switch s {
	case "native":
		return xsk.AttachNative
	case "generic":
		return xsk.AttachGeneric
	}
	return xsk.AttachAuto
}

// Ready returns once the loop runs (tests).
func (d *Daemon) Ready(ctx context.Context) error {
	for !d.running.Load() {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Millisecond):
		}
	}
	return nil
}

func (d *Daemon) closeResources() {
	if d.metrics != nil {
		d.metrics.Close()
	}
	for _, c := range d.carriers {
		c.Close()
	}
	d.logDelayLines()
	for _, p := range d.ports {
		if p != nil {
			p.Close()
		}
	}
	d.ports = nil
	d.closeRings()
	if d.evfd >= 0 {
		unix.Close(d.evfd)
		d.evfd = -1
	}
	if !d.capShared {
		if err := d.cap.close(); err != nil {
			d.log.Warn("capture file", "err", err)
		}
	}
	d.cap = nil
}

// now is the engine's time (the loop's clock, rx.go); loop only.
func (d *Daemon) now() mrc.Time { return d.clk.now() }

// watchCarriers feeds the ports' carrier changes to every engine thread.
func (d *Daemon) watchCarriers() {
	for i, c := range d.carriers {
		go d.watchCarrier(i, c)
	}
}

func (d *Daemon) watchCarrier(i int, c *xsk.Carrier) {
	for ev := range c.Events() {
		up := ev.Up
		d.log.Info("port carrier", "port", d.cfg.Ports[i].PortName(), "up", up)
		for _, s := range d.threads() {
			s.portUp[i].Store(up)
			s.enqueue(func() { s.eng.SetPortState(s.now(), wire.Plane(s.planes[i]), up) })
		}
	}
}

// ErrStopped is returned by requests made after the loop stopped.
var ErrStopped = errors.New("mrc-nicd is stopping")

// enqueue hands fn to the loop without waiting.
func (d *Daemon) enqueue(fn func()) bool {
	select {
	case <-d.stopped:
		return false
	case d.cmds <- fn:
	}
	d.wake()
	return true
}

// wake ends the loop's sleep: an eventfd write, only while it sleeps (an
// awake loop sees the work on its next turn; idle looks once more after
// setting sleep, so a wake that raced it is not lost).
func (d *Daemon) wake() {
	if !d.sleep.Load() {
		return
	}
	var one = [8]byte{1}
	_, _ = unix.Write(d.evfd, one[:])
}

// exec runs fn on the loop and waits for it.
func (d *Daemon) exec(fn func()) error {
	done := make(chan struct{})
	if !d.enqueue(func() { fn(); close(done) }) {
		return ErrStopped
	}
	select {
	case <-done:
		return nil
	case <-d.stopped:
		return ErrStopped
	}
}

// loop is the engine's goroutine, on a locked OS thread.
func (d *Daemon) loop(ctx context.Context) error {
	if d.coop {
		return d.coopLoop(ctx)
	}
	// Locked for good: when the loop returns, its goroutine ends and the
	// runtime ends the thread with it, so the thread's timer slack and
	// nice value (below) never pass to another goroutine.
	runtime.LockOSThread()
	defer close(d.stopped)
	defer d.closePosts()
	// The default 50 µs timer slack would stretch every short ppoll (engine
	// timers of a few µs) to 50 µs. The thread stays locked to this
	// goroutine until it exits, so the setting does not leak to others.
	_ = unix.Prctl(unix.PR_SET_TIMERSLACK, 1, 0, 0, 0)
	if n := d.cfg.LoopNice; n != 0 {
		// PRIO_PROCESS with a thread ID sets that thread's nice only.
		if err := unix.Setpriority(unix.PRIO_PROCESS, unix.Gettid(), n); err != nil {
			d.log.Warn("loop_nice not applied: the run loop keeps its priority", "loop_nice", n, "err", err,
				"fix", "run mrc-nicd with CAP_SYS_NICE (as root), or set loop_nice to 0")
		} else {
			d.log.Info("run loop priority", "loop_nice", n)
		}
	}
	stats := openThreadStats() // after LockOSThread: the loop's thread
	defer stats.close()
	busy := d.begin(stats)
	var lastWork time.Time
	for {
		if d.ended(ctx) {
			return nil
		}
		work := d.turn()
		if work > 0 {
			if busy > 0 {
				lastWork = time.Now()
				if d.wokeApp {
					d.yieldToApp()
				}
			}
			d.wokeApp = false
			continue
		}
		// Busy-poll for a bounded time before sleeping: the next frame or
		// request is seen without a scheduler wakeup, and requests need no
		// eventfd write (sleep stays false). Not while the loop's thread
		// has been waiting for a CPU: then the spin takes a CPU another
		// thread needs (spingate.go).
		if busy > 0 && time.Since(lastWork) < busy && d.spin.allow(d.clk.wall()) {
			d.c.spinTurns.Add(1)
			continue
		}
		d.idle(ctx)
	}
}

// begin starts a loop whose thread's statistics stats reads: the gap
// watch and the spin gate read them; it marks the loop running, tells the
// engine which ports are down and returns how long to poll after work.
func (d *Daemon) begin(stats *threadStats) (busy time.Duration) {
	d.gaps.read, d.gaps.maxNs = stats.read, &d.c.gapMaxNs
	busy = d.cfg.BusyPollFor()
	d.spin.offs = &d.c.spinOffs
	if busy > 0 && !d.cfg.BusyPollAlways {
		d.spin.read = stats.read // spingate.go
	}
	d.running.Store(true)
	for i, p := range d.cfg.Ports {
		if !d.portUp[i].Load() {
			d.eng.SetPortState(d.now(), wire.Plane(p.Plane), false)
		}
	}
	return busy
}

// turn is one run-loop iteration: requests, frames, completions, transmit.
// It returns how much work it found (0: the loop may spin or sleep).
func (d *Daemon) turn() int {
	d.c.loops.Add(1)
	if g, late := d.gaps.turn(d.clk.wall(), d.gapSlept); late {
		d.logGap(g)
	}
	if d.turnHook != nil {
		d.turnHook()
	}
	// stall_clock: a stall with ACKs waiting does not count against
	// the engine's timers (rx.go).
	if d.cfg.StallClock {
		if off := d.clk.turn(d.stallAtRisk); off > 0 {
			d.c.stalls.Add(1)
			d.c.stalledNs.Add(uint64(off))
			d.drain.start(d.rxWaiting())
		}
	}
	work := 0
	// Posts first, then requests: a session's CreateQP and Connect
	// complete (exec) before it can post, and what it posted before a
	// Destroy must reach the QP before the Destroy does.
	work += d.drainPosts(d.now())
	work += d.drainRings(d.now())
	for n := 0; n < 256; n++ {
		select {
		case fn := <-d.cmds:
			fn()
			work++
			continue
		default:
		}
		break
	}
	now := d.now()
	got := d.receive(now)
	work += got
	work += d.drainInbox(now)
	if d.drain.left > 0 {
		// The timers wait for the ACKs a stall left queued (rx.go).
		held := d.drain.read(got)
		d.eng.HoldTimers(held)
		if held {
			d.c.stallHeldTurns.Add(1)
		}
	}
	// What the frames completed goes to the applications before this
	// turn's frames are kicked: a kick on a veth runs the peer's
	// receive (and every switch's XDP hop) in this thread's sendto,
	// 5-10 µs the woken application now spends waking up.
	work += d.completions()
	work += d.feedBacklogs(now)
	work += d.sendPathProbes(now)
	work += d.transmit(now)
	work += d.completions()
	work += d.drainCompletions()
	if now >= d.tele.next {
		d.teleSample(now)
	}
	return work
}

// yieldToApp gives the loop's CPU away once after a turn that woke an
// application, before the loop polls on. A spinning loop otherwise keeps
// the CPU the woken thread needs until the scheduler preempts it: on 2
// vCPUs with a spinning daemon on each, the application of a ping-pong
// waited for that at every message. With a CPU free the woken thread runs
// there and sched_yield returns at once. The measurements are in
// docs/nic.md (busy polling) and docs/performance.md's changes table.
func (d *Daemon) yieldToApp() {
	d.c.appYields.Add(1)
	_, _, _ = unix.Syscall(unix.SYS_SCHED_YIELD, 0, 0, 0)
}

// rxFn returns port i's receive callback, which hands the frame to the
// engine (the engine resolves rkeys in the protection domain of the QP the
// frame is for: the QP owner's regions only).
func (d *Daemon) rxFn(i int) func(frame []byte) {
	plane := wire.Plane(d.planes[i])
	return func(frame []byte) {
		d.cap.frame(i, frame)
		if d.sh != nil && !d.passOn(i, frame) {
			return // another engine thread's (shard.go)
		}
		if oam.Is(frame) {
			d.handleOAM(i, frame)
			return
		}
		d.eng.HandlePacket(d.rxNow, plane, frame)
	}
}

// transmit asks the engine for frames and sends them (the engine paces).
func (d *Daemon) transmit(now mrc.Time) int {
	sent := 0
	// What a full ring left queued goes first, in order.
	for i := range d.txq {
		sent += d.txq[i].flush(d.ports[i], &d.c)
	}
	// The engine emits at most a burst of data plus queued control per
	// Poll and cannot be told to stop, so Poll only when every queue has
	// room for that; what still does not fit is dropped (counted) and the
	// engine recovers it as a loss.
	for i := range d.txq {
		if d.txq[i].room() < pollRoom {
			return sent
		}
	}
	// The engine encodes straight into the port's UMEM frame while the
	// port has room and nothing is queued (one payload copy, from the
	// application's memory), else into the queue's buffers, copied to the
	// UMEM when the ring frees (portTx.slot).
	d.eng.PollInto(now, d.txSlot, d.txCommit)
	for i := range d.txq {
		sent += d.txq[i].flush(d.ports[i], &d.c)
	}
	return sent
}

func (d *Daemon) txPort(port wire.Plane) int {
	if int(port) < wire.MaxPlanes {
		return d.byPlane[port]
	}
	return -1
}

// txSlot and txCommit are PollInto's callbacks; as method values bound
// once in New they keep transmit allocation-free.
func (d *Daemon) txSlotFn(port wire.Plane) []byte {
	var b []byte
	if i := d.txPort(port); i >= 0 {
		b = d.txq[i].slot()
	}
	if b == nil {
		d.c.txBacklogFull.Add(1)
	}
	return b
}

func (d *Daemon) txCommitFn(port wire.Plane, n int) {
	i := d.txPort(port)
	d.cap.frame(i, d.txq[i].push(n))
}

// heldPollMax bounds the loop's sleeps that keep its P. An ordinary
// blocking ppoll is a system call the Go runtime hands the P away from: its
// monitor thread (sysmon) retakes the P of a call that lasts, starts
// another thread to look for work, polls every 20 µs for a while after each
// retake, and the loop must take a P back when ppoll returns. A daemon
// sampled every 10 ms (mrc-lab's telemetry) woke that way 1 400 times a
// second idle, 2.5-2.9 % of a core for 100 samples (perf, 2026-12-05: sysmon's
// usleep, startm, handoffp); 16 of them took half a core of a 2-vCPU lab.
// A raw ppoll keeps the P: nothing is retaken, nothing is started. The
// bound keeps what holding costs small: no other goroutine runs on that P
// meanwhile (the daemon holds it only with a second P: New), and a garbage
// collection's stop-the-world interrupts the sleep with its preemption
// signal (ppoll is never restarted after a signal handler), so it waits
// for no sleep. Longer sleeps (an idle daemon's 100 ms) stay ordinary.
const heldPollMax = 20 * time.Millisecond

// holdsP reports whether each of threads engine loops may keep its P
// through its short sleeps in a program with procs Ps: only when one is
// left for everything else.
func holdsP(procs, threads int) bool { return procs > threads }

// ppollHeld is ppoll(2) as a raw system call: the calling goroutine keeps
// its P for the sleep (heldPollMax). A signal ends the sleep (EINTR).
func ppollHeld(fds []unix.PollFd, ts *unix.Timespec) {
	_, _, _ = unix.RawSyscall6(unix.SYS_PPOLL, uintptr(unsafe.Pointer(&fds[0])), uintptr(len(fds)),
		uintptr(unsafe.Pointer(ts)), 0, 0, 0)
}

// nextDeadline is when an idle loop must run again at the latest: the
// engine's timers, the path probes, a retry of a port whose ring was full,
// the telemetry sample, the delay lines (mrc.Never: none).
func (d *Daemon) nextDeadline(now mrc.Time) mrc.Time {
	dl := min(d.eng.NextDeadline(), d.probeDeadline())
	for i := range d.txq {
		if t := d.txq[i].next(now); t < dl {
			dl = t
		}
	}
	dl = min(dl, d.tele.next)
	if t := d.delayDeadline(); t != mrc.Never {
		dl = min(dl, t-d.clk.debt) // the delay lines run on wall time
	}
	return dl
}

// idle sleeps until a port is readable, a request arrives, or the engine's
// next deadline (or a retry of a port whose ring was full).
func (d *Daemon) idle(ctx context.Context) {
	now := d.now()
	dl := d.nextDeadline(now)
	wait := time.Duration(dl - now)
	if dl == mrc.Never || wait > 100*time.Millisecond {
		wait = 100 * time.Millisecond // ctx is checked at least this often
	}
	if wait <= 0 {
		return
	}
	// need_wakeup (the rings' and the socket posts'), then one more look:
	// a post that raced the flag is seen here or rings the doorbell.
	d.sleep.Store(true)
	d.ringsAsleep(true)
	defer func() {
		d.ringsAsleep(false)
		d.sleep.Store(false)
	}()
	if len(d.cmds) > 0 || d.pq.n.Load() > 0 || d.ringsPending() || d.inboxPending() || ctx.Err() != nil {
		return
	}
	d.c.sleeps.Add(1)
	// The sleep is the loop's own: it is no stall (rx.go).
	slept := time.Now()
	defer func() {
		s := time.Since(slept)
		d.clk.asleep(s)
		d.gapSlept += mrc.Time(min(s, wait))
	}()
	if !d.fdPoll {
		// In-memory ports have no fd: wait on each in turn, briefly.
		slice := min(wait, 200*time.Microsecond)
		for _, p := range d.ports {
			_ = p.Wait(slice / time.Duration(len(d.ports)))
		}
		return
	}
	fds := make([]unix.PollFd, 0, len(d.ports)+1+len(d.ringList))
	for _, p := range d.ports {
		_ = p.Wait(0) // kicks pending transmissions and reclaims completions
		fds = append(fds, unix.PollFd{Fd: int32(p.(interface{ FD() int }).FD()), Events: unix.POLLIN})
	}
	fds = append(fds, unix.PollFd{Fd: int32(d.evfd), Events: unix.POLLIN})
	for _, rs := range d.ringList {
		fds = append(fds, unix.PollFd{Fd: int32(rs.bell), Events: unix.POLLIN})
	}
	// ppoll sleeps to the nanosecond: a millisecond poll would either
	// oversleep engine timers or, rounded down to 0, spin and take the CPU
	// from the applications and the peer (2 cores on a testbed VM).
	ts := unix.NsecToTimespec(int64(wait))
	if wait <= heldPollMax && d.heldPoll {
		ppollHeld(fds, &ts)
	} else {
		_, _ = unix.Ppoll(fds, &ts, nil)
	}
	ev := len(d.ports)
	if fds[ev].Revents != 0 {
		var b [8]byte
		_, _ = unix.Read(d.evfd, b[:])
		d.c.wakes.Add(1)
	}
	for i, rs := range d.ringList {
		if fds[ev+1+i].Revents != 0 {
			var b [8]byte
			_, _ = unix.Read(rs.bell, b[:])
			d.c.ringBells.Add(1)
		}
	}
}

// ended reports whether ctx ended; then it stops the loop's QPs, so that
// posted work completes as flushed.
func (d *Daemon) ended(ctx context.Context) bool {
	if ctx.Err() == nil {
		return false
	}
	d.running.Store(false)
	d.shutdownQPs()
	return true
}

// shutdownQPs destroys every QP so that posted work completes as flushed.
func (d *Daemon) shutdownQPs() {
	for qpn := range d.qps {
		_ = d.eng.DestroyQP(qpn)
	}
	d.completions()
	for owner, c := range d.deliver {
		if len(c) > 0 {
			d.svc.Deliver(owner, c)
		}
	}
}
