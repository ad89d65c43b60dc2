package daemon

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"reflect"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/softmrc/softmrc/internal/mrc"
	"github.com/softmrc/softmrc/internal/wire"
	"github.com/softmrc/softmrc/nic/config"
	"github.com/softmrc/softmrc/nic/oam"
	"github.com/softmrc/softmrc/nic/service"
	"github.com/softmrc/softmrc/nic/vproto"
	"github.com/softmrc/softmrc/nic/xsk"
)

// Engine threads (config threads > 1, docs/nic.md "More than one core").
//
// Each thread is a whole Daemon: its own engine, run loop on a locked OS
// thread, AF_XDP socket on queue Queue+i of every port, sessions, regions
// and counters. The engines split the QP numbers (mrc.Config.QPNShards), so
// a frame's BTH destination QP names its thread. Each new QP goes to the
// thread with the fewest QPs, whatever its session. A session has a home
// thread too (the one with the fewest sessions when it first asks for
// anything): its shared-memory rings live there. The home thread passes a
// ring's work requests for a QP on another thread to that thread's post
// queue, and completions made on another thread come back to the home
// thread's completion ring through a queue of its own. All threads share
// one regions table, so a session's keys are valid on every thread. The
// first daemon (the front) serves the device socket, the metrics, the
// carriers and the control commands, and routes each request to its QP's
// (or, without one, its session's) thread.
//
// A device picks the receive queue, not the QP (a veth by the transmit
// queue or the CPU of the sender, a NIC's RSS by the 5-tuple, which MRC
// varies per EV), so a frame often lands on another thread's socket. That
// thread copies it into an outbox for the owner and, at the end of its
// receive turn, moves the outbox into the owner's inbox under one lock and
// wakes the owner if it sleeps; the owner hands the frames to its engine. A full inbox drops the frame
// (counted); the engine recovers it as a loss. uSID OAM replies go to the
// front, which sent the probes; endpoint frames (port status between
// NICs, not addressed to a QP) go to every thread, because each engine
// keeps its own peers.

// maxInbox bounds the frames waiting in one thread's inbox: as many as a
// socket's receive ring holds (a thread that does not get a CPU for a while
// loses frames either way; 256 lost 10-20 % of the handed frames on 2
// vCPUs under mrc-write-bw).
const maxInbox = 2048

// maxSpare bounds the copy buffers a thread keeps for each other thread:
// four receive batches.
const maxSpare = 4 * rxBatch

// shardOpts makes New build one engine thread of a set.
type shardOpts struct {
	set   *shardSet
	index int
	ports []xsk.Port
	// start is every thread's clock origin: with one time base their
	// engines can share the ports' line time (config EnginePorts).
	start time.Time
}

// shardSet is one NIC's engine threads.
type shardSet struct {
	ds    []*Daemon  // ds[0] is the front
	inbox []inbox    // inbox[i]: frames the others received for thread i
	comps []compsBox // comps[i]: completions the others made for thread i's sessions

	mu       sync.Mutex
	owners   map[uint32]int   // session → its thread (rings, registrations)
	load     []int            // sessions per thread
	qpLoad   []int            // QPs per thread
	ownerQPs map[uint32][]int // session → its QPs per thread
}

// compsBox is one thread's queue of completions that other threads made
// for QPs of sessions that live on it: the session's completion ring has
// one producer, the session's thread.
type compsBox struct {
	mu   sync.Mutex
	cqes []ownedCQE
	n    atomic.Int64
}

type ownedCQE struct {
	owner uint32
	cqe   vproto.CQE
}

// inbox is one thread's queue of handed-over frames.
type inbox struct {
	mu     sync.Mutex
	frames []handed
	free   [][]byte // buffers back from the owner, for the senders to reuse
	n      atomic.Int64
}

// handed is a frame copied from another thread's socket.
type handed struct {
	port int
	buf  []byte
}

// newSharded opens every thread's sockets (the first with the steering
// program, which the others register their queues in), builds a daemon per
// thread and returns the front.
func newSharded(opts Options) (_ *Daemon, err error) {
	cfg := opts.Config
	n := cfg.ThreadCount()
	switch {
	case opts.Ports != nil:
		return nil, errors.New("daemon: threads > 1 needs AF_XDP ports (injected ports have one queue)")
	}
	log := opts.Logger
	set := &shardSet{inbox: make([]inbox, n), comps: make([]compsBox, n), owners: map[uint32]int{}, load: make([]int, n),
		qpLoad: make([]int, n), ownerQPs: map[uint32][]int{}}
	ports := make([][]xsk.Port, n)
	defer func() {
		if err == nil {
			return
		}
		for _, d := range set.ds {
			d.closeResources()
		}
		for i := len(set.ds); i < n; i++ {
			for _, p := range ports[i] {
				if p != nil {
					p.Close()
				}
			}
		}
	}()
	for i := 0; i < n; i++ {
		for k, p := range cfg.Ports {
			xc := xsk.Config{Name: fmt.Sprintf("%s/t%d", p.PortName(), i), Ifname: p.Interface, Queue: p.Queue + i,
				Attach: attachMode(cfg.Attach), Addrs: []netip.Addr{p.Address}, Logger: log, KickThread: cfg.KickThread,
				NoSteer: i > 0}
			if cfg.Mode == config.ModeSRv6 {
				xc.USIDPrefixes = append(xc.USIDPrefixes, p.Locator)
			}
			port, err := xsk.Open(xc)
			switch {
			case err != nil && i == 0:
				return nil, fmt.Errorf("daemon: port %s: %w", p.PortName(), err)
			case err != nil:
				// The first thread bound the same interface: the queue is
				// what is missing, most likely.
				return nil, fmt.Errorf("daemon: thread %d: port %s queue %d: %w (threads: %d needs %d queues on %s: ip link add ... numrxqueues %d numtxqueues %d)",
					i, p.PortName(), p.Queue+i, err, n, p.Queue+n, p.Interface, p.Queue+n, p.Queue+n)
			}
			ports[i] = append(ports[i], port)
			if i > 0 {
				if err := ports[0][k].(*xsk.XDPPort).Steer().Register(p.Queue+i, port.FD()); err != nil {
					return nil, fmt.Errorf("daemon: thread %d: port %s: %w", i, p.PortName(), err)
				}
			}
		}
	}
	// One pacer for all threads: each paces a port at its whole rate
	// against the line time all of them took (mrc.PortClock). Not with
	// stall_clock, where each thread's engine time runs behind the wall
	// by its own stalls: then each thread paces 1/n of the rate.
	var clock *mrc.PortClock
	if !cfg.StallClock {
		clock = &mrc.PortClock{}
	}
	start := time.Now()
	for i := 0; i < n; i++ {
		c := *cfg
		c.EngineThread, c.EnginePorts = i, clock
		o := opts
		if i > 0 {
			// The front alone probes the paths (their replies, OAM, come to
			// it: owner) and opens the capture file, which every thread
			// writes to.
			c.PathProbes = 0
			o.Capture = ""
		}
		o.Config = &c
		o.shard = &shardOpts{set: set, index: i, ports: ports[i], start: start}
		d, err := New(o)
		if err != nil {
			ports[i] = nil // New closed them
			return nil, fmt.Errorf("daemon: thread %d: %w", i, err)
		}
		set.ds = append(set.ds, d)
	}
	for _, d := range set.ds[1:] {
		d.svc = set.ds[0].svc
		d.cap, d.capShared = set.ds[0].cap, true
	}
	set.ds[0].watchCarriers() // they reach every thread: start once all exist
	log.Info("mrc-nicd engine threads", "threads", n)
	return set.ds[0], nil
}

// threads returns every engine thread's daemon (d alone with one thread).
func (d *Daemon) threads() []*Daemon {
	if d.sh == nil {
		return []*Daemon{d}
	}
	return d.sh.ds
}

// runShards starts the other threads' loops (the front's Run) and returns
// a function that stops them, waits and releases their resources.
func (d *Daemon) runShards(ctx context.Context) func() error {
	if d.sh == nil || d.shard != 0 {
		return func() error { return nil }
	}
	ctx, cancel := context.WithCancel(ctx)
	errs := make(chan error, len(d.sh.ds))
	for _, s := range d.sh.ds[1:] {
		go func() { errs <- s.loop(ctx) }()
	}
	return func() error {
		cancel()
		var all []error
		for range d.sh.ds[1:] {
			all = append(all, <-errs)
		}
		for _, s := range d.sh.ds[1:] {
			s.running.Store(false)
			s.closeResources() // not the capture: the front's (capShared)
		}
		return errors.Join(all...)
	}
}

// owner returns the thread a received frame belongs to: -1 for every
// thread (endpoint frames), and this thread for what it cannot place.
func (sh *shardSet) owner(self int, frame []byte) int {
	if oam.Is(frame) {
		return 0
	}
	qpn, ok := wire.PeekDestQP(frame)
	switch {
	case !ok:
		return self
	case qpn == wire.QPEndpoint:
		return -1
	}
	return int(qpn) % len(sh.ds)
}

// outbox is what one thread's receive turn copied for another thread,
// handed over in one go at the end of the turn (flushHandoffs): one lock
// and at most one wakeup per turn and thread, not per frame. Loop only
// (the receiving thread's).
type outbox struct {
	frames []handed
	spare  [][]byte // buffers to copy into, taken back from the owner
}

// passOn copies a frame received on port i for the threads it belongs to
// and reports whether this thread should handle it too.
func (d *Daemon) passOn(i int, frame []byte) (mine bool) {
	to := d.sh.owner(d.shard, frame)
	if to == d.shard {
		return true
	}
	for j := range d.sh.ds {
		if j == d.shard || (to >= 0 && j != to) {
			continue
		}
		o := &d.out[j]
		if len(o.frames) >= maxInbox {
			d.sh.ds[j].c.handDrops.Add(1)
			continue
		}
		var buf []byte
		if k := len(o.spare); k > 0 {
			buf, o.spare = o.spare[k-1][:0], o.spare[:k-1]
		}
		o.frames = append(o.frames, handed{port: i, buf: append(buf, frame...)})
	}
	return to < 0
}

// flushHandoffs moves this turn's copies into their threads' inboxes and
// wakes a thread that sleeps; loop only.
func (d *Daemon) flushHandoffs() {
	for j := range d.out {
		o := &d.out[j]
		if len(o.frames) == 0 {
			continue
		}
		s := d.sh.ds[j]
		in := &d.sh.inbox[j]
		in.mu.Lock()
		room := max(maxInbox-len(in.frames), 0)
		k := min(room, len(o.frames))
		in.frames = append(in.frames, o.frames[:k]...)
		in.n.Store(int64(len(in.frames)))
		// Take back the buffers the owner is done with, up to what a few
		// turns need.
		for len(in.free) > 0 && len(o.spare) < maxSpare {
			o.spare = append(o.spare, in.free[len(in.free)-1])
			in.free = in.free[:len(in.free)-1]
		}
		in.mu.Unlock()
		d.c.handedOut.Add(uint64(k))
		if drop := len(o.frames) - k; drop > 0 {
			s.c.handDrops.Add(uint64(drop))
			for _, f := range o.frames[k:] {
				if len(o.spare) < maxSpare {
					o.spare = append(o.spare, f.buf)
				}
			}
		}
		clear(o.frames)
		o.frames = o.frames[:0]
		s.wake()
	}
}

// drainInbox hands the frames other threads received for this one to the
// engine; loop only.
func (d *Daemon) drainInbox(now mrc.Time) int {
	if d.sh == nil {
		return 0
	}
	in := &d.sh.inbox[d.shard]
	if in.n.Load() == 0 {
		return 0
	}
	in.mu.Lock()
	batch := in.frames
	in.frames = nil
	in.n.Store(0)
	in.mu.Unlock()
	for _, f := range batch {
		if oam.Is(f.buf) {
			// An OAM reply that came in on another thread's queue: the
			// front sent the probe (owner). The engine would drop it as a
			// frame for no QP.
			d.handleOAM(f.port, f.buf)
			continue
		}
		d.eng.HandlePacket(now, wire.Plane(d.planes[f.port]), f.buf)
	}
	d.c.handedIn.Add(uint64(len(batch)))
	in.mu.Lock()
	for _, f := range batch {
		if len(in.free) < maxInbox {
			in.free = append(in.free, f.buf)
		}
	}
	if in.frames == nil {
		clear(batch)
		in.frames = batch[:0] // reuse the slice for the next batch
	}
	in.mu.Unlock()
	return len(batch)
}

// inboxPending reports frames or completions waiting for this thread.
func (d *Daemon) inboxPending() bool {
	return d.sh != nil && (d.sh.inbox[d.shard].n.Load() > 0 || d.sh.comps[d.shard].n.Load() > 0)
}

// thread returns the thread of session owner, choosing the one with the
// fewest sessions on its first request.
func (sh *shardSet) thread(owner uint32) *Daemon {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	i, ok := sh.owners[owner]
	if !ok {
		for j := range sh.load {
			if sh.load[j] < sh.load[i] {
				i = j
			}
		}
		sh.owners[owner] = i
		sh.load[i]++
	}
	return sh.ds[i]
}

// forget drops session owner's thread and QP counts (its session ended).
func (sh *shardSet) forget(owner uint32) {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if i, ok := sh.owners[owner]; ok {
		delete(sh.owners, owner)
		sh.load[i]--
	}
	for i, k := range sh.ownerQPs[owner] {
		sh.qpLoad[i] -= k
	}
	delete(sh.ownerQPs, owner)
}

// threadOf is the thread that owns QP qpn.
func (sh *shardSet) threadOf(qpn uint32) int { return int(qpn) % len(sh.ds) }

// qpThread picks the thread for a new QP: the one with the fewest QPs
// (the lowest on a tie).
func (sh *shardSet) qpThread() int {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	i := 0
	for j := range sh.qpLoad {
		if sh.qpLoad[j] < sh.qpLoad[i] {
			i = j
		}
	}
	return i
}

// countQP adds k to owner's QPs on thread i.
func (sh *shardSet) countQP(owner uint32, i, k int) {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	c := sh.ownerQPs[owner]
	if c == nil {
		c = make([]int, len(sh.ds))
		sh.ownerQPs[owner] = c
	}
	c[i] += k
	sh.qpLoad[i] += k
}

// passCompletions hands owner's completions, made on thread from, to the
// session's own thread and wakes it; false when from is that thread (or
// the session is gone). Loop only (from's).
func (sh *shardSet) passCompletions(from int, owner uint32, cqes []vproto.CQE) bool {
	sh.mu.Lock()
	home, ok := sh.owners[owner]
	sh.mu.Unlock()
	if !ok || home == from {
		return false
	}
	b := &sh.comps[home]
	b.mu.Lock()
	for _, c := range cqes {
		b.cqes = append(b.cqes, ownedCQE{owner, c})
	}
	b.n.Store(int64(len(b.cqes)))
	b.mu.Unlock()
	sh.ds[home].wake()
	return true
}

// forwardPosts hands the work requests this thread's rings held for QPs on
// other threads to those threads' post queues. It never waits for room
// (two threads forwarding to each other must not block each other); a
// session's ring depth bounds what it can have in flight. Loop only.
func (d *Daemon) forwardPosts() {
	for j, batch := range d.fwd {
		if len(batch) == 0 {
			continue
		}
		t := d.sh.ds[j]
		if t.pq.lock(false) {
			t.pq.wrs = append(t.pq.wrs, batch...)
			t.unlockPosts()
		}
		clear(batch)
		d.fwd[j] = batch[:0]
	}
}

// drainCompletions delivers the completions other threads made for this
// thread's sessions; loop only.
func (d *Daemon) drainCompletions() int {
	if d.sh == nil {
		return 0
	}
	b := &d.sh.comps[d.shard]
	if b.n.Load() == 0 {
		return 0
	}
	b.mu.Lock()
	batch := b.cqes
	b.cqes = d.compSpare[:0]
	b.n.Store(0)
	b.mu.Unlock()
	for _, c := range batch {
		d.deliver[c.owner] = append(d.deliver[c.owner], c.cqe)
	}
	d.compSpare = batch[:0]
	d.flushDeliveries()
	return len(batch)
}

// shardFront is the device socket's NIC with threads > 1: it routes each
// session's requests to its thread and merges the control answers.
type shardFront struct{ set *shardSet }

var (
	_ service.NIC     = (*shardFront)(nil)
	_ service.RingNIC = (*shardFront)(nil)
	_ service.Watcher = (*shardFront)(nil)
)

func (f *shardFront) Info() vproto.DeviceInfo { return f.set.ds[0].Info() }

func (f *shardFront) RegMR(owner uint32, fd int, req vproto.RegMR) (vproto.MRInfo, error) {
	return f.set.thread(owner).RegMR(owner, fd, req)
}

func (f *shardFront) DeregMR(owner uint32, req vproto.DeregMR) error {
	return f.set.thread(owner).DeregMR(owner, req)
}

// CreateQP makes the QP on the thread with the fewest QPs: one session's
// QPs spread over the threads too.
func (f *shardFront) CreateQP(owner uint32, req vproto.CreateQP) (vproto.QPInfo, error) {
	f.set.thread(owner) // the session's own thread, chosen on its first request
	i := f.set.qpThread()
	info, err := f.set.ds[i].CreateQP(owner, req)
	if err == nil {
		f.set.countQP(owner, i, 1)
	}
	return info, err
}

func (f *shardFront) ConnectQP(owner uint32, req vproto.ConnectQP) error {
	return f.byQPN(req.QPN).ConnectQP(owner, req)
}

func (f *shardFront) DestroyQP(owner uint32, qpn uint32) error {
	err := f.byQPN(qpn).DestroyQP(owner, qpn)
	if err == nil {
		f.set.countQP(owner, f.set.threadOf(qpn), -1)
	}
	return err
}

// Post (the socket path) hands each work request to its QP's thread, in
// order per QP.
func (f *shardFront) Post(owner uint32, wrs []vproto.WR) {
	by := make([][]vproto.WR, len(f.set.ds))
	for _, w := range wrs {
		i := f.set.threadOf(w.QPN)
		by[i] = append(by[i], w)
	}
	for i, b := range by {
		if len(b) > 0 {
			f.set.ds[i].Post(owner, b)
		}
	}
}

func (f *shardFront) AttachRing(owner uint32, memfd, doorbell int, req vproto.Ring) error {
	return f.set.thread(owner).AttachRing(owner, memfd, doorbell, req)
}

// Watch subscribes the caller on every engine thread: each samples its own
// QPs at the interval, the front also the ports (summed over the threads'
// sockets), all into the caller's one stream.
func (f *shardFront) Watch(caller service.Caller, interval time.Duration, push func(body []byte, wait bool) bool) (vproto.WatchInfo, func(), error) {
	var info vproto.WatchInfo
	var stops []func()
	stopAll := func() {
		for _, s := range stops {
			s()
		}
	}
	for i, d := range f.set.ds {
		in, stop, err := d.Watch(caller, interval, push)
		if err != nil {
			stopAll()
			return vproto.WatchInfo{}, nil, err
		}
		if i == 0 {
			info = in
		}
		stops = append(stops, stop)
	}
	return info, stopAll, nil
}

// CloseOwner destroys the session's QPs on every thread, then unmaps its
// regions (one table for all threads).
func (f *shardFront) CloseOwner(owner uint32) {
	for _, d := range f.set.ds {
		d.closeOwnerQPs(owner)
	}
	f.set.ds[0].regions.Release(owner)
	f.set.forget(owner)
}

// byQPN returns the thread that owns QP qpn.
func (f *shardFront) byQPN(qpn uint32) *Daemon { return f.set.ds[int(qpn)%len(f.set.ds)] }

// Ctl answers a control command: per QP on the QP's thread, NIC-wide ones
// on every thread with the answers merged (QP rows in QP order, counters
// summed), the rest (ports' names, denylist, OAM) on the front. Port
// statistics are summed over the threads' sockets of each port.
func (f *shardFront) Ctl(caller service.Caller, req vproto.CtlRequest) (any, error) {
	ds := f.set.ds
	switch req.Cmd {
	case vproto.CtlEVs:
		return f.byQPN(req.QPN).Ctl(caller, req)
	case vproto.CtlDeny, vproto.CtlAllow:
		if req.QPN != 0 {
			return f.byQPN(req.QPN).Ctl(caller, req)
		}
		var first any
		for i, d := range ds {
			res, err := d.Ctl(caller, req)
			if err != nil {
				return nil, fmt.Errorf("thread %d: %w", i, err)
			}
			if i == 0 {
				first = res
			}
		}
		return first, nil
	case vproto.CtlQPs:
		var rows []vproto.QPRow
		for _, d := range ds {
			res, err := d.Ctl(caller, req)
			if err != nil {
				return nil, err
			}
			rows = append(rows, res.([]vproto.QPRow)...)
		}
		sort.Slice(rows, func(i, j int) bool { return rows[i].QPN < rows[j].QPN })
		if rows == nil {
			rows = []vproto.QPRow{}
		}
		return rows, nil
	case vproto.CtlPorts:
		res, err := ds[0].Ctl(caller, req)
		if err != nil {
			return nil, err
		}
		ports := res.([]vproto.PortStatus)
		f.sumPortStats(ports)
		return ports, nil
	case vproto.CtlCounters:
		var sum vproto.Counters
		for i, d := range ds {
			res, err := d.Ctl(caller, req)
			if err != nil {
				return nil, err
			}
			c := res.(vproto.Counters)
			if i == 0 {
				sum = c
				sum.Engine, sum.QPs, sum.Daemon = addCounters(nil, c.Engine), addCounters(nil, c.QPs), addCounters(nil, c.Daemon)
				continue
			}
			addCounters(sum.Engine, c.Engine)
			addCounters(sum.QPs, c.QPs)
			addCounters(sum.Daemon, c.Daemon) // Regions: one table for all threads
		}
		f.sumPortStats(sum.Ports)
		sum.Daemon["threads"] = uint64(len(ds))
		return sum, nil
	}
	return ds[0].Ctl(caller, req)
}

// sumPortStats adds the other threads' socket counters of each port to the
// front's (ports is the front's answer, a fresh copy).
func (f *shardFront) sumPortStats(ports []vproto.PortStatus) {
	for i := range ports {
		ports[i].Stats = addCounters(nil, ports[i].Stats)
		for _, d := range f.set.ds[1:] {
			if i < len(d.ports) {
				addCounters(ports[i].Stats, vproto.CounterMap(d.ports[i].Stats()))
			}
		}
	}
}

// addCounters adds b into a (a fresh map when a is nil) and returns a.
func addCounters(a, b map[string]uint64) map[string]uint64 {
	if a == nil {
		a = make(map[string]uint64, len(b))
	}
	for k, v := range b {
		a[k] += v
	}
	return a
}

// addStats returns a + b, field by field (every field of xsk.Stats is a
// uint64 counter).
func addStats(a, b xsk.Stats) xsk.Stats {
	va, vb := reflect.ValueOf(&a).Elem(), reflect.ValueOf(b)
	for i := 0; i < va.NumField(); i++ {
		va.Field(i).SetUint(va.Field(i).Uint() + vb.Field(i).Uint())
	}
	return a
}
