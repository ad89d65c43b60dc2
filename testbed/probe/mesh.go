package probe

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/softmrc/softmrc/internal/wire"
	"github.com/softmrc/softmrc/testbed/plan"
	"github.com/softmrc/softmrc/testbed/topo"
)

// Path is one probe through the fabric and what must arrive.
type Path struct {
	Src, Dst string
	Plane    int
	// T1 is the T1 index the container names; -1 for T0-local peers and in
	// ecmp mode (where the T0 hashes).
	T1 int
	// Links are the plan links the path crosses (ecmp mode: host links only,
	// the fabric part is the hash's choice).
	Links []string
	Frame Frame
	// What the destination port must see.
	WantOuterDst netip.Addr // invalid in ecmp mode
	WantInnerDst netip.Addr
	WantHopLimit uint8
	WantSrcMAC   wire.MAC // the dst T0's downlink
	WantDstMAC   wire.MAC // the dst host port
}

func (p Path) String() string {
	return fmt.Sprintf("%s->%s plane %d T1 %d", p.Src, p.Dst, p.Plane, p.T1)
}

// HopLimit is what probes are sent with.
const HopLimit = 64

// Paths lists a probe for every ordered host pair over every plane and (srv6
// mode, peers under another T0) every T1. Probe IDs are the list index.
func Paths(p *plan.Plan) ([]Path, error) {
	var out []Path
	for i := range p.Hosts {
		src := &p.Hosts[i]
		tpl, err := p.Template(src)
		if err != nil {
			return nil, err
		}
		for j := range p.Hosts {
			dst := &p.Hosts[j]
			if i == j {
				continue
			}
			local := src.T0 == dst.T0
			for pl := 0; pl < p.Planes; pl++ {
				sp, dp := src.Ports[pl], dst.Ports[pl]
				t1s := []int{-1}
				if p.Mode == topo.ModeSRv6 && !local {
					t1s = t1s[:0]
					for t := 0; t < p.T1PerPlane; t++ {
						t1s = append(t1s, t)
					}
				}
				for _, t1 := range t1s {
					hops := 1
					if !local {
						hops = 3
					}
					pa := Path{Src: src.Name, Dst: dst.Name, Plane: pl, T1: t1,
						Links:        []string{sp.Link, dp.Link},
						WantInnerDst: dp.Addr.Addr(), WantHopLimit: HopLimit - uint8(hops),
						WantSrcMAC: dp.GatewayMAC, WantDstMAC: dp.MAC,
					}
					if t1 >= 0 {
						pa.Links = []string{sp.Link, sp.Switch + "--" + fmt.Sprintf("p%d-t1-%d", pl, t1), dp.Switch + "--" + fmt.Sprintf("p%d-t1-%d", pl, t1), dp.Link}
					}
					pa.Frame = Frame{DstMAC: sp.GatewayMAC, SrcMAC: sp.MAC, InnerSrc: sp.Addr.Addr(), InnerDst: dp.Addr.Addr(),
						HopLimit: HopLimit, EV: uint32(wire.MakeEV(wire.Plane(pl), uint8(max(t1, 0)), uint32(len(out)))), ID: uint64(len(out))}
					if p.Mode == topo.ModeSRv6 {
						// The container comes from the same template and EV
						// decoding the NIC uses (internal/pathtmpl).
						idx, ok := tpl.PeerIndex(dst.Name)
						if !ok {
							return nil, fmt.Errorf("template of %s lacks peer %s", src.Name, dst.Name)
						}
						ps, err := tpl.Compile(idx)
						if err != nil {
							return nil, err
						}
						da, ok := ps.Dst(wire.EV(pa.Frame.EV))
						if !ok {
							return nil, fmt.Errorf("template of %s has no plane %d", src.Name, pl)
						}
						pa.Frame.OuterSrc, pa.Frame.OuterDst = sp.Addr.Addr(), da.Netip()
						pa.WantOuterDst = dp.Locator.Addr()
					}
					out = append(out, pa)
				}
			}
		}
	}
	return out, nil
}

// Result is the outcome of one path.
type Result struct {
	Path    Path
	Arrived bool
	Seen    Seen
	// Wrong describes a mismatch (destination, hop limit, MACs, port).
	Wrong string
}

// Prober holds a packet socket on every host port of a plan, so repeated
// meshes do not pay for opening and closing sockets (each costs an RCU grace
// period in the kernel, ~10 ms on a busy machine).
type Prober struct {
	socks map[portKey]*Socket
}

type portKey struct{ host, port string }

// NewProber opens the sockets. Close it.
func NewProber(p *plan.Plan) (*Prober, error) {
	pr := &Prober{socks: map[portKey]*Socket{}}
	for _, h := range p.Hosts {
		for _, hp := range h.Ports {
			s, err := Open(h.NS, hp.Ifname)
			if err != nil {
				pr.Close()
				return nil, err
			}
			pr.socks[portKey{h.Name, hp.Ifname}] = s
		}
	}
	return pr, nil
}

// Close closes every socket (in parallel: each close waits for the kernel).
func (pr *Prober) Close() error {
	var wg sync.WaitGroup
	for _, s := range pr.socks {
		wg.Add(1)
		go func() { defer wg.Done(); s.Close() }()
	}
	wg.Wait()
	return nil
}

// Mesh sends every path's probe from its source port and captures on every
// host port until all arrived or wait has passed since the last send.
func Mesh(p *plan.Plan, paths []Path, wait time.Duration) ([]Result, error) {
	pr, err := NewProber(p)
	if err != nil {
		return nil, err
	}
	defer pr.Close()
	return pr.Mesh(paths, wait)
}

// Mesh sends every path's probe and captures on every host port until all
// arrived or wait has passed since the last send. Not for concurrent use.
func (pr *Prober) Mesh(paths []Path, wait time.Duration) ([]Result, error) {
	type key = portKey
	socks := pr.socks
	// A fresh tag per call, so a late probe of an earlier mesh never counts.
	nonce := rand.Uint64() &^ 0xffffffff
	res := make([]Result, len(paths))
	byID := map[uint64]int{}
	for i, pa := range paths {
		pa.Frame.ID = nonce | uint64(i)
		res[i].Path = pa
		byID[pa.Frame.ID] = i
	}
	// The sender reads its own copy; readers write res under mu.
	toSend := make([]Path, len(res))
	for i := range res {
		toSend[i] = res[i].Path
	}
	var (
		mu     sync.Mutex
		left   = len(paths)
		done   = make(chan struct{})
		stopAt atomic.Int64 // unix ns after the last send; 0 while sending
		wg     sync.WaitGroup
	)
	for k, s := range socks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-done:
					return
				default:
				}
				if sa := stopAt.Load(); sa != 0 && time.Now().UnixNano() > sa {
					return
				}
				// Short slices so the reader notices done and the deadline.
				seen, err := s.Recv(time.Now().Add(20*time.Millisecond), func(Seen) bool { return true })
				if errors.Is(err, ErrTimeout) {
					continue
				}
				if err != nil {
					return
				}
				mu.Lock()
				if i, ok := byID[seen.ID]; ok && !res[i].Arrived {
					r := &res[i]
					r.Arrived, r.Seen = true, seen
					r.Wrong = check(r.Path, seen, k.host, k.port)
					if left--; left == 0 {
						close(done)
					}
				}
				mu.Unlock()
			}
		}()
	}
	var sendErr error
	for _, pa := range toSend {
		s := socks[key{pa.Src, fmt.Sprintf("p%d", pa.Plane)}]
		if err := s.Send(pa.Frame.Build()); err != nil {
			if errors.Is(err, unix.ENETDOWN) {
				// The source port is down (a fault): the probe is lost.
				continue
			}
			sendErr = fmt.Errorf("send %s: %w", pa, err)
			break
		}
	}
	stopAt.Store(time.Now().Add(wait).UnixNano())
	wg.Wait()
	return res, sendErr
}

func check(pa Path, s Seen, host, port string) string {
	var bad []error
	if host != pa.Dst || port != fmt.Sprintf("p%d", pa.Plane) {
		bad = append(bad, fmt.Errorf("arrived on %s:%s", host, port))
	}
	if s.OuterDst != pa.WantOuterDst {
		bad = append(bad, fmt.Errorf("outer DA %v, want %v", s.OuterDst, pa.WantOuterDst))
	}
	if s.InnerDst != pa.WantInnerDst {
		bad = append(bad, fmt.Errorf("inner DA %v, want %v", s.InnerDst, pa.WantInnerDst))
	}
	if s.HopLimit != pa.WantHopLimit {
		bad = append(bad, fmt.Errorf("hop limit %d, want %d", s.HopLimit, pa.WantHopLimit))
	}
	if s.SrcMAC != pa.WantSrcMAC || s.DstMAC != pa.WantDstMAC {
		bad = append(bad, fmt.Errorf("MACs %s->%s, want %s->%s", s.SrcMAC, s.DstMAC, pa.WantSrcMAC, pa.WantDstMAC))
	}
	if err := errors.Join(bad...); err != nil {
		return err.Error()
	}
	return ""
}
