// Package pathtmpl turns an EV into an SRv6 outer destination address (a uSID
// container) through a per-node template file, as the MRC white paper
// describes: the EV's plane field picks the plane (copied into every uSID),
// its T1 field picks the T1 (the source T0's uplink), and the destination row
// of the template supplies the destination T0 and its downlink to the NIC.
//
// The YAML file is the source of truth for the format (docs/template.md);
// the testbed writes it, the NIC daemon and the fabric simulator read it.
// Lookups after Compile are allocation-free.
package pathtmpl

import (
	"bytes"
	"errors"
	"fmt"
	"net/netip"
	"os"

	"github.com/softmrc/softmrc/internal/wire"
	"gopkg.in/yaml.v3"
)

// Version is the template format version this package reads and writes.
const Version = 1

// Template is one node's path template. Field names are the YAML keys.
type Template struct {
	Version int `yaml:"version"`
	// Block is the uSID locator block, e.g. "5f00:1::".
	Block string `yaml:"block"`
	// BlockBits is the block length: 16, 32 (default, F3216) or 48.
	BlockBits int `yaml:"block_bits"`
	// Planes is the number of planes (1..16); T1Count the T1s per plane.
	Planes  int `yaml:"planes"`
	T1Count int `yaml:"t1_count"`
	// Local describes this node.
	Local Local `yaml:"local"`
	// Peers are the destination rows, one per peer host.
	Peers []Peer `yaml:"peers"`

	fmt   wire.USIDFormat
	block wire.Addr128
}

// Local is this node's side of every path: per plane its T0 and the T1s that
// T0 reaches (the T1 uSIDs in uplink order).
type Local struct {
	Name   string       `yaml:"name"`
	Planes []LocalPlane `yaml:"planes"`
}

// LocalPlane is this node's attachment to one plane.
type LocalPlane struct {
	Plane int         `yaml:"plane"`
	Addr  string      `yaml:"addr"` // this NIC port's inner IPv6 address
	T0    wire.USID   `yaml:"t0"`   // uSID of the local T0 in this plane
	T1    []wire.USID `yaml:"t1"`   // uSIDs of the T1s, index = EV T1 field mod T1Count
}

// Peer is one destination host.
type Peer struct {
	Name string `yaml:"name"`
	// T0Local: the peer hangs off the same T0s as this node, so paths are
	// [T0, downlink] and the EV's T1 field is not used.
	T0Local bool        `yaml:"t0_local"`
	Planes  []PeerPlane `yaml:"planes"`
}

// PeerPlane is a peer's attachment to one plane.
type PeerPlane struct {
	Plane    int       `yaml:"plane"`
	Addr     string    `yaml:"addr"`     // the peer port's inner IPv6 address
	T0       wire.USID `yaml:"t0"`       // the peer's T0 uSID in this plane
	Downlink wire.USID `yaml:"downlink"` // uSID of the peer's downlink on that T0
}

// Errors.
var (
	ErrInvalid = errors.New("pathtmpl: invalid template")
	ErrPlane   = errors.New("pathtmpl: EV plane not in the template")
	ErrPeer    = errors.New("pathtmpl: no such peer")
)

func invalid(format string, a ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalid}, a...)...)
}

// Load reads and validates a template file.
func Load(path string) (*Template, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("pathtmpl: read template: %w", err)
	}
	t, err := Parse(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return t, nil
}

// Parse decodes YAML and validates it. Unknown keys are an error so that a
// typo does not silently fall back to a default.
func Parse(b []byte) (*Template, error) {
	var t Template
	dec := yaml.NewDecoder(bytesReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&t); err != nil {
		return nil, fmt.Errorf("%w: yaml: %v", ErrInvalid, err)
	}
	if err := t.Validate(); err != nil {
		return nil, err
	}
	return &t, nil
}

// Marshal encodes the template as YAML (the testbed writes files with it).
func (t *Template) Marshal() ([]byte, error) { return yaml.Marshal(t) }

// Validate checks the template and prepares it for lookups. Callers that
// build a Template in Go must call it before Compile.
func (t *Template) Validate() error {
	if t.Version == 0 {
		t.Version = Version
	}
	if t.Version != Version {
		return invalid("version %d, this build reads version %d", t.Version, Version)
	}
	if t.BlockBits == 0 {
		t.BlockBits = 32
	}
	t.fmt = wire.USIDFormat{BlockBits: t.BlockBits}
	if err := t.fmt.Validate(); err != nil {
		return invalid("%v", err)
	}
	if t.fmt.Slots() < 4 {
		return invalid("a %d-bit block leaves %d uSID slots, a cross-T1 path needs 4", t.BlockBits, t.fmt.Slots())
	}
	blk, err := netip.ParseAddr(t.Block)
	if err != nil || !blk.Is6() || blk.Is4In6() {
		return invalid("block %q is not an IPv6 address (e.g. \"5f00:1::\")", t.Block)
	}
	t.block = wire.Addr128FromNetip(blk)
	if t.fmt.Block(t.block) != t.block {
		return invalid("block %s has bits set beyond its %d-bit length", t.Block, t.BlockBits)
	}
	if t.Planes < 1 || t.Planes > wire.MaxPlanes {
		return invalid("planes = %d, want 1..%d", t.Planes, wire.MaxPlanes)
	}
	if t.T1Count < 1 || t.T1Count > 256 {
		return invalid("t1_count = %d, want 1..256", t.T1Count)
	}
	if err := checkPlanes(len(t.Local.Planes), t.Planes, func(i int) int { return t.Local.Planes[i].Plane }); err != nil {
		return invalid("local: %v", err)
	}
	for _, lp := range t.Local.Planes {
		if _, err := parseAddr(lp.Addr); err != nil {
			return invalid("local plane %d: %v", lp.Plane, err)
		}
		if lp.T0 == 0 {
			return invalid("local plane %d: t0 uSID missing", lp.Plane)
		}
		if len(lp.T1) != t.T1Count {
			return invalid("local plane %d lists %d T1 uSIDs, t1_count is %d", lp.Plane, len(lp.T1), t.T1Count)
		}
		for j, u := range lp.T1 {
			if u == 0 {
				return invalid("local plane %d: T1 %d uSID is 0", lp.Plane, j)
			}
		}
	}
	names := map[string]bool{}
	for i, p := range t.Peers {
		if p.Name == "" {
			return invalid("peer %d has no name", i)
		}
		if names[p.Name] {
			return invalid("peer %q listed twice", p.Name)
		}
		names[p.Name] = true
		if err := checkPlanes(len(p.Planes), t.Planes, func(k int) int { return p.Planes[k].Plane }); err != nil {
			return invalid("peer %q: %v", p.Name, err)
		}
		for _, pp := range p.Planes {
			if _, err := parseAddr(pp.Addr); err != nil {
				return invalid("peer %q plane %d: %v", p.Name, pp.Plane, err)
			}
			if pp.Downlink == 0 || (!p.T0Local && pp.T0 == 0) {
				return invalid("peer %q plane %d: t0 and downlink uSIDs are required", p.Name, pp.Plane)
			}
		}
	}
	return nil
}

// checkPlanes requires exactly the planes 0..want-1, each once.
func checkPlanes(n, want int, plane func(int) int) error {
	if n != want {
		return fmt.Errorf("%d plane entries, want %d", n, want)
	}
	var seen [wire.MaxPlanes]bool
	for i := 0; i < n; i++ {
		p := plane(i)
		if p < 0 || p >= want || seen[p] {
			return fmt.Errorf("plane %d out of range or repeated", p)
		}
		seen[p] = true
	}
	return nil
}

func parseAddr(s string) (wire.Addr128, error) {
	a, err := netip.ParseAddr(s)
	if err != nil || !a.Is6() || a.Is4In6() {
		return wire.Addr128{}, fmt.Errorf("address %q is not IPv6", s)
	}
	return wire.Addr128FromNetip(a), nil
}

// Format is the uSID container format in use.
func (t *Template) Format() wire.USIDFormat { return t.fmt }

// BlockAddr is the locator block.
func (t *Template) BlockAddr() wire.Addr128 { return t.block }

// LocalAddrs returns this node's inner address per plane.
func (t *Template) LocalAddrs() (a [wire.MaxPlanes]wire.Addr128) {
	for _, lp := range t.Local.Planes {
		a[lp.Plane], _ = parseAddr(lp.Addr)
	}
	return a
}

// PeerAddrs returns a peer's inner address per plane.
func (t *Template) PeerAddrs(peer int) (a [wire.MaxPlanes]wire.Addr128, err error) {
	if peer < 0 || peer >= len(t.Peers) {
		return a, ErrPeer
	}
	for _, pp := range t.Peers[peer].Planes {
		a[pp.Plane], _ = parseAddr(pp.Addr)
	}
	return a, nil
}

// PeerIndex finds a peer by name.
func (t *Template) PeerIndex(name string) (int, bool) {
	for i := range t.Peers {
		if t.Peers[i].Name == name {
			return i, true
		}
	}
	return -1, false
}

// PeerByAddr finds the peer that owns inner address a on any plane.
func (t *Template) PeerByAddr(a wire.Addr128) (int, bool) {
	for i := range t.Peers {
		for _, pp := range t.Peers[i].Planes {
			if x, err := parseAddr(pp.Addr); err == nil && x == a {
				return i, true
			}
		}
	}
	return -1, false
}

// Paths is the compiled set of outer destinations toward one peer: one
// container per (plane, T1), so that a lookup per packet is an index.
type Paths struct {
	planes, nT1 int
	t0Local     bool
	dst         []wire.Addr128 // [plane*nT1 + t1]
	usids       [][4]wire.USID // same index, for inspection
}

// Compile prepares the paths toward peer (index into Peers).
func (t *Template) Compile(peer int) (*Paths, error) {
	if peer < 0 || peer >= len(t.Peers) {
		return nil, fmt.Errorf("%w: index %d of %d", ErrPeer, peer, len(t.Peers))
	}
	if t.fmt.BlockBits == 0 {
		if err := t.Validate(); err != nil {
			return nil, err
		}
	}
	p := &t.Peers[peer]
	ps := &Paths{planes: t.Planes, nT1: t.T1Count, t0Local: p.T0Local,
		dst: make([]wire.Addr128, t.Planes*t.T1Count), usids: make([][4]wire.USID, t.Planes*t.T1Count)}
	for _, lp := range t.Local.Planes {
		var pp *PeerPlane
		for k := range p.Planes {
			if p.Planes[k].Plane == lp.Plane {
				pp = &p.Planes[k]
			}
		}
		for j := 0; j < t.T1Count; j++ {
			var u [4]wire.USID
			var c wire.Addr128
			var err error
			if p.T0Local {
				u = [4]wire.USID{lp.T0, pp.Downlink}
				c, err = t.fmt.Build(t.block, u[0], u[1])
			} else {
				u = [4]wire.USID{lp.T0, lp.T1[j], pp.T0, pp.Downlink}
				c, err = t.fmt.Build(t.block, u[:]...)
			}
			if err != nil {
				return nil, invalid("peer %q plane %d: %v", p.Name, lp.Plane, err)
			}
			ps.dst[lp.Plane*t.T1Count+j] = c
			ps.usids[lp.Plane*t.T1Count+j] = u
		}
	}
	return ps, nil
}

// Dst is the outer destination for a packet with EV ev: plane ev.Plane(),
// T1 number ev.T1() mod T1Count. ok is false when the plane is not in the
// template. It does not allocate.
func (ps *Paths) Dst(ev wire.EV) (wire.Addr128, bool) {
	p := int(ev.Plane())
	if p >= ps.planes {
		return wire.Addr128{}, false
	}
	return ps.dst[p*ps.nT1+int(ev.T1())%ps.nT1], true
}

// USIDs lists the uSIDs of ev's path (2 for T0-local, 4 for cross-T1).
func (ps *Paths) USIDs(ev wire.EV) []wire.USID {
	p := int(ev.Plane())
	if p >= ps.planes {
		return nil
	}
	u := ps.usids[p*ps.nT1+int(ev.T1())%ps.nT1]
	if ps.t0Local {
		return u[:2:2]
	}
	return u[:4:4]
}

// T0Local reports whether the peer is under the same T0s.
func (ps *Paths) T0Local() bool { return ps.t0Local }

// T1Count is the number of T1s per plane.
func (ps *Paths) T1Count() int { return ps.nT1 }

func bytesReader(b []byte) *bytes.Reader { return bytes.NewReader(b) }
