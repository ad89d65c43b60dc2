package perf

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/softmrc/softmrc/internal/hostmap"
	"github.com/softmrc/softmrc/nic/config"
	"github.com/softmrc/softmrc/nic/inprocess"
	"github.com/softmrc/softmrc/nic/verbs"
)

// regionCap bounds the per-QP region: sizes below it get several slots (one
// per outstanding work request, up to -t), larger sizes one.
const regionCap = 8 << 20

// stopImm is the immediate that ends the latency responder's loop.
const stopImm = 0xFFFFFFFF

// testParams are what the client sends the server: the server follows them.
type testParams struct {
	Kind     Kind
	Size     int
	All      bool
	Iters    int
	Duration int
	QPs      int
	TxDepth  int
	Bidir    bool
	Verify   bool
	Infinite bool
	Unsig    bool
	MTU      int
	// CQMod is the client's --cq-mod (0: the default).
	CQMod int `json:",omitempty"`
	// Transport is the client's --transport ("" from older clients: mrc).
	Transport string `json:",omitempty"`
}

// result is what the server reports after each round.
type result struct {
	Mismatches uint64    `json:"mismatches"`
	FirstBad   int64     `json:"first_bad"`
	Checked    uint64    `json:"checked"`
	Send       *sendStat `json:"send,omitempty"` // -b: the server's own direction
	Error      string    `json:"error,omitempty"`
}

type sendStat struct {
	Iters   []uint64 `json:"iters"` // completed per QP
	Bytes   float64  `json:"bytes"`
	Seconds float64  `json:"seconds"`
	PeakBps float64  `json:"peak_bps"`
}

type qpCtx struct {
	idx    int
	qp     *verbs.QP
	src    *verbs.MR
	dst    *verbs.MR
	remote key
	posted uint64
	done   uint64
	// signaled: the writes up to here (exclusive) end in one that asks
	// for a completion.
	signaled uint64
	v        verifyState // --verify
}

type session struct {
	p      *Params
	dev    *verbs.Device
	info   verbs.DeviceInfo
	o      *oob
	qps    []*qpCtx
	byQPN  map[uint32]*qpCtx
	out    io.Writer // tables (stdout, or io.Discard with --json)
	diag   io.Writer // banner (stderr with --json)
	errw   io.Writer // progress and verify failures: never mixed into a table
	cs     []verbs.Completion
	region int
	// progress
	progIters atomic.Uint64
	progSize  atomic.Int64
}

// Run runs the test: the server when p.Server is empty, else the client.
// Both print the banner; the client prints the results, and so does the
// BW server, as perftest's does (serve). It returns an error when the test
// could not run or --verify found wrong bytes.
func Run(ctx context.Context, p *Params, stdout, stderr io.Writer) (err error) {
	s := &session{p: p, out: stdout, diag: stdout, byQPN: map[uint32]*qpCtx{}, cs: make([]verbs.Completion, 512), errw: stderr}
	if p.JSON {
		s.out, s.diag = io.Discard, stderr
	}
	dev, vo := p.Device, verbs.Options{Spin: p.Spin, HeldWait: p.HeldWait, NoRing: p.NoRing}
	if p.InProcess {
		var nic *inprocess.NIC
		// The loop polls for busy_poll after its work whatever its
		// thread waited for a CPU (busy_poll_always), as perftest polls
		// its CQ: with mrc-nicd's spin gate a short wait for a CPU turned
		// polling off and a 2 B t_typical read 31-37 µs in 4 of 9 rounds
		// of make bench-nic on a veth pair, 8.8-12.3 µs in the others;
		// 8.7-10.7 in all 5 rounds without the gate.
		if nic, err = inprocess.Start(ctx, p.NICConfig, stderr, func(c *config.Config) { c.BusyPollAlways = true }); err != nil {
			return err
		}
		defer func() {
			if e := nic.Stop(); e != nil && err == nil {
				err = fmt.Errorf("--in-process: the NIC: %w", e)
			}
		}()
		spin := vo.Spin
		dev, vo = nic.Socket(), nic.VerbsOptions()
		vo.Spin = spin
	}
	s.dev, err = verbs.OpenWith(dev, vo)
	if err != nil {
		return err
	}
	defer s.dev.Close()
	s.info = s.dev.Info()
	if p.MTU != 0 && p.MTU != s.info.MTU {
		return fmt.Errorf("-m %d: the device's MTU is %d (set mtu: in mrc-nicd's config, or start it with -mtu %d)", p.MTU, s.info.MTU, p.MTU)
	}
	conn, err := s.connectOOB(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	s.o = newOOB(conn)
	// Closing the connection when ctx ends unblocks every OOB read.
	stop := context.AfterFunc(ctx, func() { conn.SetDeadline(time.Now()) })
	defer stop()
	// So does the device dying (a side that only waits on the peer would
	// otherwise notice only when the peer gives up).
	watchDone := make(chan struct{})
	defer close(watchDone)
	go func() {
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-watchDone:
				return
			case <-t.C:
				if s.dev.Err() != nil {
					conn.SetDeadline(time.Now())
					return
				}
			}
		}
	}()
	defer func() {
		// Name the real cause when the device died under an OOB wait.
		if err != nil && s.dev.Err() != nil && !errors.Is(err, verbs.ErrDeviceGone) {
			err = fmt.Errorf("%w (while: %v)", s.dev.Err(), err)
		}
	}()
	if err := s.handshake(); err != nil {
		return err
	}
	if err := s.setupQPs(); err != nil {
		return err
	}
	printBanner(s.diag, p, s.info)
	for _, q := range s.qps {
		printAddr(s.diag, "local", s.localKey(q))
		printAddr(s.diag, "remote", q.remote)
	}
	fmt.Fprintln(s.diag, resultLine)
	if p.Server == "" {
		return s.serve(ctx)
	}
	return s.client(ctx, stdout)
}

func (s *session) connectOOB(ctx context.Context) (net.Conn, error) {
	p := s.p
	if p.Server == "" {
		ln, err := net.Listen("tcp", net.JoinHostPort(p.Bind, strconv.Itoa(p.Port)))
		if err != nil {
			return nil, fmt.Errorf("listen for the client on port %d: %w", p.Port, err)
		}
		defer ln.Close()
		if p.OnListen != nil {
			p.OnListen(ln.Addr().String())
		}
		fmt.Fprintf(s.diag, "\n************************************\n* Waiting for client to connect... *\n************************************\n")
		stop := context.AfterFunc(ctx, func() { ln.Close() })
		defer stop()
		c, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return nil, fmt.Errorf("accept the client: %w", err)
		}
		return c, nil
	}
	addr, err := hostmap.Resolve(os.Getenv(hostmap.Env), net.JoinHostPort(p.Server, strconv.Itoa(p.Port)))
	if err != nil {
		return nil, err
	}
	var d net.Dialer
	deadline := time.Now().Add(5 * time.Second)
	for {
		c, err := d.DialContext(ctx, "tcp", addr)
		if err == nil {
			return c, nil
		}
		if dnsErr := (*net.DNSError)(nil); errors.As(err, &dnsErr) {
			// A name that will not resolve does not start to by retrying.
			return nil, fmt.Errorf("connect to the server at %s: %w (%s)", addr, err, unknownHostHint(p.Server))
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return nil, fmt.Errorf("connect to the server at %s: %w (is the server side running?)", addr, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// unknownHostHint says what to give instead of a name the resolver did not
// know: in a testbed host (mrc-testbed exec) the hosts it names, elsewhere
// an address.
func unknownHostHint(name string) string {
	if names := hostmap.Names(os.Getenv(hostmap.Env)); len(names) > 0 {
		return fmt.Sprintf("%q is not one of this testbed's hosts, %s", name, strings.Join(names, " "))
	}
	return "give the server's address, or run the client with mrc-testbed exec HOST -- to name testbed hosts"
}

func (s *session) handshake() error {
	o, p := s.o, s.p
	tp := testParams{Kind: p.Kind, Size: p.Size, All: p.All, Iters: p.Iters, Duration: p.Duration, QPs: p.QPs,
		TxDepth: p.TxDepth, Bidir: p.Bidir, Verify: p.Verify, Infinite: p.Infinite, Unsig: p.Unsig, MTU: s.info.MTU,
		CQMod: p.CQMod, Transport: p.Transport.String()}
	if p.Server != "" {
		if err := o.send(protoVersion); err != nil {
			return err
		}
		if err := o.expect(protoVersion); err != nil {
			return fmt.Errorf("%w (peer is not mrc-write-bw/lat of this version)", err)
		}
		if err := o.sendJSON("PARAMS", tp); err != nil {
			return err
		}
		var mtu int
		line, err := o.recv()
		if err != nil {
			return err
		}
		if rest, ok := strings.CutPrefix(line, "ERROR "); ok {
			return fmt.Errorf("server: %s", rest)
		}
		if _, err := fmt.Sscanf(line, "MTU %d", &mtu); err != nil {
			return fmt.Errorf("out-of-band: expected the server's MTU, got %q", trunc(line))
		}
		if mtu != s.info.MTU {
			return fmt.Errorf("MTU mismatch: local device %d, remote %d (set the same mtu: in both mrc-nicd configs)", s.info.MTU, mtu)
		}
		return nil
	}
	if err := o.expect(protoVersion); err != nil {
		return fmt.Errorf("%w (peer is not mrc-write-bw/lat of this version)", err)
	}
	if err := o.send(protoVersion); err != nil {
		return err
	}
	var peer testParams
	if err := o.recvJSON("PARAMS", &peer); err != nil {
		return err
	}
	if peer.Kind != p.Kind {
		_ = o.send("ERROR the server runs the %s test, the client the %s test", p.Kind, peer.Kind)
		return fmt.Errorf("client runs the %s test, this server the %s test", peer.Kind, p.Kind)
	}
	// Unlike the test parameters, the transport is not followed: both
	// sides name it, so that a RoCE result is never silently an MRC one.
	peerTr := verbs.TransportMRC
	if peer.Transport != "" {
		var err error
		if peerTr, err = verbs.ParseTransport(peer.Transport); err != nil {
			_ = o.send("ERROR the server does not know the client's transport: %v", err)
			return fmt.Errorf("client's transport: %w", err)
		}
	}
	if peerTr != p.Transport {
		_ = o.send("ERROR transport mismatch: the server runs --transport %s, the client --transport %s (give both sides the same)", p.Transport, peerTr)
		return fmt.Errorf("transport mismatch: this server runs --transport %s, the client --transport %s (give both sides the same)", p.Transport, peerTr)
	}
	// The server follows the client's test parameters, as perftest expects
	// both sides to be given the same ones.
	p.Size, p.All, p.Iters, p.Duration, p.QPs, p.TxDepth = peer.Size, peer.All, peer.Iters, peer.Duration, peer.QPs, peer.TxDepth
	p.Bidir, p.Verify, p.Infinite, p.Unsig = peer.Bidir, peer.Verify, peer.Infinite, peer.Unsig
	p.CQMod = peer.CQMod
	if err := o.send("MTU %d", s.info.MTU); err != nil {
		return err
	}
	if peer.MTU != s.info.MTU {
		return fmt.Errorf("MTU mismatch: local device %d, remote %d (set the same mtu: in both mrc-nicd configs)", s.info.MTU, peer.MTU)
	}
	return nil
}

func (s *session) localKey(q *qpCtx) key {
	return key{QPN: q.qp.QPN, PSN: q.qp.PSN, RKey: q.dst.RKey, VAddr: q.dst.Addr, MTU: q.qp.MTU, Window: q.qp.Window,
		MaxWImm: q.qp.MaxWImm, Addrs: devAddrs(s.info)}
}

func (s *session) setupQPs() error {
	p := s.p
	maxSize := 0
	for _, n := range p.sizes() {
		maxSize = max(maxSize, n)
	}
	s.region = max(maxSize, min(maxSize*p.TxDepth, regionCap))
	for i := 0; i < p.QPs; i++ {
		qp, err := s.dev.CreateQP(verbs.QPConfig{SQDepth: p.TxDepth, Transport: p.Transport})
		if err != nil {
			return err
		}
		q := &qpCtx{idx: i, qp: qp}
		// The source is only read; the peer writes into dst.
		if q.src, err = s.dev.RegMR(s.region, verbs.AccessLocalWrite); err != nil {
			return err
		}
		if q.dst, err = s.dev.RegMR(s.region, verbs.AccessLocalWrite|verbs.AccessRemoteWrite); err != nil {
			return err
		}
		s.qps = append(s.qps, q)
		s.byQPN[qp.QPN] = q
	}
	for _, q := range s.qps {
		mine := s.localKey(q).String()
		var line string
		var err error
		if s.p.Server != "" {
			if err = s.o.send("%s", mine); err == nil {
				line, err = s.o.recv()
			}
		} else if line, err = s.o.recv(); err == nil {
			err = s.o.send("%s", mine)
		}
		if err != nil {
			return err
		}
		if q.remote, err = parseKey(line); err != nil {
			return err
		}
		r := q.remote.remote()
		r.EVs = s.p.EVs // nil: the daemon chooses
		if err := q.qp.Connect(r); err != nil {
			return err
		}
	}
	// Barrier: both sides' QPs are connected before any data moves.
	if s.p.Server != "" {
		if err := s.o.send("READY"); err != nil {
			return err
		}
		return s.o.expect("READY")
	}
	if err := s.o.expect("READY"); err != nil {
		return err
	}
	return s.o.send("READY")
}

func (s *session) slots(size int) int {
	if size == 0 {
		return 1
	}
	return max(1, min(s.p.TxDepth, s.region/size))
}

// pattern fills b, slot slot of QP qp for message size, with deterministic
// bytes: every (size, slot, QP) differs, so a misplaced write shows.
func pattern(b []byte, size, slot, qp int) {
	seed := uint64(size)*0x9E3779B97F4A7C15 ^ uint64(slot)<<32 ^ uint64(qp)<<48
	i := 0
	for ; i+8 <= len(b); i += 8 {
		v := (seed + uint64(i)) * 0xD6E8FEB86659FD93
		binary.LittleEndian.PutUint64(b[i:], v^v>>32)
	}
	if i < len(b) {
		v := (seed + uint64(i)) * 0xD6E8FEB86659FD93
		var t [8]byte
		binary.LittleEndian.PutUint64(t[:], v^v>>32)
		copy(b[i:], t[:])
	}
}

// prepare fills the source slots for size and, with --verify, zeroes the
// destination so that a missing write shows.
func (s *session) prepare(size int) {
	for _, q := range s.qps {
		for k := 0; k < s.slots(size); k++ {
			pattern(q.src.Buf[k*size:(k+1)*size], size, k, q.idx)
		}
		if s.p.Verify {
			clear(q.dst.Buf[:min(len(q.dst.Buf), s.slots(size)*max(size, 1))])
		}
		q.posted, q.done, q.signaled = 0, 0, 0
		q.v.reset()
	}
}

// next returns a completion, waiting for one; it fails when the device
// dies or ctx ends.
func (s *session) next(ctx context.Context, spin bool) ([]verbs.Completion, error) {
	return s.poll(ctx, spin, time.Time{})
}

// nextBy returns the completions there are, waiting for one until
// deadline at most (none when it passes first); it fails when the device
// dies or ctx ends.
func (s *session) nextBy(ctx context.Context, deadline time.Time) ([]verbs.Completion, error) {
	return s.poll(ctx, false, deadline)
}

// poll is next and nextBy: completions as soon as there are any, a short
// spin first when spin is set, and no later than deadline unless it is
// zero.
func (s *session) poll(ctx context.Context, spin bool, deadline time.Time) ([]verbs.Completion, error) {
	for {
		n, err := s.dev.PollCQ(s.cs)
		if err != nil {
			return nil, err
		}
		if n > 0 {
			return s.cs[:n], nil
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if spin && !s.p.InProcess { // an in-process NIC's wait yields to it instead (WaitCQ)
			// A short spin keeps the latency test off the scheduler's
			// wakeup path.
			for i := 0; i < 2000; i++ {
				if n, err = s.dev.PollCQ(s.cs); n > 0 || err != nil {
					break
				}
			}
			if n > 0 {
				return s.cs[:n], nil
			}
		}
		wait := 50 * time.Millisecond
		if !deadline.IsZero() {
			left := time.Until(deadline)
			if left <= 0 {
				return nil, nil
			}
			wait = min(wait, left)
		}
		if _, err := s.dev.WaitCQ(wait); err != nil {
			return nil, err
		}
	}
}

func completionErr(c verbs.Completion) error {
	return fmt.Errorf("work request %#x on QP %#06x failed: %v", c.ID, c.QPN, c.Status)
}

// checkWR is the zero-length Write-with-Immediate that asks the peer to
// check q's current window (the writes posted in it so far).
func checkWR(q *qpCtx, k uint64) verbs.SendWR {
	win := q.v.win
	q.v.waitAck = true
	return verbs.WriteImm(checkIDFlag|win, q.src, 0, 0, q.remote.VAddr, q.remote.RKey, checkReq(win, int(q.posted-win*k)))
}

// sendBW writes size-byte messages on every QP: iters each, or for the
// duration; tx-depth in flight per QP.
func (s *session) sendBW(ctx context.Context, size int) (sendStat, error) {
	p := s.p
	nslots := s.slots(size)
	k := uint64(s.verifyWindow(size))
	iters := uint64(p.Iters)
	dur := p.dur()
	var wrs []verbs.SendWR
	var posts, stamps []stamp
	start := time.Now()
	end := start.Add(dur)
	last := start
	// --rate_limit: message i (over every QP) is posted no earlier than
	// start + i × perMsg, so what was posted by t is at most rate × t plus
	// one message.
	perMsg := p.perMessage(size)
	cqMod := p.cqMod()
	var posted uint64 // over every QP
	var doneAll uint64
	for {
		passBefore := posted
		var passAt int64
		if dur == 0 {
			passAt = int64(time.Since(start))
		}
		stopPosting := ctx.Err() != nil || (dur > 0 && time.Now().After(end))
		budget := uint64(math.MaxUint64)
		if perMsg > 0 {
			budget = uint64(time.Since(start)/perMsg) + 1 - posted
		}
		held := false // the limiter kept a QP from posting
		busy := false
		for _, q := range s.qps {
			n := uint64(p.TxDepth) - (q.posted - q.done)
			if dur == 0 {
				n = min(n, iters-q.posted)
			}
			if p.Verify {
				// Only within the current window, and not while its check
				// is out (see verify.go).
				if q.v.waitAck {
					n = 0
				} else {
					n = min(n, (q.v.win+1)*k-q.posted)
				}
			}
			if stopPosting {
				// Under CQ moderation the last write posted may ask for no
				// completion: one more, signaled, closes the round (there
				// is room for it once a signaled one completes).
				n = min(n, q.posted-q.signaled, 1)
			}
			if n > budget {
				n, held = budget, true
			}
			budget -= n
			posted += n
			if n > 0 {
				wrs = wrs[:0]
				for j := uint64(0); j < n; j++ {
					it := q.posted + j
					off := uint64(int(it%uint64(nslots)) * size)
					if p.Verify {
						off = uint64(int(it%k) * size)
						iterPattern(q.src.Buf[off:off+uint64(size)], size, it, q.idx)
					}
					w := verbs.Write(uint64(q.idx)<<40|it, q.src, off, uint32(size), q.remote.VAddr+off, q.remote.RKey)
					if p.Unsig {
						w.Unsignaled = j != n-1
					} else {
						// One in cqMod, the last of the run and of a verify
						// window (its check waits for it), and the write
						// that closes a duration round.
						w.Unsignaled = (it+1)%cqMod != 0 && !(dur == 0 && it+1 == iters) &&
							!(p.Verify && (it+1)%k == 0) && !stopPosting
					}
					if !w.Unsignaled {
						q.signaled = it + 1
					}
					wrs = append(wrs, w)
				}
				q.posted += n
				if p.Verify && (q.posted == (q.v.win+1)*k || (dur == 0 && q.posted == iters)) {
					wrs = append(wrs, checkWR(q, k))
				}
				if err := q.qp.PostSend(wrs...); err != nil {
					return sendStat{}, err
				}
			} else if p.Verify && stopPosting && !q.v.waitAck && q.posted > q.v.win*k && q.signaled == q.posted {
				// A duration round ended inside a window: check what it has.
				if err := q.qp.PostSend(checkWR(q, k)); err != nil {
					return sendStat{}, err
				}
			}
			if q.done < q.posted || (dur == 0 && q.posted < iters) || q.v.waitAck {
				busy = true
			}
		}
		if dur == 0 && posted > passBefore {
			posts = append(posts, stamp{passAt, passBefore})
		}
		if !busy && (dur == 0 || stopPosting) {
			break
		}
		var cs []verbs.Completion
		var err error
		if held {
			// Wake for a completion or when the next message may go.
			cs, err = s.nextBy(ctx, start.Add(time.Duration(posted)*perMsg))
		} else {
			cs, err = s.next(ctx, false)
		}
		if err != nil && !errors.Is(err, context.Canceled) {
			return sendStat{}, err
		}
		now := time.Now()
		for _, c := range cs {
			q := s.byQPN[c.QPN]
			if c.Status != verbs.StatusSuccess || q == nil {
				return sendStat{}, completionErr(c)
			}
			if p.Verify {
				if c.Op == verbs.CQRecvImm {
					if isVerifyImm(c.Imm) {
						if err := s.onCheckImm(q, size, c.Imm); err != nil {
							return sendStat{}, err
						}
					}
					continue
				}
				if c.ID&checkIDFlag != 0 {
					continue
				}
			}
			// A completion stands for every write of its QP before it
			// (CQ moderation, --unsignaled).
			if d := c.ID&(1<<39-1) + 1; d > q.done {
				doneAll += d - q.done
				s.progIters.Add(d - q.done)
				q.done = d
			}
			if dur == 0 {
				stamps = append(stamps, stamp{int64(now.Sub(start)), doneAll})
			}
			last = now
		}
		if err != nil {
			// Interrupted: report what completed so far.
			break
		}
	}
	st := sendStat{Seconds: last.Sub(start).Seconds()}
	var total uint64
	for _, q := range s.qps {
		st.Iters = append(st.Iters, q.done)
		total += q.done
	}
	st.Bytes = float64(total) * float64(size)
	st.PeakBps = peakRate(posts, stamps, size)
	return st, nil
}

// stamp is a time and a count of messages (over every QP): for a
// completion, how many were complete then (one completion can stand for
// many under CQ moderation); for a post, how many had been posted before
// it.
type stamp struct {
	t    int64 // ns since the round's start (monotonic)
	done uint64
}

// peakRate is perftest's BW peak in bytes per second: the best rate over
// any span from a post to a completion, (messages completed by the
// completion − messages posted before the post) / (completion's time −
// post's time). At least that many messages were posted at or after the
// post and complete by the completion, so they all crossed the wire inside
// the span: the peak is a rate the path carried, never more. (A span from
// completion to completion is not: after a retransmission fills a hole, a
// QP's later messages, long since received, complete at once.) posts and
// comps are in time order; 0 when no span has a message in it.
//
// The best ratio over every pair is found by Dinkelbach's iteration: for
// a trial rate r, the pair maximising count − r × duration (one pass, the
// posts' running minimum of before − r × t) gives the next r; r stops
// growing at the best ratio, in a handful of passes.
func peakRate(posts, comps []stamp, size int) float64 {
	best := func(r float64) (uint64, int64) {
		var n uint64
		var dt int64
		val := math.Inf(-1)
		minV, minAt := math.Inf(1), -1
		i := 0
		for _, c := range comps {
			for ; i < len(posts) && posts[i].t < c.t; i++ {
				if v := float64(posts[i].done) - r*float64(posts[i].t); v < minV {
					minV, minAt = v, i
				}
			}
			if minAt < 0 || c.done <= posts[minAt].done {
				continue
			}
			if v := float64(c.done) - r*float64(c.t) - minV; v > val {
				val, n, dt = v, c.done-posts[minAt].done, c.t-posts[minAt].t
			}
		}
		return n, dt
	}
	var r float64 // messages per ns
	for range 64 {
		n, dt := best(r)
		if n == 0 {
			break
		}
		next := float64(n) / float64(dt)
		if next <= r*(1+1e-12) {
			break
		}
		r = next
	}
	return r * 1e9 * float64(size)
}

func (s *session) bwRow(size int, st sendStat, peer *sendStat) BWResult {
	p := s.p
	r := BWResult{MsgSize: size, Unit: bwUnit(p.Gbits)}
	bytes, secs, peak := st.Bytes, st.Seconds, st.PeakBps
	var iters uint64
	for _, n := range st.Iters {
		iters += n
	}
	msgRate := 0.0
	if secs > 0 {
		msgRate = float64(iters) / secs / 1e6
	}
	avg := 0.0
	if secs > 0 {
		avg = bytes / secs
	}
	if peer != nil && peer.Seconds > 0 {
		var pi uint64
		for _, n := range peer.Iters {
			pi += n
		}
		avg += peer.Bytes / peer.Seconds
		msgRate += float64(pi) / peer.Seconds / 1e6
		peak += peer.PeakBps
	}
	// The average's span starts before the first post (and sums both
	// sides under -b, as the peak does): the peak is never below it.
	peak = max(peak, avg)
	r.Iterations = uint64(p.Iters)
	if p.Duration > 0 {
		r.Iterations, peak = iters, 0
	}
	r.Seconds = secs
	r.Peak, r.Average, r.MsgRate = bwValue(peak, p.Gbits), bwValue(avg, p.Gbits), msgRate
	return r
}

// client drives the rounds and prints the table.
func (s *session) client(ctx context.Context, stdout io.Writer) error {
	p := s.p
	if p.Duration > 0 && p.Kind == BW {
		fmt.Fprintln(s.diag, "WARNING: BW peak won't be measured in this run.")
	}
	if p.Kind == BW {
		printBWHeader(s.out, p.Gbits)
	} else {
		printLatHeader(s.out, p.Duration > 0)
	}
	var rows []any
	var bad uint64
	stopProgress := s.progress(ctx)
	defer stopProgress()
	sizes := p.sizes()
	reports := 0
	var runErr error
	for i := 0; i < len(sizes); i++ {
		size := sizes[i]
		row, mism, err := s.clientRound(ctx, size)
		if err != nil {
			runErr = err
			break
		}
		bad += mism
		rows = append(rows, row)
		switch r := row.(type) {
		case BWResult:
			printBWRow(s.out, r)
		case LatResult:
			printLatRow(s.out, r)
		}
		if mism > 0 {
			fmt.Fprintf(s.errw, "VERIFY FAILED: %d B: %d wrong bytes\n", size, mism)
		}
		reports++
		if p.Infinite && ctx.Err() == nil && (p.MaxReports == 0 || reports < p.MaxReports) {
			i-- // same size again
		}
		if ctx.Err() != nil {
			break
		}
	}
	failed := runErr != nil && !(p.Infinite && errors.Is(runErr, context.Canceled))
	if failed {
		// Not END: the server would take the test for complete and exit 0.
		_ = s.o.send("ABORT " + strings.ReplaceAll(runErr.Error(), "\n", " "))
	} else {
		_ = s.o.send("END")
	}
	_, _ = s.o.recvWithin(5 * time.Second)
	fmt.Fprintln(s.out, resultLine)
	if p.JSON {
		doc := map[string]any{"test": fmt.Sprintf("RDMA_Write %s", p.Kind), "device": p.Device, "qps": p.QPs,
			"mtu": s.info.MTU, "planes": len(s.info.Ports), "verify": p.Verify, "results": rows}
		b, _ := json.MarshalIndent(doc, "", "  ")
		fmt.Fprintf(stdout, "%s\n", b)
	}
	if failed {
		return runErr
	}
	if bad > 0 {
		return fmt.Errorf("--verify: %d bytes did not land as written", bad)
	}
	return nil
}

// clientRound runs one size: tell the server, run, collect its verdict.
func (s *session) clientRound(ctx context.Context, size int) (any, uint64, error) {
	p := s.p
	s.prepare(size)
	s.progSize.Store(int64(size))
	s.progIters.Store(0)
	if err := s.o.send("SIZE %d", size); err != nil {
		return nil, 0, err
	}
	if err := s.o.expect("GO"); err != nil {
		return nil, 0, err
	}
	var row any
	var done []uint64
	if p.Kind == BW {
		st, err := s.sendBW(ctx, size)
		if err != nil {
			_ = s.o.sendJSON("DONE", roundEnd{Iters: []uint64{}})
			return nil, 0, err
		}
		done = st.Iters
		if err := s.o.sendJSON("DONE", roundEnd{Iters: done, Send: &st}); err != nil {
			return nil, 0, err
		}
		var res result
		// -b --verify: the server's checks still come until it is done.
		wait := s.checksWhile(p.Verify && p.Bidir, size)
		err = s.o.recvJSON("RESULT", &res)
		if cerr := wait(); cerr != nil && err == nil {
			return nil, 0, cerr
		}
		if err != nil {
			return nil, 0, err
		}
		if res.Error != "" {
			return nil, 0, fmt.Errorf("server: %s", res.Error)
		}
		r := s.bwRow(size, st, res.Send)
		mism := res.Mismatches
		if p.Verify {
			r.Verified = true
			if p.Bidir {
				mism += s.verifyResult().Mismatches
			}
			r.Mismatches = mism
		}
		row = r
		return row, mism, nil
	}
	r, err := s.pingPong(ctx, size)
	if err != nil {
		return nil, 0, err
	}
	if err := s.o.sendJSON("DONE", roundEnd{Iters: []uint64{r.Iterations}}); err != nil {
		return nil, 0, err
	}
	var res result
	if err := s.o.recvJSON("RESULT", &res); err != nil {
		return nil, 0, err
	}
	if res.Error != "" {
		return nil, 0, fmt.Errorf("server: %s", res.Error)
	}
	// The server's pong writes land in this side's buffer too: pingPong
	// checked each one.
	mism := res.Mismatches
	if p.Verify {
		mism += s.verifyResult().Mismatches
		r.Verified, r.Mismatches = true, mism
	}
	return r, mism, nil
}

// pingPong is the latency client: write-with-immediate to the server, wait
// for its write-with-immediate back; half the round trip is one sample.
func (s *session) pingPong(ctx context.Context, size int) (LatResult, error) {
	p := s.p
	q := s.qps[0]
	var samples []float64
	start := time.Now()
	end := start.Add(p.dur())
	for i := 0; ; i++ {
		if p.Duration > 0 {
			if time.Now().After(end) || ctx.Err() != nil {
				break
			}
		} else if i >= p.Iters {
			break
		}
		if p.Verify {
			iterPattern(q.src.Buf[:size], size, uint64(i), q.idx)
		}
		t0 := time.Now()
		if err := q.qp.PostSend(pingWR(verbs.WriteImm(uint64(i), q.src, 0, uint32(size), q.remote.VAddr, q.remote.RKey, uint32(i)))); err != nil {
			return LatResult{}, err
		}
		if err := s.waitImm(ctx); err != nil {
			return LatResult{}, err
		}
		samples = append(samples, float64(time.Since(t0).Nanoseconds())/2e3)
		if p.Verify {
			// The pong of ping i; the server sends the next only after
			// the next ping, so the slot cannot change under the check.
			s.checkLat(q, size, uint64(i))
		}
		s.progIters.Add(1)
	}
	elapsed := time.Since(start)
	// Tell the responder to stop (no answer comes).
	if err := q.qp.PostSend(verbs.WriteImm(1<<40, q.src, 0, 0, q.remote.VAddr, q.remote.RKey, stopImm)); err != nil {
		return LatResult{}, err
	}
	if p.Duration > 0 {
		r := latStats(size, samples)
		r.Duration, r.Iterations = true, uint64(len(samples))
		r.TPS = float64(len(samples)) / elapsed.Seconds()
		return r, nil
	}
	// perftest takes iters-1 samples (the first exchange warms up).
	if len(samples) > 1 {
		samples = samples[1:]
	}
	return latStats(size, samples), nil
}

// pingWR makes a latency ping or pong unsignaled: the answer to it (or the
// next ping) shows it landed, and a failure still completes with its error.
// A send completion per message would cost each side one more device-socket
// message and wakeup per iteration, which the test does not use.
func pingWR(w verbs.SendWR) verbs.SendWR {
	w.Unsignaled = true
	return w
}

// waitImm waits for the peer's write-with-immediate, checking this side's
// send completions on the way.
func (s *session) waitImm(ctx context.Context) error {
	for {
		cs, err := s.next(ctx, false)
		if err != nil {
			return err
		}
		got := false
		for _, c := range cs {
			if c.Status != verbs.StatusSuccess {
				return completionErr(c)
			}
			if c.Op == verbs.CQRecvImm {
				if got {
					return errors.New("two immediates arrived for one ping")
				}
				got = true
			}
		}
		if got {
			return nil
		}
	}
}

// serve is the server: follow the client's rounds until END.
// abortSettle is how long a server whose client aborted waits for its own
// device to report an error, if it is going to.
const abortSettle = 2 * time.Second

// clientAborted ends the server after the client's ABORT (between rounds
// or during one), saying so.
func (s *session) clientAborted(why string) error {
	_ = s.o.send("BYE")
	// The client's failure may be this side's device dying (its QPs stop
	// answering): give the device's own error a moment to arrive, so that
	// the error names the cause (Run's defer).
	for t := time.Now(); s.dev.Err() == nil && time.Since(t) < abortSettle; {
		time.Sleep(10 * time.Millisecond)
	}
	return fmt.Errorf("the client ended the test after an error:%s", why)
}

// The server prints its table as perftest's does: for BW under -b each
// round's row of both directions as the client prints it, otherwise the
// client's report of the last round at the end; for latency each round's
// row as this side measured it (respond).
func (s *session) serve(ctx context.Context) error {
	p := s.p
	if p.Kind == BW {
		printBWHeader(s.out, p.Gbits)
	} else {
		printLatHeader(s.out, p.Duration > 0)
	}
	var last *BWResult // unidirectional: the client's latest round
	for {
		line, err := s.o.recvWithin(24 * time.Hour)
		if err != nil {
			return err
		}
		if line == "END" {
			switch {
			case last != nil && p.Infinite:
				// perftest's one-way server reports no round of an endless run.
				fmt.Fprintln(s.out, " Client closed connection")
			case last != nil:
				printBWRow(s.out, *last)
			}
			fmt.Fprintln(s.out, resultLine)
			_ = s.o.send("BYE")
			return nil
		}
		if why, ok := strings.CutPrefix(line, "ABORT"); ok {
			return s.clientAborted(why)
		}
		var size int
		if _, err := fmt.Sscanf(line, "SIZE %d", &size); err != nil || size < 0 || size > s.region {
			return fmt.Errorf("out-of-band: bad round %q", trunc(line))
		}
		s.prepare(size)
		if err := s.o.send("GO"); err != nil {
			return err
		}
		var res result
		var latRow *LatResult
		switch {
		case p.Kind == Lat:
			r, err := s.respond(ctx, size)
			if err != nil {
				res.Error = err.Error()
			}
			latRow = &r
		case p.Bidir:
			st, err := s.sendBW(ctx, size)
			if err != nil {
				res.Error = err.Error()
			}
			res.Send = &st
		}
		var end roundEnd
		// A round lasts as long as the client says (-n, -D). With --verify
		// the client's check requests are answered meanwhile.
		wait := s.checksWhile(p.Verify && p.Kind == BW && res.Error == "", size)
		why, aborted, err := s.o.recvRoundEnd(&end, 24*time.Hour)
		if cerr := wait(); cerr != nil && res.Error == "" {
			res.Error = cerr.Error()
		}
		if err != nil {
			return err
		}
		if aborted {
			return s.clientAborted(why)
		}
		if p.Verify && res.Error == "" {
			v := s.verifyResult()
			res.Mismatches, res.FirstBad, res.Checked = v.Mismatches, v.FirstBad, v.Checked
		}
		if err := s.o.sendJSON("RESULT", res); err != nil {
			return err
		}
		if res.Error != "" {
			return errors.New(res.Error)
		}
		switch {
		case latRow != nil:
			printLatRow(s.out, *latRow)
		case p.Kind != BW || end.Send == nil:
		case p.Bidir:
			printBWRow(s.out, s.bwRow(size, *res.Send, end.Send))
		default:
			r := s.bwRow(size, *end.Send, nil)
			last = &r
		}
	}
}

// respond is the latency server: answer every ping with a pong until the
// stop immediate. Like perftest's server it measures too: half the time
// between its consecutive pongs is one round trip's half as this side
// sees it (perftest's tposted deltas), so its table is the client's
// measured from the other end.
func (s *session) respond(ctx context.Context, size int) (LatResult, error) {
	q := s.qps[0]
	var n uint64
	start := time.Now()
	var samples []float64
	var last time.Time
	for {
		cs, err := s.next(ctx, false)
		if err != nil {
			return LatResult{}, err
		}
		for _, c := range cs {
			if c.Status != verbs.StatusSuccess {
				return LatResult{}, completionErr(c)
			}
			if c.Op != verbs.CQRecvImm {
				continue
			}
			if c.Imm == stopImm {
				if s.p.Duration > 0 {
					r := latStats(size, samples)
					r.Duration, r.Iterations = true, n
					r.TPS = float64(n) / time.Since(start).Seconds()
					return r, nil
				}
				return latStats(size, samples), nil
			}
			if s.p.Verify {
				// Ping c.Imm landed before its immediate; the client sends
				// no other until this pong arrives.
				s.checkLat(q, size, uint64(c.Imm))
				iterPattern(q.src.Buf[:size], size, uint64(c.Imm), q.idx)
			}
			now := time.Now()
			if err := q.qp.PostSend(pingWR(verbs.WriteImm(n, q.src, 0, uint32(size), q.remote.VAddr, q.remote.RKey, c.Imm))); err != nil {
				return LatResult{}, err
			}
			if n > 0 {
				samples = append(samples, float64(now.Sub(last).Nanoseconds())/2e3)
			}
			last = now
			n++
		}
	}
}

// progress prints a line to the diagnostic stream every 2 s of a long round.
func (s *session) progress(ctx context.Context) func() {
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(2 * time.Second)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-t.C:
				fmt.Fprintf(s.errw, "# progress: %d B: %d iterations so far\n", s.progSize.Load(), s.progIters.Load())
			}
		}
	}()
	return func() { close(done) }
}
