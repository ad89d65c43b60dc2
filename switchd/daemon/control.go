package daemon

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"github.com/softmrc/softmrc/switchd/ctl"
	"github.com/softmrc/softmrc/switchd/dataplane"
)

// listenControl opens the unix control socket at path. A socket file left by
// a killed daemon is replaced; one that still answers means another daemon
// runs this switch, which is an error.
func listenControl(path string) (net.Listener, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("control socket directory: %w", err)
	}
	if _, err := os.Lstat(path); err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		c, err := ctl.Dial(ctx, path)
		cancel()
		if err == nil {
			c.Close()
			return nil, fmt.Errorf("control socket %s answers: another mrc-switchd runs this switch (stop it, or use another control_socket)", path)
		}
		if err := os.Remove(path); err != nil {
			return nil, fmt.Errorf("remove stale control socket %s: %w", path, err)
		}
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("listen on control socket %s: %w", path, err)
	}
	// Only root talks to the switch.
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return nil, fmt.Errorf("chmod control socket %s: %w", path, err)
	}
	return ln, nil
}

type controlServer struct {
	d  *Daemon
	ln net.Listener

	mu     sync.Mutex
	conns  map[net.Conn]bool
	closed bool
	wg     sync.WaitGroup
}

func newControlServer(d *Daemon, ln net.Listener) *controlServer {
	return &controlServer{d: d, ln: ln, conns: map[net.Conn]bool{}}
}

func (s *controlServer) serve() {
	for {
		c, err := s.ln.Accept()
		if err != nil {
			return
		}
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			c.Close()
			return
		}
		s.conns[c] = true
		s.wg.Add(1)
		s.mu.Unlock()
		go s.handle(c)
	}
}

// close stops accepting, closes every connection and removes the socket
// file (only if it is still ours).
func (s *controlServer) close() {
	s.mu.Lock()
	s.closed = true
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	// The unix listener unlinks its socket file on Close.
	s.ln.Close()
	s.wg.Wait()
}

func (s *controlServer) handle(c net.Conn) {
	defer func() {
		s.mu.Lock()
		delete(s.conns, c)
		s.mu.Unlock()
		c.Close()
		s.wg.Done()
	}()
	r := bufio.NewReader(c)
	for {
		line, err := ctl.ReadLine(r)
		if err != nil {
			return
		}
		req, resp := s.d.handleLine(line)
		if req.Cmd == ctl.CmdWatch {
			s.watch(c, r, req) // the connection is a telemetry stream from now on
			return
		}
		b, _ := json.Marshal(resp)
		c.SetWriteDeadline(time.Now().Add(5 * time.Second))
		_, werr := c.Write(append(b, '\n'))
		if req.Cmd == ctl.CmdDetach && resp.OK {
			s.d.finishDetach()
			return
		}
		if werr != nil {
			return
		}
	}
}

// handleLine decodes and executes one request line.
func (d *Daemon) handleLine(line []byte) (ctl.Request, ctl.Response) {
	var req ctl.Request
	if err := json.Unmarshal(line, &req); err != nil {
		return req, ctl.Response{Error: fmt.Sprintf("bad request (want one JSON object per line, e.g. {\"cmd\":\"stats\"}): %v", err)}
	}
	return req, d.do(req)
}

// do executes one request.
func (d *Daemon) do(req ctl.Request) ctl.Response {
	fail := func(err error) ctl.Response { return ctl.Response{Error: err.Error()} }
	switch req.Cmd {
	case ctl.CmdReady:
		d.mu.Lock()
		defer d.mu.Unlock()
		return ctl.Response{OK: true, Ready: &ctl.Ready{Switch: d.cfg.Name, Ready: d.ready, Adopted: d.adopted, PID: os.Getpid(), Metrics: d.metricsAddr}}
	case ctl.CmdStats:
		st, err := d.stats()
		if err != nil {
			return fail(err)
		}
		return ctl.Response{OK: true, Stats: st}
	case ctl.CmdRoutes:
		rs, err := d.routes()
		if err != nil {
			return fail(err)
		}
		return ctl.Response{OK: true, Routes: rs}
	case ctl.CmdFault:
		if req.Fault == nil {
			return fail(errors.New("fault request without a fault: want {\"cmd\":\"fault\",\"fault\":{\"target\":PORT|\"switch\",\"action\":...}}"))
		}
		if err := d.setFault(*req.Fault); err != nil {
			return fail(err)
		}
		return ctl.Response{OK: true}
	case ctl.CmdWatch:
		return ctl.Response{OK: true} // answered by the connection's handler (telemetry.go)
	case ctl.CmdDetach:
		if err := d.detach(); err != nil {
			return fail(err)
		}
		return ctl.Response{OK: true}
	}
	return fail(fmt.Errorf("unknown command %q: want %s, %s, %s, %s, %s or %s", req.Cmd, ctl.CmdReady, ctl.CmdStats, ctl.CmdRoutes, ctl.CmdFault, ctl.CmdWatch, ctl.CmdDetach))
}

func ctlCounters(c dataplane.PortCounters) ctl.Counters {
	return ctl.Counters{
		RxPackets: c.RxPackets, RxBytes: c.RxBytes,
		TxPackets: c.TxPackets, TxBytes: c.TxBytes,
		Forwarded: c.Forwarded, Pass: c.Pass,
		ECNMarked: c.ECNMarked, Trimmed: c.Trimmed,
		Drops: ctl.Drops{
			NoRoute: c.DropNoRoute, HopLimit: c.DropHopLimit, Fault: c.DropFault,
			Buffer: c.DropBuffer, Malformed: c.DropMalformed, EndOfContainer: c.DropEndOfContainer,
		},
	}
}

func (d *Daemon) stats() (*ctl.Stats, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.plane == nil {
		return nil, errors.New("not ready: the data plane is not loaded yet")
	}
	hang, err := d.plane.Hang()
	if err != nil {
		return nil, fmt.Errorf("hang state: %w", err)
	}
	st := &ctl.Stats{Switch: d.cfg.Name, Mode: string(d.cfg.Mode), Hang: hang, Adopted: d.adopted, Started: d.started,
		TelemetryDropped: d.teleDropped.Load()}
	for i, p := range d.cfg.Ports {
		c, err := d.plane.Counters(dataplane.PortID(i))
		if err != nil {
			return nil, fmt.Errorf("counters of %s: %w", p.Name, err)
		}
		f, err := d.plane.Fault(dataplane.PortID(i))
		if err != nil {
			return nil, fmt.Errorf("fault of %s: %w", p.Name, err)
		}
		ps := ctl.PortStats{
			Name: p.Name, Interface: p.Interface, Index: i, Role: string(p.Role),
			Fault: ctlFault(f), Counters: ctlCounters(c),
		}
		if l, err := d.links.Lookup(p.Interface); err == nil {
			ps.Attach = l.XDP
		}
		st.Ports = append(st.Ports, ps)
	}
	c, err := d.plane.Counters(dataplane.UnmappedPort)
	if err != nil {
		return nil, fmt.Errorf("counters of unmapped interfaces: %w", err)
	}
	st.Unmapped = ctlCounters(c)
	return st, nil
}

func (d *Daemon) routes() ([]ctl.Route, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.plane == nil {
		return nil, errors.New("not ready: the data plane is not loaded yet")
	}
	rs, err := d.plane.Routes()
	if err != nil {
		return nil, fmt.Errorf("read FIB: %w", err)
	}
	sort.Slice(rs, func(i, j int) bool {
		if c := rs[i].Prefix.Addr().Compare(rs[j].Prefix.Addr()); c != 0 {
			return c < 0
		}
		return rs[i].Prefix.Bits() < rs[j].Prefix.Bits()
	})
	portName := func(id dataplane.PortID) string {
		if int(id) < len(d.cfg.Ports) {
			return d.cfg.Ports[id].Name
		}
		return fmt.Sprintf("#%d", id)
	}
	out := make([]ctl.Route, 0, len(rs))
	for _, r := range rs {
		cr := ctl.Route{Prefix: r.Prefix.String()}
		if r.NextHop.Group {
			if int(r.NextHop.GroupID) < len(d.cfg.ECMPGroups) {
				g := d.cfg.ECMPGroups[r.NextHop.GroupID]
				cr.Group = g.Name
				cr.Ports = append([]string(nil), g.Ports...)
			} else {
				cr.Group = fmt.Sprintf("#%d", r.NextHop.GroupID)
			}
		} else {
			cr.Port = portName(r.NextHop.Port)
		}
		out = append(out, cr)
	}
	return out, nil
}
