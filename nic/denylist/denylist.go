// Package denylist is mrc-nicd's denylist: the entries an operator (mrcctl
// deny, a file loaded at start) or the mapper puts in, and their resolution
// against the NIC's path template into engine rules (mrc.DenyRule).
//
// An entry names what must not be used, in the terms of the fabric:
//
//	ev 0x10200003               one EV (toward every peer)
//	path P,T1                   every EV of plane P through T1 index T1 (the EV's T1 field)
//	link h0--p0-t0-0            a NIC–T0 link: the whole plane (of this host, or toward that host)
//	link p0-t0-0--p0-t1-1       a T0–T1 link: every path through it, in either direction
//	plane P                     every EV of plane P
//
// Link names are the testbed's (testbed/plan): <host>--p<p>-t0-<k> and
// p<p>-t0-<k>--p<p>-t1-<j>. The template knows which EV crosses which link:
// its uSIDs follow docs/conventions.md, so the switch names are recovered
// from them (pathtmpl.SwitchName).
package denylist

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/softmrc/softmrc/internal/mrc"
	"github.com/softmrc/softmrc/internal/pathtmpl"
	"github.com/softmrc/softmrc/internal/wire"
)

// Kind is what an entry names.
type Kind string

// Entry kinds.
const (
	KindEV    Kind = "ev"
	KindPath  Kind = "path"
	KindLink  Kind = "link"
	KindPlane Kind = "plane"
)

// Entry is one denylist entry. Only the fields of its Kind are set.
type Entry struct {
	Kind  Kind   `json:"kind"`
	EV    uint32 `json:"ev,omitempty"`
	Plane int    `json:"plane,omitempty"`
	T1    int    `json:"t1,omitempty"`
	Link  string `json:"link,omitempty"`
}

// String is the entry in the syntax Parse reads.
func (e Entry) String() string {
	switch e.Kind {
	case KindEV:
		return fmt.Sprintf("ev %#08x", e.EV)
	case KindPath:
		return fmt.Sprintf("path %d,%d", e.Plane, e.T1)
	case KindLink:
		return "link " + e.Link
	case KindPlane:
		return fmt.Sprintf("plane %d", e.Plane)
	}
	return "invalid entry " + string(e.Kind)
}

// ErrSyntax is returned for an entry that does not parse.
var ErrSyntax = errors.New("denylist: bad entry")

// Parse reads one entry from its kind and argument, e.g. ("path", "0,1").
// Numbers are decimal or hex with 0x.
func Parse(kind, arg string) (Entry, error) {
	bad := func(format string, a ...any) (Entry, error) {
		return Entry{}, fmt.Errorf("%w: %s %q: %s", ErrSyntax, kind, arg, fmt.Sprintf(format, a...))
	}
	switch Kind(kind) {
	case KindEV:
		v, err := strconv.ParseUint(arg, 0, 32)
		if err != nil {
			return bad("want an EV number (hex with 0x, e.g. 0x10200003)")
		}
		return Entry{Kind: KindEV, EV: uint32(v)}, nil
	case KindPath:
		p, t, ok := strings.Cut(arg, ",")
		pl, err1 := strconv.ParseUint(strings.TrimSpace(p), 0, 8)
		t1, err2 := strconv.ParseUint(strings.TrimSpace(t), 0, 8)
		if !ok || err1 != nil || err2 != nil {
			return bad("want PLANE,T1 (e.g. 0,1: plane 0 through its T1 index 1)")
		}
		return Entry{Kind: KindPath, Plane: int(pl), T1: int(t1)}, nil
	case KindLink:
		if !strings.Contains(arg, "--") {
			return bad("want a link name as the testbed prints it (e.g. h0--p0-t0-0 or p0-t0-0--p0-t1-1)")
		}
		return Entry{Kind: KindLink, Link: arg}, nil
	case KindPlane:
		pl, err := strconv.ParseUint(arg, 0, 8)
		if err != nil {
			return bad("want a plane number")
		}
		return Entry{Kind: KindPlane, Plane: int(pl)}, nil
	}
	return Entry{}, fmt.Errorf("%w: kind %q: want ev, path, link or plane", ErrSyntax, kind)
}

// ParseLine reads "KIND ARG".
func ParseLine(line string) (Entry, error) {
	f := strings.Fields(line)
	if len(f) != 2 {
		return Entry{}, fmt.Errorf("%w: %q: want KIND ARG (ev EV | path PLANE,T1 | link NAME | plane P)", ErrSyntax, line)
	}
	return Parse(f[0], f[1])
}

// ReadFile reads a denylist file: one entry per line, blank lines and
// everything after # ignored. Errors name the line.
func ReadFile(path string) ([]Entry, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("denylist file: %w", err)
	}
	var out []Entry
	sc := bufio.NewScanner(bytes.NewReader(b))
	for n := 1; sc.Scan(); n++ {
		line, _, _ := strings.Cut(sc.Text(), "#")
		if strings.TrimSpace(line) == "" {
			continue
		}
		e, err := ParseLine(line)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %w", path, n, err)
		}
		out = append(out, e)
	}
	return out, sc.Err()
}

// Fabric resolves entries for one NIC: its planes and, in SRv6 mode, its
// path template (nil in ECMP mode, where only ev and plane entries mean
// something).
type Fabric struct {
	planes int
	t      *pathtmpl.Template
	links  map[string][]mrc.DenyRule
}

// NewFabric prepares the link table of t (nil: no template).
func NewFabric(planes int, t *pathtmpl.Template) *Fabric {
	f := &Fabric{planes: planes, t: t, links: map[string][]mrc.DenyRule{}}
	if t == nil {
		return f
	}
	add := func(name string, r mrc.DenyRule) { f.links[name] = append(f.links[name], r) }
	for _, lp := range t.Local.Planes {
		if lp.Plane >= planes {
			continue
		}
		p := lp.Plane
		myT0 := switchName(lp.T0)
		// This host's NIC–T0 link carries all of the plane.
		add(t.Local.Name+"--"+myT0, mrc.DenyRule{Plane: p, T1: mrc.AnyT1, Peer: mrc.AnyPeer})
		// Its T0's uplinks carry the plane's paths through that T1 to
		// every peer under another T0 (the engine skips T0-local peers).
		for idx, u := range lp.T1 {
			add(myT0+"--"+switchName(u), mrc.DenyRule{Plane: p, T1: idx, Peer: mrc.AnyPeer})
		}
		for pi, peer := range t.Peers {
			for _, pp := range peer.Planes {
				if pp.Plane != p {
					continue
				}
				peerT0 := myT0
				if !peer.T0Local {
					peerT0 = switchName(pp.T0)
				}
				add(peer.Name+"--"+peerT0, mrc.DenyRule{Plane: p, T1: mrc.AnyT1, Peer: pi})
				if peer.T0Local || pp.T0 == lp.T0 {
					continue
				}
				// The peer's T0 downlink from each T1 carries our
				// paths to that peer through the T1.
				for idx, u := range lp.T1 {
					add(peerT0+"--"+switchName(u), mrc.DenyRule{Plane: p, T1: idx, Peer: pi})
				}
			}
		}
	}
	return f
}

// switchName is the testbed's name of the switch a T0 or T1 uSID belongs to
// (pathtmpl.SwitchName inverts the allocation of docs/conventions.md).
func switchName(u wire.USID) string {
	if n, ok := pathtmpl.SwitchName(u); ok {
		return n
	}
	return fmt.Sprintf("usid-%04x", u)
}

// Links lists every link name this NIC's paths cross, sorted.
func (f *Fabric) Links() []string {
	out := make([]string, 0, len(f.links))
	for n := range f.links {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// ErrUnknown is returned for an entry that names something this NIC does
// not have; the message lists what exists.
var ErrUnknown = errors.New("denylist: unknown")

// Resolve turns an entry into engine rules.
func (f *Fabric) Resolve(e Entry) ([]mrc.DenyRule, error) {
	planes := func() string { return fmt.Sprintf("this NIC has planes 0..%d", f.planes-1) }
	switch e.Kind {
	case KindEV:
		ev := wire.EV(e.EV)
		if int(ev.Plane()) >= f.planes {
			return nil, fmt.Errorf("%w EV %v: its plane field is %d, %s", ErrUnknown, ev, ev.Plane(), planes())
		}
		if f.t != nil && int(ev.T1()) >= f.t.T1Count {
			return nil, fmt.Errorf("%w EV %v: its T1 field is %d, the template has T1 indexes 0..%d", ErrUnknown, ev, ev.T1(), f.t.T1Count-1)
		}
		return []mrc.DenyRule{{Exact: true, EV: ev}}, nil
	case KindPlane:
		if e.Plane < 0 || e.Plane >= f.planes {
			return nil, fmt.Errorf("%w plane %d: %s", ErrUnknown, e.Plane, planes())
		}
		return []mrc.DenyRule{{Plane: e.Plane, T1: mrc.AnyT1, Peer: mrc.AnyPeer}}, nil
	case KindPath:
		if f.t == nil {
			return nil, fmt.Errorf("%w path %d,%d: paths exist only in srv6 mode (ECMP switches hash the EV)", ErrUnknown, e.Plane, e.T1)
		}
		if e.Plane < 0 || e.Plane >= f.planes {
			return nil, fmt.Errorf("%w path %d,%d: %s", ErrUnknown, e.Plane, e.T1, planes())
		}
		if e.T1 < 0 || e.T1 >= f.t.T1Count {
			return nil, fmt.Errorf("%w path %d,%d: the template has T1 indexes 0..%d", ErrUnknown, e.Plane, e.T1, f.t.T1Count-1)
		}
		return []mrc.DenyRule{{Plane: e.Plane, T1: e.T1, Peer: mrc.AnyPeer}}, nil
	case KindLink:
		if r, ok := f.links[e.Link]; ok {
			return slices.Clone(r), nil
		}
		if f.t == nil {
			return nil, fmt.Errorf("%w link %s: links are named through the path template, which only srv6 mode has", ErrUnknown, e.Link)
		}
		return nil, fmt.Errorf("%w link %s: this NIC's paths cross %s", ErrUnknown, e.Link, strings.Join(f.Links(), ", "))
	}
	return nil, fmt.Errorf("%w kind %q", ErrSyntax, e.Kind)
}

// List is the daemon's denylist: entries in the order they were added,
// each once. It is not safe for concurrent use (the daemon's loop owns it).
type List struct {
	f       *Fabric
	entries []Entry
}

// NewList returns an empty list resolving through f.
func NewList(f *Fabric) *List { return &List{f: f} }

// Add resolves e and appends it; adding an entry already there changes
// nothing (added false).
func (l *List) Add(e Entry) (added bool, err error) {
	if _, err := l.f.Resolve(e); err != nil {
		return false, err
	}
	if slices.Contains(l.entries, e) {
		return false, nil
	}
	l.entries = append(l.entries, e)
	return true, nil
}

// Remove takes e out; an entry not in the list is an error naming what is.
func (l *List) Remove(e Entry) error {
	i := slices.Index(l.entries, e)
	if i < 0 {
		have := make([]string, len(l.entries))
		for k, x := range l.entries {
			have[k] = x.String()
		}
		if len(have) == 0 {
			return fmt.Errorf("%q is not in the denylist: the denylist is empty", e.String())
		}
		return fmt.Errorf("%q is not in the denylist, which holds: %s", e.String(), strings.Join(have, "; "))
	}
	l.entries = slices.Delete(l.entries, i, i+1)
	return nil
}

// Entries returns a copy of the entries.
func (l *List) Entries() []Entry { return slices.Clone(l.entries) }

// Rules resolves every entry into the engine's rules.
func (l *List) Rules() []mrc.DenyRule {
	var out []mrc.DenyRule
	for _, e := range l.entries {
		r, err := l.f.Resolve(e) // resolved once already in Add
		if err == nil {
			out = append(out, r...)
		}
	}
	return out
}

// Fabric is the list's resolver.
func (l *List) Fabric() *Fabric { return l.f }
