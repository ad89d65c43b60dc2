package xsk

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	asavie "github.com/asavie/xdp"
	"golang.org/x/sys/unix"
)

// The veth baselines: 2100-byte frames (Eth+IPv6+UDP+2038 B) from one
// namespace to the other, unpaced, one sender and one receiver thread.
//
//	afxdp      this package, AF_XDP tx -> AF_XDP rx (the NIC benchmark's baseline)
//	udp-mmsg   kernel UDP, sendmmsg x64 -> recvmmsg x64 (same veth, same program attached)
//	asavie-rx  this package's tx -> asavie/xdp v0.3.3 rx with its Poll loop
//
// Each reports rx_Mpps and rx_Gbit/s (L2 bytes) over the whole run and the
// share of frames lost (the sender outruns the receiver: fill ring empty or
// socket buffer full). Compare only numbers from the same run, e.g.
//
//	go test -run '^$' -bench Veth2100 -benchtime 300000x -count 3 ./nic/xsk/
//
// XSK_BENCH_PIN=1 pins the sender to CPU 0 and the receiver to CPU 1.
func BenchmarkVeth2100(b *testing.B) {
	requireXDP(b)
	rxBatch := 256
	if v, err := strconv.Atoi(os.Getenv("XSK_BENCH_RXBATCH")); err == nil && v > 0 {
		rxBatch = v
	}
	const frameLen, batch = 2100, 64
	n := newVethNet(b, 3000)
	tx := openIn(b, n.nsA, Config{Ifname: n.ifA, NoSteer: true})
	rx := openIn(b, n.nsB, Config{Ifname: n.ifB, RingSize: 4096, Addrs: []netip.Addr{n.addrB}}) // as asavie-rx below
	frame := udpFrame(n.macB, n.macA, n.addrA, n.addrB, 49152, 4791, payload(frameLen-62, 1))

	b.Run("afxdp", func(b *testing.B) {
		runRate(b, frameLen, func(total int, stop *atomic.Bool) error {
			return xskSender(tx, frame, batch, total)
		}, func(total int, stop *atomic.Bool) (int, error) {
			got := 0
			for got < total && !stop.Load() {
				k, err := rx.RecvFunc(rxBatch, func([]byte) {})
				if err != nil {
					return got, err
				}
				got += k
				if k == 0 {
					_ = rx.Wait(time.Millisecond)
				}
			}
			return got, nil
		})
		st := rx.Stats()
		b.Logf("afxdp rx (cumulative): frames %d fill_empty %d rx_dropped %d kicks %d polls %d",
			st.RxFrames, st.FillEmpty, st.RxDropped, st.Kicks, st.Polls)
	})

	b.Run("udp-mmsg", func(b *testing.B) {
		const port = 4800 // not steered: the kernel stack receives it
		var sfd, rfd int
		if err := inNS(n.nsB, func() (err error) { rfd, err = udpSocket(n.addrB, port, true); return err }); err != nil {
			b.Fatal(err)
		}
		defer unix.Close(rfd)
		if err := inNS(n.nsA, func() (err error) { sfd, err = udpSocket(n.addrB, port, false); return err }); err != nil {
			b.Fatal(err)
		}
		defer unix.Close(sfd)
		pl := payload(frameLen-62, 2)
		// Resolve the neighbour first, or the first burst dies in NDP.
		warm := make([]byte, 2048)
		deadline := time.Now().Add(5 * time.Second)
		for {
			if _, err := unix.Write(sfd, pl); err != nil {
				b.Fatal("warm-up send:", err)
			}
			if _, err := unix.Read(rfd, warm); err == nil {
				break
			}
			if time.Now().After(deadline) {
				b.Fatal("warm-up: no UDP datagram reached the receiver in 5 s")
			}
		}
		runRate(b, frameLen, func(total int, stop *atomic.Bool) error {
			return mmsgSender(sfd, pl, batch, total)
		}, func(total int, stop *atomic.Bool) (int, error) {
			return mmsgReceiver(rfd, batch, total, stop)
		})
	})

	b.Run("asavie-rx", func(b *testing.B) {
		// A pair of its own: asavie's Close leaves the queue bound.
		n2 := newVethNet(b, 3000)
		tx2 := openIn(b, n2.nsA, Config{Ifname: n2.ifA, NoSteer: true})
		var as *asavie.Socket
		var steer *Steer
		err := inNS(n2.nsB, func() error {
			ifi, err := ifindexOf(n2.ifB)
			if err != nil {
				return err
			}
			as, err = asavie.NewSocket(ifi, 0, &asavie.SocketOptions{NumFrames: 8192, FrameSize: FrameSize,
				FillRingNumDescs: 4096, CompletionRingNumDescs: 64, RxRingNumDescs: 4096, TxRingNumDescs: 64})
			if err != nil {
				return fmt.Errorf("asavie NewSocket: %w", err)
			}
			if steer, err = AttachSteer(ifi, AttachNative); err != nil {
				return err
			}
			if err := steer.AddAddr(n2.addrB); err != nil {
				return err
			}
			return steer.Register(0, as.FD())
		})
		if err != nil {
			b.Fatal(err)
		}
		defer steer.Close()
		defer as.Close() // leaves its rings mapped (its defect), hence the own pair
		f2 := udpFrame(n2.macB, n2.macA, n2.addrA, n2.addrB, 49152, 4791, payload(frameLen-62, 3))
		runRate(b, frameLen, func(total int, stop *atomic.Bool) error {
			return xskSender(tx2, f2, batch, total)
		}, func(total int, stop *atomic.Bool) (int, error) {
			got := 0
			for got < total && !stop.Load() {
				if k := as.NumFreeFillSlots(); k > 0 {
					as.Fill(as.GetDescs(k))
				}
				k, _, err := as.Poll(1)
				if err != nil {
					return got, err
				}
				got += len(as.Receive(k))
			}
			return got, nil
		})
	})
}

// runRate runs one sender and one receiver on their own OS threads for b.N
// frames and reports the receive rate. The receiver stops at b.N frames, or
// 200 ms after the sender finished without reaching it (frames lost).
func runRate(b *testing.B, frameLen int, send func(int, *atomic.Bool) error, recv func(int, *atomic.Bool) (int, error)) {
	total := b.N
	var stop atomic.Bool
	type res struct {
		n   int
		end time.Time
		err error
	}
	rc := make(chan res, 1)
	ready := make(chan struct{})
	go func() {
		runtime.LockOSThread() // never unlocked: a pinned thread dies with the goroutine
		pin(b, 1)
		close(ready)
		n, err := recv(total, &stop)
		rc <- res{n, time.Now(), err}
	}()
	<-ready
	b.ResetTimer()
	start := time.Now()
	sc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: a pinned thread dies with the goroutine
		pin(b, 0)
		sc <- send(total, &stop)
	}()
	serr := <-sc
	sendDur := time.Since(start)
	var r res
	select {
	case r = <-rc:
	case <-time.After(200*time.Millisecond + sendDur/10):
		stop.Store(true)
		r = <-rc
		r.end = start.Add(sendDur) // lost frames: count the rate over the send time
	}
	b.StopTimer()
	if serr != nil {
		b.Fatal("sender:", serr)
	}
	if r.err != nil {
		b.Fatal("receiver:", r.err)
	}
	sec := r.end.Sub(start).Seconds()
	b.ReportMetric(float64(r.n)/sec/1e6, "rx_Mpps")
	b.ReportMetric(float64(r.n)*float64(frameLen)*8/sec/1e9, "rx_Gbit/s")
	b.ReportMetric(float64(total)/sendDur.Seconds()/1e6, "tx_Mpps")
	b.ReportMetric(100*float64(total-r.n)/float64(total), "lost_%")
}

// pin binds the calling (locked) thread to one CPU when XSK_BENCH_PIN is set,
// as the facts sheet's measurements did with taskset (sender CPU 0, receiver
// CPU 1).
func pin(b *testing.B, cpu int) {
	if os.Getenv("XSK_BENCH_PIN") == "" || runtime.NumCPU() < 2 {
		return
	}
	var one unix.CPUSet
	one.Set(cpu)
	if err := unix.SchedSetaffinity(0, &one); err != nil {
		b.Logf("pin to CPU %d: %v", cpu, err)
	}
}

func xskSender(p *XDPPort, frame []byte, batch, total int) error {
	frames := make([][]byte, batch)
	for i := range frames {
		frames[i] = frame
	}
	deadline := time.Now().Add(time.Minute)
	for sent := 0; sent < total; {
		k, err := p.Send(frames[:min(batch, total-sent)])
		if err != nil {
			return err
		}
		sent += k
		if k == 0 && time.Now().After(deadline) {
			return errors.New("sender stuck for a minute")
		}
	}
	// Let the kernel finish the tail.
	for p.Socket.tx.outstanding() > 0 && time.Now().Before(deadline) {
		_ = p.Wait(0)
	}
	return nil
}

func ifindexOf(name string) (int, error) {
	ifi, err := net.InterfaceByName(name)
	if err != nil {
		return 0, err
	}
	return ifi.Index, nil
}

// udpSocket opens a UDP socket in the calling thread's namespace: bound to
// [addr]:port with a 32 MiB receive buffer (receiver), or connected to it.
func udpSocket(addr netip.Addr, port int, receiver bool) (int, error) {
	fd, err := unix.Socket(unix.AF_INET6, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	sa := &unix.SockaddrInet6{Port: port, Addr: addr.As16()}
	if receiver {
		err = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 32<<20)
		if err == nil {
			tv := unix.NsecToTimeval(int64(50 * time.Millisecond))
			err = unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
		}
		if err == nil {
			err = unix.Bind(fd, sa)
		}
	} else {
		err = unix.Connect(fd, sa)
	}
	if err != nil {
		unix.Close(fd)
		return -1, err
	}
	return fd, nil
}

func mmsgSender(fd int, pl []byte, batch, total int) error {
	iov := unix.Iovec{Base: &pl[0]}
	iov.SetLen(len(pl))
	msgs := make([]unix.Mmsghdr, batch)
	for i := range msgs {
		msgs[i].Hdr.Iov = &iov
		msgs[i].Hdr.SetIovlen(1)
	}
	for sent := 0; sent < total; {
		k := min(batch, total-sent)
		r, _, errno := unix.Syscall6(unix.SYS_SENDMMSG, uintptr(fd), uintptr(unsafe.Pointer(&msgs[0])), uintptr(k), 0, 0, 0)
		switch errno {
		case 0:
			sent += int(r)
		case unix.EINTR, unix.ENOBUFS, unix.EAGAIN:
		default:
			return fmt.Errorf("sendmmsg: %w", errno)
		}
	}
	return nil
}

func mmsgReceiver(fd, batch, total int, stop *atomic.Bool) (int, error) {
	bufs := make([][]byte, batch)
	iovs := make([]unix.Iovec, batch)
	msgs := make([]unix.Mmsghdr, batch)
	for i := range msgs {
		bufs[i] = make([]byte, 2048)
		iovs[i].Base = &bufs[i][0]
		iovs[i].SetLen(len(bufs[i]))
		msgs[i].Hdr.Iov = &iovs[i]
		msgs[i].Hdr.SetIovlen(1)
	}
	got := 0
	for got < total && !stop.Load() {
		r, _, errno := unix.Syscall6(unix.SYS_RECVMMSG, uintptr(fd), uintptr(unsafe.Pointer(&msgs[0])), uintptr(batch), unix.MSG_WAITFORONE, 0, 0)
		switch errno {
		case 0:
			got += int(r)
		case unix.EINTR, unix.EAGAIN:
		default:
			return got, fmt.Errorf("recvmmsg: %w", errno)
		}
	}
	return got, nil
}
