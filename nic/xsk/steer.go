package xsk

import (
	"errors"
	"fmt"
	"net/netip"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
)

// Steering counter indices, as enum nicsteer_counter in bpf/nicsteer.h.
const (
	cntUSID = iota
	cntUDP
	cntPass
	cntNoSocket
	cntMax
)

// SteerCounters are the steering program's counters, summed over CPUs.
type SteerCounters struct {
	USID     uint64 // IPv6-in-IPv6 to a uSID prefix, redirected to the socket
	UDP      uint64 // IPv6/UDP 4791 or 4971 to a local address, redirected
	Pass     uint64 // not for the port: passed to the kernel
	NoSocket uint64 // for the port but no socket on the receive queue: passed
}

// Steer is the NIC-side XDP program on one interface and its maps.
type Steer struct {
	objs    NicSteerObjects
	link    link.Link
	ifindex int
	mode    AttachMode
}

// LoadSteer loads the steering program and its maps without attaching it
// (for BPF_PROG_TEST_RUN and for callers that attach it themselves).
func LoadSteer() (*Steer, error) {
	s := &Steer{}
	if err := LoadNicSteerObjects(&s.objs, nil); err != nil {
		return nil, fmt.Errorf("xsk: load steering program: %w (needs root or CAP_BPF+CAP_NET_ADMIN)", err)
	}
	return s, nil
}

// AttachSteer loads the steering program and attaches it to ifindex (in the
// calling thread's network namespace) through a bpf_link, so it is detached
// when the link is closed or the process dies.
func AttachSteer(ifindex int, mode AttachMode) (*Steer, error) {
	s, err := LoadSteer()
	if err != nil {
		return nil, err
	}
	try := func(flags link.XDPAttachFlags) error {
		l, err := link.AttachXDP(link.XDPOptions{Program: s.objs.Nicsteer, Interface: ifindex, Flags: flags})
		if err == nil {
			s.link = l
		}
		return err
	}
	switch mode {
	case AttachNative:
		err = try(link.XDPDriverMode)
		s.mode = AttachNative
	case AttachGeneric:
		err = try(link.XDPGenericMode)
		s.mode = AttachGeneric
	case AttachAuto:
		s.mode = AttachNative
		if nerr := try(link.XDPDriverMode); nerr != nil {
			s.mode = AttachGeneric
			if gerr := try(link.XDPGenericMode); gerr != nil {
				err = fmt.Errorf("native: %w; generic: %w", nerr, gerr)
			}
		}
	default:
		err = fmt.Errorf("unknown attach mode %v", mode)
	}
	if err != nil {
		s.objs.Close()
		return nil, fmt.Errorf("xsk: attach steering program to ifindex %d (%v): %w "+
			"(another XDP program on the interface? ERANGE on a veth: a program without xdp.frags and a peer MTU above 3506)", ifindex, mode, err)
	}
	s.ifindex = ifindex
	return s, nil
}

// Mode returns the attach mode in effect (native or generic).
func (s *Steer) Mode() AttachMode { return s.mode }

// Program returns the loaded program, e.g. for BPF_PROG_TEST_RUN.
func (s *Steer) Program() *ebpf.Program { return s.objs.Nicsteer }

// AddPrefix steers IPv6-in-IPv6 frames whose outer destination is in p.
func (s *Steer) AddPrefix(p netip.Prefix) error {
	if !p.Addr().Is6() || p.Addr().Is4In6() {
		return fmt.Errorf("xsk: uSID prefix %v: must be IPv6", p)
	}
	key := NicSteerNicsteerLpmKey{Prefixlen: uint32(p.Bits()), Addr: p.Masked().Addr().As16()}
	if err := s.objs.UsidPrefixes.Put(&key, uint32(1)); err != nil {
		return fmt.Errorf("xsk: add uSID prefix %v: %w (at most 64 prefixes)", p, err)
	}
	return nil
}

// AddAddr steers IPv6/UDP 4791 and 4971 frames addressed to a.
func (s *Steer) AddAddr(a netip.Addr) error {
	if !a.Is6() || a.Is4In6() {
		return fmt.Errorf("xsk: address %v: must be IPv6", a)
	}
	key := a.As16()
	if err := s.objs.LocalAddrs.Put(&key, uint32(1)); err != nil {
		return fmt.Errorf("xsk: add address %v: %w (at most 64 addresses)", a, err)
	}
	return nil
}

// Register makes the program redirect the queue's frames into the socket fd.
func (s *Steer) Register(queue, fd int) error {
	if err := s.objs.Xsks.Put(uint32(queue), uint32(fd)); err != nil {
		return fmt.Errorf("xsk: register socket for queue %d: %w (queue must be < 64)", queue, err)
	}
	return nil
}

// Unregister stops redirecting the queue's frames (they are passed instead).
func (s *Steer) Unregister(queue int) error {
	if err := s.objs.Xsks.Delete(uint32(queue)); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
		return fmt.Errorf("xsk: unregister queue %d: %w", queue, err)
	}
	return nil
}

// Counters returns the program's counters summed over CPUs.
func (s *Steer) Counters() (SteerCounters, error) {
	var out [cntMax]uint64
	for i := range uint32(cntMax) {
		var per []uint64
		if err := s.objs.Counters.Lookup(i, &per); err != nil {
			return SteerCounters{}, fmt.Errorf("xsk: read steering counter %d: %w", i, err)
		}
		for _, v := range per {
			out[i] += v
		}
	}
	return SteerCounters{USID: out[cntUSID], UDP: out[cntUDP], Pass: out[cntPass], NoSocket: out[cntNoSocket]}, nil
}

// Close detaches the program (if attached) and frees it and its maps.
func (s *Steer) Close() error {
	var errs []error
	if s.link != nil {
		if err := s.link.Close(); err != nil {
			errs = append(errs, fmt.Errorf("xsk: detach steering program from ifindex %d: %w", s.ifindex, err))
		}
		s.link = nil
	}
	if err := s.objs.Close(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// USIDPrefix returns the prefix a NIC port owns for a 16-bit uSID in a uSID
// block (F3216: a /32 block gives block:uSID::/48).
func USIDPrefix(block netip.Prefix, usid uint16) (netip.Prefix, error) {
	if !block.Addr().Is6() || block.Bits()%16 != 0 || block.Bits() > 112 {
		return netip.Prefix{}, fmt.Errorf("xsk: uSID block %v: must be an IPv6 prefix of a multiple of 16 bits, at most /112", block)
	}
	b := block.Masked().Addr().As16()
	i := block.Bits() / 8
	b[i], b[i+1] = byte(usid>>8), byte(usid)
	return netip.PrefixFrom(netip.AddrFrom16(b), block.Bits()+16), nil
}
