// Package rendezvous is the out-of-band bootstrap of a group of processes
// over the management network, as perftest's TCP exchange is for a pair:
// rank 0 listens on a TCP port, every other rank connects to it, and
// AllGather hands every rank the blob of every other, as often as needed
// (QP connection data first, then barriers and per-rank results). Messages
// are JSON lines; every wait is bounded by the group's timeout.
package rendezvous

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"time"

	"github.com/softmrc/softmrc/internal/hostmap"
)

// DefaultPort is the rendezvous port when the address names none.
const DefaultPort = 18520

const proto = "MRCRDV 1"

// Config says who this process is and where rank 0 is.
type Config struct {
	Rank, Size int
	// Addr is rank 0's address, host or host:port (DefaultPort when
	// absent); a host named in MRC_HOSTS (hostmap) is its address there.
	// Rank 0 listens on that port on every address.
	Addr string
	// Timeout bounds every wait: joining, and each AllGather (default 60 s).
	Timeout time.Duration
	// OnListen, when set, gets rank 0's listening address (tests use port 0).
	OnListen func(addr string)
}

// Group is a joined group.
type Group struct {
	cfg   Config
	peers []*peer // rank 0: index = rank (nil at 0); others: one, rank 0
}

type peer struct {
	c   net.Conn
	r   *bufio.Reader
	enc *json.Encoder
}

type hello struct {
	Proto string `json:"proto"`
	Rank  int    `json:"rank"`
	Size  int    `json:"size"`
}

type gather struct {
	Blob  []byte   `json:"blob,omitempty"`
	Blobs [][]byte `json:"blobs,omitempty"`
	Error string   `json:"error,omitempty"`
}

// HostPort adds DefaultPort to addr when it has no port.
func HostPort(addr string) string {
	if _, _, err := net.SplitHostPort(addr); err == nil {
		return addr
	}
	return net.JoinHostPort(addr, strconv.Itoa(DefaultPort))
}

// Join forms the group: rank 0 waits for the other Size−1 ranks, the
// others connect to rank 0 (retrying until the timeout: rank 0 may start
// last).
func Join(ctx context.Context, cfg Config) (*Group, error) {
	if cfg.Size < 1 || cfg.Rank < 0 || cfg.Rank >= cfg.Size {
		return nil, fmt.Errorf("rendezvous: rank %d of %d: want 0 <= rank < size", cfg.Rank, cfg.Size)
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 60 * time.Second
	}
	g := &Group{cfg: cfg}
	if cfg.Size == 1 {
		return g, nil
	}
	if cfg.Addr == "" {
		return nil, errors.New("rendezvous: no address of rank 0 (give --rendezvous HOST or MRC_RENDEZVOUS)")
	}
	addr, err := hostmap.Resolve(os.Getenv(hostmap.Env), HostPort(cfg.Addr))
	if err != nil {
		return nil, fmt.Errorf("rendezvous: %w", err)
	}
	if cfg.Rank == 0 {
		return g, g.accept(ctx, addr)
	}
	return g, g.connect(ctx, addr)
}

func newPeer(c net.Conn) *peer { return &peer{c: c, r: bufio.NewReader(c), enc: json.NewEncoder(c)} }

func (g *Group) accept(ctx context.Context, addr string) error {
	_, port, _ := net.SplitHostPort(addr)
	ln, err := net.Listen("tcp", net.JoinHostPort("", port))
	if err != nil {
		return fmt.Errorf("rendezvous: rank 0 listens on port %s: %w", port, err)
	}
	defer ln.Close()
	if g.cfg.OnListen != nil {
		g.cfg.OnListen(ln.Addr().String())
	}
	deadline := time.Now().Add(g.cfg.Timeout)
	ln.(*net.TCPListener).SetDeadline(deadline)
	stop := context.AfterFunc(ctx, func() { ln.Close() })
	defer stop()
	g.peers = make([]*peer, g.cfg.Size)
	for joined := 1; joined < g.cfg.Size; {
		c, err := ln.Accept()
		if err != nil {
			g.Close()
			return fmt.Errorf("rendezvous: rank 0 waited for %d of %d ranks: %w (did every rank start, with the same --nranks and this --rendezvous address?)", g.cfg.Size-joined, g.cfg.Size-1, err)
		}
		p := newPeer(c)
		var h hello
		if err := p.recv(deadline, &h); err != nil {
			c.Close()
			continue // not one of ours (a port scan, a stale client)
		}
		if h.Proto != proto || h.Size != g.cfg.Size || h.Rank <= 0 || h.Rank >= g.cfg.Size || g.peers[h.Rank] != nil {
			_ = p.send(deadline, gather{Error: fmt.Sprintf("rank 0 refuses %q rank %d of %d: group of %d, protocol %q", h.Proto, h.Rank, h.Size, g.cfg.Size, proto)})
			c.Close()
			continue
		}
		g.peers[h.Rank] = p
		joined++
	}
	return nil
}

func (g *Group) connect(ctx context.Context, addr string) error {
	deadline := time.Now().Add(g.cfg.Timeout)
	var d net.Dialer
	for {
		c, err := d.DialContext(ctx, "tcp", addr)
		if err == nil {
			p := newPeer(c)
			g.peers = []*peer{p}
			return p.send(deadline, hello{Proto: proto, Rank: g.cfg.Rank, Size: g.cfg.Size})
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("rendezvous: rank %d cannot reach rank 0 at %s: %w (is rank 0 running?)", g.cfg.Rank, addr, err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (p *peer) send(deadline time.Time, v any) error {
	p.c.SetWriteDeadline(deadline)
	return p.enc.Encode(v)
}

func (p *peer) recv(deadline time.Time, v any) error {
	p.c.SetReadDeadline(deadline)
	line, err := p.r.ReadBytes('\n')
	if err != nil {
		return err
	}
	return json.Unmarshal(line, v)
}

// Rank and Size are this process's place in the group.
func (g *Group) Rank() int { return g.cfg.Rank }

// Size is the number of ranks.
func (g *Group) Size() int { return g.cfg.Size }

// AllGather sends blob and returns every rank's, indexed by rank. Every
// rank must call it the same number of times.
func (g *Group) AllGather(ctx context.Context, blob []byte) ([][]byte, error) {
	if g.cfg.Size == 1 {
		return [][]byte{blob}, nil
	}
	deadline := time.Now().Add(g.cfg.Timeout)
	stop := context.AfterFunc(ctx, func() {
		for _, p := range g.peers {
			if p != nil {
				p.c.SetDeadline(time.Now())
			}
		}
	})
	defer stop()
	if g.cfg.Rank != 0 {
		p := g.peers[0]
		if err := p.send(deadline, gather{Blob: blob}); err != nil {
			return nil, fmt.Errorf("rendezvous: rank %d sends to rank 0: %w", g.cfg.Rank, err)
		}
		var m gather
		if err := p.recv(deadline, &m); err != nil {
			return nil, fmt.Errorf("rendezvous: rank %d waits for rank 0: %w (did a rank fail or exit?)", g.cfg.Rank, err)
		}
		if m.Error != "" {
			return nil, fmt.Errorf("rendezvous: rank 0: %s", m.Error)
		}
		if len(m.Blobs) != g.cfg.Size {
			return nil, fmt.Errorf("rendezvous: rank 0 sent %d blobs for %d ranks", len(m.Blobs), g.cfg.Size)
		}
		return m.Blobs, nil
	}
	all := make([][]byte, g.cfg.Size)
	all[0] = blob
	for r := 1; r < g.cfg.Size; r++ {
		var m gather
		if err := g.peers[r].recv(deadline, &m); err != nil {
			err = fmt.Errorf("rendezvous: rank 0 waits for rank %d: %w (did it fail or exit?)", r, err)
			g.broadcast(deadline, gather{Error: err.Error()})
			return nil, err
		}
		all[r] = m.Blob
	}
	if err := g.broadcast(deadline, gather{Blobs: all}); err != nil {
		return nil, err
	}
	return all, nil
}

func (g *Group) broadcast(deadline time.Time, m gather) error {
	var first error
	for r := 1; r < g.cfg.Size; r++ {
		if err := g.peers[r].send(deadline, m); err != nil && first == nil {
			first = fmt.Errorf("rendezvous: rank 0 sends to rank %d: %w", r, err)
		}
	}
	return first
}

// Barrier returns once every rank called it.
func (g *Group) Barrier(ctx context.Context) error {
	_, err := g.AllGather(ctx, nil)
	return err
}

// Close ends the group's connections.
func (g *Group) Close() error {
	for _, p := range g.peers {
		if p != nil {
			p.c.Close()
		}
	}
	return nil
}
