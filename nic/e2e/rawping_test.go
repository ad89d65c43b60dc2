package e2e

import (
	"context"
	"fmt"
	"net/netip"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/softmrc/softmrc/internal/wire"
	"github.com/softmrc/softmrc/nic/shmring"
	"github.com/softmrc/softmrc/nic/xsk"
)

// rawPingMode is how each side of the raw AF_XDP ping-pong waits for the
// other's frame.
type rawPingMode int

const (
	// rawPingBlock: one thread per side, asleep in poll(2) on its socket
	// between frames; the kernel wakes it, as it wakes UDP's reader.
	rawPingBlock rawPingMode = iota
	// rawPingSpin: one thread per side polling its receive ring without
	// sleeping (two spinning threads: on 2 vCPUs, the whole machine).
	rawPingSpin
	// rawPingHandoff: rawPingBlock, and each side's socket thread hands
	// the frame to a second thread (the application) through a futex and
	// sleeps until that thread hands the answer back, then sends it. It
	// is mrc-nicd's shape, a daemon's loop and an application on a shared
	// ring, with no work in either: three wake-ups each way where UDP has
	// one.
	rawPingHandoff
	// rawPingHandoffSpin: rawPingHandoff with the socket threads polling
	// their receive ring and their application's answer without sleeping
	// (mrc-nicd's busy polling); the applications sleep. Four threads on
	// a 2-vCPU machine: the spinning ones take the CPUs the applications
	// need to wake.
	rawPingHandoffSpin
)

func (m rawPingMode) String() string {
	return [...]string{"blocking", "spinning", "hand-off", "hand-off, socket threads spinning"}[m]
}

// rawXDPPingPong returns the median half round trip, in µs, of n
// exchanges of one MRC Write-only frame with a 2-byte payload between
// src's and dst's port p over raw AF_XDP sockets (the frames addressed as
// mrc-nicd addresses them, so that on a fabric the switches forward them).
// An exchange not answered within a second is no sample; the daemons must
// not run on those ports.
func rawXDPPingPong(tb testing.TB, src, dst *host, p, n int, mode rawPingMode) float64 {
	tb.Helper()
	// Each side's threads stay locked to their OS threads and, in hand-off
	// mode, sleep in futex calls: Ps enough that none waits for one.
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(8))
	handoff := mode == rawPingHandoff || mode == rawPingHandoffSpin
	sockSpin := mode == rawPingSpin || mode == rawPingHandoffSpin
	hs := [2]*host{src, dst}
	var ports [2]*xsk.XDPPort
	var frames [2][]byte
	for i, h := range hs {
		c, peer := h.cfg.Ports[p], hs[1-i].cfg.Ports[p]
		inNS(tb, h.ns, func() {
			var err error
			if ports[i], err = xsk.Open(xsk.Config{Ifname: c.Interface, Addrs: []netip.Addr{c.Address}, RingSize: 256}); err != nil {
				tb.Fatal(err)
			}
		})
		defer ports[i].Close()
		pk := wire.Packet{SrcMAC: c.MAC, DstMAC: c.NeighborMAC, Src: wire.Addr128FromNetip(c.Address), Dst: wire.Addr128FromNetip(peer.Address),
			DSCP: wire.DSCPTrimmable, ECN: wire.ECNECT0, EV: 0x1234, Opcode: wire.OpWriteOnly, DestQP: 0x101, PSN: 1,
			VA: 0x1000, RKey: 7, DMALen: 2, Payload: []byte{1, 2}}
		frames[i] = make([]byte, pk.Len())
		k, err := pk.Encode(frames[i])
		if err != nil {
			tb.Fatal(err)
		}
		frames[i] = frames[i][:k]
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(n)*time.Second/50+10*time.Second)
	defer cancel()
	// Each side: one frame in, one frame out. recv waits for a frame (at
	// most until deadline); the answer is sent by the caller.
	recv := func(port *xsk.XDPPort, deadline time.Time) bool {
		for ctx.Err() == nil && time.Now().Before(deadline) {
			if k, _ := port.RecvFunc(64, func([]byte) {}); k > 0 {
				return true
			}
			if !sockSpin {
				_ = port.Wait(10 * time.Millisecond)
			}
		}
		return false
	}
	// A hand-off between a socket thread and its application: the
	// socket thread bumps toApp and waits (sleeps, or with sockSpin
	// polls) until the application has bumped toSock to the same count.
	type handoffs struct{ toApp, toSock uint32 }
	await := func(word *uint32, want uint32, spin bool) bool {
		for {
			v := atomic.LoadUint32(word)
			if v == want {
				return true
			}
			if ctx.Err() != nil {
				return false
			}
			if !spin {
				shmring.Wait(word, v, 10*time.Millisecond)
			}
		}
	}
	bump := func(word *uint32) uint32 {
		v := atomic.AddUint32(word, 1)
		shmring.Wake(word)
		return v
	}
	var wg sync.WaitGroup
	done := make(chan struct{})
	locked := func(fn func()) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			fn()
		}()
	}
	stopped := func() bool {
		select {
		case <-done:
			return true
		default:
			return false
		}
	}
	// The responder (dst): its socket thread answers every frame; in
	// hand-off mode only after its application has answered the frame.
	var b handoffs
	if handoff {
		locked(func() {
			for seen := uint32(0); !stopped(); {
				if atomic.LoadUint32(&b.toApp) == seen {
					shmring.Wait(&b.toApp, seen, 10*time.Millisecond)
					continue
				}
				seen++
				bump(&b.toSock) // the answer, posted
			}
		})
	}
	locked(func() {
		for !stopped() {
			if !recv(ports[1], time.Now().Add(100*time.Millisecond)) {
				continue
			}
			if handoff && !await(&b.toSock, bump(&b.toApp), sockSpin) {
				return
			}
			_, _ = ports[1].Send(frames[1:2])
		}
	})
	// The initiator (src): in hand-off mode this thread is the
	// application, and a socket thread sends each ping it posts and hands
	// it the answer (lost records an answer that did not come).
	var a handoffs
	var lost atomic.Bool
	var sendErr error
	if handoff {
		locked(func() {
			for seen := uint32(0); !stopped(); {
				if atomic.LoadUint32(&a.toSock) == seen {
					if !sockSpin {
						shmring.Wait(&a.toSock, seen, 10*time.Millisecond)
					}
					continue
				}
				seen++
				if _, err := ports[0].Send(frames[0:1]); err != nil {
					sendErr = err
				}
				lost.Store(!recv(ports[0], time.Now().Add(time.Second)))
				bump(&a.toApp)
			}
		})
	}
	stop := func() {
		close(done)
		cancel()
		wg.Wait()
	}
	runtime.LockOSThread()
	var s []float64
	for i := 0; i < n && ctx.Err() == nil; i++ {
		t0 := time.Now()
		if handoff {
			if !await(&a.toApp, bump(&a.toSock), false) || lost.Load() {
				continue
			}
		} else {
			if _, err := ports[0].Send(frames[0:1]); err != nil {
				sendErr = err
				break
			}
			if !recv(ports[0], t0.Add(time.Second)) {
				continue // lost: not a sample
			}
		}
		s = append(s, float64(time.Since(t0).Nanoseconds())/2e3)
	}
	runtime.UnlockOSThread()
	stop()
	if sendErr != nil {
		tb.Fatalf("raw AF_XDP ping-pong (%v): send: %v", mode, sendErr)
	}
	if len(s) < n/2 {
		tb.Fatalf("raw AF_XDP ping-pong (%v): %d of %d exchanges answered", mode, len(s), n)
	}
	slices.Sort(s)
	return s[len(s)/2]
}

// TestRawXDPPingPong runs the latency floors of make bench-nic on a veth
// pair: each mode answers (almost) every exchange in a plausible time.
func TestRawXDPPingPong(t *testing.T) {
	requireNetns(t)
	tp := newTopoMTU(t, 1, false, benchLinkMTU(2048), 2048)
	for _, mode := range []rawPingMode{rawPingBlock, rawPingSpin, rawPingHandoff, rawPingHandoffSpin} {
		t.Run(fmt.Sprint(mode), func(t *testing.T) {
			us := rawXDPPingPong(t, tp.h[0], tp.h[1], 0, 200, mode)
			t.Logf("%v: %.1f µs half round trip", mode, us)
			if us <= 0 || us > 1e5 {
				t.Fatalf("%v: half round trip %.1f µs", mode, us)
			}
		})
	}
}
