package xsk

import (
	"fmt"
	"reflect"
	"time"

	"golang.org/x/sys/unix"
)

// WaitAny is Wait over several ports at once, for a run loop that serves
// every plane port from one goroutine: it returns when any of them has a
// frame to receive, Wake is called on any of them, or timeout passes (a
// negative timeout waits without limit). The ports must all be of one kind:
// all *XDPPort (one poll over their sockets) or all *PipePort.
func WaitAny(timeout time.Duration, ports ...Port) error {
	if len(ports) == 0 {
		return fmt.Errorf("xsk: WaitAny needs at least one port")
	}
	switch ports[0].(type) {
	case *XDPPort:
		socks := make([]*Socket, len(ports))
		for i, p := range ports {
			x, ok := p.(*XDPPort)
			if !ok {
				return fmt.Errorf("xsk: WaitAny: port %q is a %T, not an *XDPPort like %q", p.Name(), p, ports[0].Name())
			}
			socks[i] = x.Socket
		}
		return waitSockets(timeout, socks)
	case *PipePort:
		pipes := make([]*PipePort, len(ports))
		for i, p := range ports {
			x, ok := p.(*PipePort)
			if !ok {
				return fmt.Errorf("xsk: WaitAny: port %q is a %T, not a *PipePort like %q", p.Name(), p, ports[0].Name())
			}
			pipes[i] = x
		}
		return waitPipes(timeout, pipes)
	}
	return fmt.Errorf("xsk: WaitAny: unsupported port type %T", ports[0])
}

func waitSockets(timeout time.Duration, socks []*Socket) error {
	fds := make([]unix.PollFd, 0, 2*len(socks))
	for _, s := range socks {
		if s.closed {
			return ErrClosed
		}
		s.publish()
		s.reclaim()
		s.refill()
		if err := s.kick(); err != nil {
			return err
		}
		if s.rx.avail(1) > 0 {
			return nil
		}
		fds = append(fds, unix.PollFd{Fd: int32(s.fd), Events: unix.POLLIN}, unix.PollFd{Fd: int32(s.efd), Events: unix.POLLIN})
	}
	ms := -1
	if timeout >= 0 {
		ms = int((timeout + time.Millisecond - 1) / time.Millisecond)
	}
	socks[0].c.polls.Add(1)
	for {
		_, err := unix.Poll(fds, ms)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return fmt.Errorf("xsk: poll over %d ports: %w", len(socks), err)
		}
		break
	}
	for i := 1; i < len(fds); i += 2 {
		if fds[i].Revents&unix.POLLIN != 0 {
			var b [8]byte
			_, _ = unix.Read(int(fds[i].Fd), b[:])
		}
	}
	return nil
}

func waitPipes(timeout time.Duration, pipes []*PipePort) error {
	cases := make([]reflect.SelectCase, 0, len(pipes)+1)
	for _, p := range pipes {
		q := p.in
		q.mu.Lock()
		closed, n := q.closed, len(q.frames)
		q.mu.Unlock()
		if closed {
			return ErrClosed
		}
		if n > 0 {
			return nil
		}
		cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(q.ready)})
	}
	if timeout >= 0 {
		t := time.NewTimer(timeout)
		defer t.Stop()
		cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(t.C)})
	}
	reflect.Select(cases)
	return nil
}
