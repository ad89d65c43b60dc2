package dataplane

import (
	"errors"
	"fmt"
	"github.com/softmrc/softmrc/internal/flowhash"
	"math"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"
)

// Constants mirrored from bpf/consts.h.
const (
	nhPort   = 0
	nhGroup  = 1
	sidUN    = 1
	linkPfx  = "link_"
	passPfx  = "pass_"
	mapsDir  = "maps"
	linksDir = "links"
)

// Dataplane is a loaded switch program with its maps and links. Its methods
// are safe for concurrent use.
type Dataplane struct {
	objs   SwitchObjects
	pinDir string

	mu    sync.Mutex
	links map[string]link.Link // pin name (link_N / pass_N) -> link
	stale []Attachment         // pinned links dropped at adoption: device gone
}

// Load creates the maps and programs. With opts.PinDir set, maps already
// pinned there are reused (their contents, counters and queue state survive)
// and the rest are created and pinned; links pinned there are adopted and
// switched to the new program atomically.
func Load(opts LoadOptions) (*Dataplane, error) {
	spec, err := LoadSwitch()
	if err != nil {
		return nil, fmt.Errorf("dataplane: parse embedded BPF object: %w", err)
	}
	return loadSpec(spec, opts)
}

// loadSpec is Load for a given switch object; the benchmarks load an older
// build of bpf/switch.bpf.c through it to compare the two in the same run.
func loadSpec(spec *ebpf.CollectionSpec, opts LoadOptions) (*Dataplane, error) {
	d := &Dataplane{pinDir: opts.PinDir, links: map[string]link.Link{}}
	copts := &ebpf.CollectionOptions{MapReplacements: map[string]*ebpf.Map{}}
	if d.pinDir != "" {
		if err := os.MkdirAll(filepath.Join(d.pinDir, mapsDir), 0o700); err != nil {
			return nil, fmt.Errorf("dataplane: create pin dir (is %s on a bpffs mount?): %w", d.pinDir, err)
		}
		if err := os.MkdirAll(filepath.Join(d.pinDir, linksDir), 0o700); err != nil {
			return nil, fmt.Errorf("dataplane: create pin dir: %w", err)
		}
		for name := range spec.Maps {
			p := filepath.Join(d.pinDir, mapsDir, name)
			m, err := ebpf.LoadPinnedMap(p, nil)
			if errors.Is(err, os.ErrNotExist) {
				continue
			}
			if err != nil {
				closeMaps(copts.MapReplacements)
				return nil, fmt.Errorf("dataplane: open pinned map %s: %w", p, err)
			}
			copts.MapReplacements[name] = m
		}
	}
	err := spec.LoadAndAssign(&d.objs, copts)
	// LoadAndAssign holds its own references to replacements.
	closeMaps(copts.MapReplacements)
	if err != nil {
		var ve *ebpf.VerifierError
		if errors.As(err, &ve) {
			return nil, fmt.Errorf("dataplane: verifier rejected the switch program: %+v", ve)
		}
		return nil, fmt.Errorf("dataplane: load switch program (pinned maps from an incompatible version? run Destroy or remove %s): %w", d.pinDir, err)
	}
	if d.pinDir != "" {
		if err := d.pinMaps(); err != nil {
			d.objs.Close()
			return nil, err
		}
		if err := d.adoptLinks(); err != nil {
			d.Close()
			return nil, err
		}
	}
	return d, nil
}

// Adopt re-opens a switch pinned under pinDir by a previous process (maps and
// links) and atomically swaps the freshly loaded program into every pinned
// link, so forwarding continues without a gap. It fails if nothing is pinned
// there.
func Adopt(pinDir string) (*Dataplane, error) {
	if pinDir == "" {
		return nil, errors.New("dataplane: Adopt needs the pin directory used by the previous Load")
	}
	if _, err := os.Stat(filepath.Join(pinDir, mapsDir, SwitchMapFib)); err != nil {
		return nil, fmt.Errorf("dataplane: nothing to adopt in %s: %w", pinDir, err)
	}
	return Load(LoadOptions{PinDir: pinDir})
}

func closeMaps(ms map[string]*ebpf.Map) {
	for _, m := range ms {
		m.Close()
	}
}

func (d *Dataplane) mapsByName() map[string]*ebpf.Map {
	m := d.objs.SwitchMaps
	return map[string]*ebpf.Map{
		SwitchMapConfig: m.Config, SwitchMapCounters: m.Counters, SwitchMapEcmpGroups: m.EcmpGroups,
		SwitchMapFaults: m.Faults, SwitchMapFib: m.Fib, SwitchMapIfindexPort: m.IfindexPort,
		SwitchMapLocalAddrs: m.LocalAddrs, SwitchMapOwnSids: m.OwnSids, SwitchMapPorts: m.Ports,
		SwitchMapTxPorts: m.TxPorts, SwitchMapVqs: m.Vqs,
	}
}

func (d *Dataplane) pinMaps() error {
	for name, m := range d.mapsByName() {
		p := filepath.Join(d.pinDir, mapsDir, name)
		if _, err := os.Stat(p); err == nil {
			continue // reused from this pin (MapReplacements)
		}
		if err := m.Pin(p); err != nil {
			return fmt.Errorf("dataplane: pin map %s: %w", p, err)
		}
	}
	return nil
}

// adoptLinks opens every pinned link and points it at the new program. A
// pinned link whose device is gone (its namespace or veth was deleted; the
// kernel keeps such a link, detached, for as long as it is pinned) cannot run
// a program any more: it is unpinned and recorded in d.stale instead of
// failing the whole adoption, so the live ports keep forwarding and the
// counters survive.
func (d *Dataplane) adoptLinks() error {
	dir := filepath.Join(d.pinDir, linksDir)
	ents, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("dataplane: read %s: %w", dir, err)
	}
	for _, e := range ents {
		name := e.Name()
		prog := d.objs.XdpSwitch
		switch {
		case strings.HasPrefix(name, linkPfx):
		case strings.HasPrefix(name, passPfx):
			prog = d.objs.XdpPass
		default:
			continue
		}
		p := filepath.Join(dir, name)
		l, err := link.LoadPinnedLink(p, nil)
		if err != nil {
			return fmt.Errorf("dataplane: open pinned link %s: %w", p, err)
		}
		if linkDefunct(l) {
			d.dropStale(name, l)
			continue
		}
		if err := l.Update(prog); err != nil {
			if errors.Is(err, unix.ENOLINK) {
				// The device went away between the check and the update.
				d.dropStale(name, l)
				continue
			}
			l.Close()
			return fmt.Errorf("dataplane: replace program of pinned link %s: %w", p, err)
		}
		d.links[name] = l
	}
	sort.Slice(d.stale, func(i, j int) bool { return d.stale[i].Ifindex < d.stale[j].Ifindex })
	return nil
}

// linkDefunct reports whether an XDP link has lost its device: the kernel
// then reports ifindex 0 for it.
func linkDefunct(l link.Link) bool {
	info, err := l.Info()
	if err != nil {
		return false // let Update decide
	}
	xi := info.XDP()
	return xi != nil && xi.Ifindex == 0
}

// dropStale unpins and closes a pinned link whose device is gone.
func (d *Dataplane) dropStale(name string, l link.Link) {
	a, ok := parseLinkName(name)
	l.Unpin()
	l.Close()
	if ok {
		d.stale = append(d.stale, a)
	}
}

// parseLinkName turns a pin name (link_N / pass_N) into an Attachment.
func parseLinkName(name string) (Attachment, bool) {
	kind := LinkSwitch
	s, ok := strings.CutPrefix(name, linkPfx)
	if !ok {
		if s, ok = strings.CutPrefix(name, passPfx); !ok {
			return Attachment{}, false
		}
		kind = LinkPass
	}
	i, err := strconv.Atoi(s)
	if err != nil {
		return Attachment{}, false
	}
	return Attachment{Ifindex: i, Kind: kind}, true
}

// StaleLinks lists the pinned links that Load/Adopt found without a device
// and removed (their interface was deleted while no daemon ran). The caller
// logs them; an interface that exists again under a new ifindex needs a new
// Attach.
func (d *Dataplane) StaleLinks() []Attachment {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]Attachment(nil), d.stale...)
}

// SwitchProgram is the loaded switch program (for BPF_PROG_RUN tests and
// benchmarks).
func (d *Dataplane) SwitchProgram() *ebpf.Program { return d.objs.XdpSwitch }

// PassProgram is the loaded XDP_PASS program.
func (d *Dataplane) PassProgram() *ebpf.Program { return d.objs.XdpPass }

// Attach attaches the switch program to ifindex with a bpf_link (pinned when
// the Dataplane has a pin directory). Replaces an existing link of ours.
func (d *Dataplane) Attach(ifindex int, mode AttachMode) error {
	return d.attach(linkPfx, d.objs.XdpSwitch, ifindex, mode)
}

// AttachPass attaches the XDP_PASS program to ifindex. Needed on the far end
// of every veth the switch redirects into: veth silently drops redirected
// frames when its peer has no XDP program (docs/switch.md).
func (d *Dataplane) AttachPass(ifindex int) error {
	return d.attach(passPfx, d.objs.XdpPass, ifindex, AttachNativeOrGeneric)
}

func (d *Dataplane) attach(pfx string, prog *ebpf.Program, ifindex int, mode AttachMode) error {
	if ifindex <= 0 {
		return fmt.Errorf("dataplane: attach: invalid ifindex %d", ifindex)
	}
	name := pfx + strconv.Itoa(ifindex)
	d.mu.Lock()
	defer d.mu.Unlock()
	if l, ok := d.links[name]; ok {
		// Already ours: swapping the program keeps the link (no gap).
		return l.Update(prog)
	}
	var l link.Link
	var err error
	switch mode {
	case AttachNative:
		l, err = link.AttachXDP(link.XDPOptions{Program: prog, Interface: ifindex, Flags: link.XDPDriverMode})
	case AttachGeneric:
		l, err = link.AttachXDP(link.XDPOptions{Program: prog, Interface: ifindex, Flags: link.XDPGenericMode})
	default:
		l, err = link.AttachXDP(link.XDPOptions{Program: prog, Interface: ifindex, Flags: link.XDPDriverMode})
		if err != nil {
			var gerr error
			l, gerr = link.AttachXDP(link.XDPOptions{Program: prog, Interface: ifindex, Flags: link.XDPGenericMode})
			if gerr != nil {
				err = fmt.Errorf("native: %w; generic: %w", err, gerr)
			} else {
				err = nil
			}
		}
	}
	if err != nil {
		return fmt.Errorf("dataplane: attach XDP to ifindex %d (another XDP program attached?): %w", ifindex, err)
	}
	if d.pinDir != "" {
		p := filepath.Join(d.pinDir, linksDir, name)
		if err := l.Pin(p); err != nil {
			l.Close()
			return fmt.Errorf("dataplane: pin link %s: %w", p, err)
		}
	}
	d.links[name] = l
	return nil
}

// Detach removes the switch and pass links on ifindex (and their pins).
func (d *Dataplane) Detach(ifindex int) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	var errs []error
	for _, pfx := range []string{linkPfx, passPfx} {
		name := pfx + strconv.Itoa(ifindex)
		if l, ok := d.links[name]; ok {
			errs = append(errs, detachLink(l))
			delete(d.links, name)
		}
	}
	return errors.Join(errs...)
}

func detachLink(l link.Link) error {
	// Unpin of an unpinned link is a no-op; the last close detaches.
	if err := l.Unpin(); err != nil {
		return fmt.Errorf("dataplane: unpin link: %w", err)
	}
	return l.Close()
}

// Attached lists the links this Dataplane holds, switch and XDP_PASS
// programs alike, sorted by ifindex (switch before pass on the same ifindex).
func (d *Dataplane) Attached() []Attachment {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make([]Attachment, 0, len(d.links))
	for name := range d.links {
		if a, ok := parseLinkName(name); ok {
			out = append(out, a)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Ifindex != out[j].Ifindex {
			return out[i].Ifindex < out[j].Ifindex
		}
		return out[i].Kind < out[j].Kind
	})
	return out
}

// Close closes file descriptors. Pinned maps and links stay in the kernel and
// keep forwarding; unpinned links are detached.
func (d *Dataplane) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	var errs []error
	for name, l := range d.links {
		errs = append(errs, l.Close())
		delete(d.links, name)
	}
	errs = append(errs, d.objs.Close())
	return errors.Join(errs...)
}

// Destroy detaches every link, removes every pin and closes the Dataplane.
func (d *Dataplane) Destroy() error {
	d.mu.Lock()
	var errs []error
	for name, l := range d.links {
		errs = append(errs, detachLink(l))
		delete(d.links, name)
	}
	d.mu.Unlock()
	if d.pinDir != "" {
		for name := range d.mapsByName() {
			if err := os.Remove(filepath.Join(d.pinDir, mapsDir, name)); err != nil && !errors.Is(err, os.ErrNotExist) {
				errs = append(errs, fmt.Errorf("dataplane: unpin map %s: %w", name, err))
			}
		}
		os.Remove(filepath.Join(d.pinDir, linksDir))
		os.Remove(filepath.Join(d.pinDir, mapsDir))
		os.Remove(d.pinDir)
	}
	errs = append(errs, d.Close())
	return errors.Join(errs...)
}

// SetSwitchConfig sets the uSID block, the node's own uN uSIDs and the mode;
// the hang flag is kept. Own SIDs are replaced without a gap: new entries go
// in before stale ones are removed.
func (d *Dataplane) SetSwitchConfig(cfg SwitchConfig) error {
	bits := cfg.BlockBits
	if bits == 0 {
		bits = 32
	}
	if bits != 16 && bits != 32 && bits != 48 {
		return fmt.Errorf("dataplane: uSID block length %d: must be 16, 32 or 48", cfg.BlockBits)
	}
	if cfg.Mode != ModeSRv6 && cfg.Mode != ModeECMP {
		return fmt.Errorf("dataplane: unknown mode %d", cfg.Mode)
	}
	if len(cfg.OwnUSIDs) > 0 {
		if !cfg.Block.IsValid() || !cfg.Block.Addr().Is6() || cfg.Block.Bits() != bits {
			return fmt.Errorf("dataplane: uSID block %v must be an IPv6 prefix of length %d", cfg.Block, bits)
		}
	}
	if len(cfg.OwnUSIDs) > MaxOwnUSIDs {
		return fmt.Errorf("dataplane: %d own uSIDs, at most %d", len(cfg.OwnUSIDs), MaxOwnUSIDs)
	}
	want := map[uint16]bool{}
	for _, u := range cfg.OwnUSIDs {
		if u == 0 {
			return errors.New("dataplane: uSID 0 is reserved (end of container) and cannot be an own uN")
		}
		want[u] = true
	}
	sc := SwitchSwConfig{BlockBits: uint32(bits), Mode: uint32(cfg.Mode)}
	if cfg.Block.IsValid() {
		sc.Block = cfg.Block.Masked().Addr().As16()
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	var old SwitchSwConfig
	if err := d.objs.Config.Lookup(uint32(0), &old); err == nil {
		sc.Hang = old.Hang
	}
	// Gapless: first the union of old and new own uSIDs, then the config
	// (block, mode), then only the new ones. A uSID in both sets is never
	// absent, whatever a concurrent packet sees of the table.
	tbl := new(SwitchSwUsidTable)
	if err := d.objs.OwnSids.Lookup(uint32(0), tbl); err != nil {
		return fmt.Errorf("dataplane: read own uSIDs: %w", err)
	}
	for u := range want {
		tbl.Kind[u] = sidUN
	}
	if err := d.objs.OwnSids.Put(uint32(0), tbl); err != nil {
		return fmt.Errorf("dataplane: install own uSIDs: %w", err)
	}
	if err := d.objs.Config.Put(uint32(0), sc); err != nil {
		return fmt.Errorf("dataplane: write switch config: %w", err)
	}
	final := new(SwitchSwUsidTable)
	for u := range want {
		final.Kind[u] = sidUN
	}
	if *final != *tbl {
		if err := d.objs.OwnSids.Put(uint32(0), final); err != nil {
			return fmt.Errorf("dataplane: remove stale own uSIDs: %w", err)
		}
	}
	return nil
}

// USIDPrefix is the uN prefix of uSID u in block: block:u::/(block bits + 16).
func USIDPrefix(block netip.Prefix, u uint16) netip.Prefix {
	a := block.Masked().Addr().As16()
	i := block.Bits() / 8
	a[i] = byte(u >> 8)
	a[i+1] = byte(u)
	return netip.PrefixFrom(netip.AddrFrom16(a), block.Bits()+16)
}

func (d *Dataplane) updateConfig(f func(*SwitchSwConfig)) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	var c SwitchSwConfig
	if err := d.objs.Config.Lookup(uint32(0), &c); err != nil {
		return fmt.Errorf("dataplane: read switch config: %w", err)
	}
	if c.BlockBits == 0 {
		c.BlockBits = 32
	}
	f(&c)
	if err := d.objs.Config.Put(uint32(0), c); err != nil {
		return fmt.Errorf("dataplane: write switch config: %w", err)
	}
	return nil
}

// SetMode switches between SRv6 and ECMP forwarding.
func (d *Dataplane) SetMode(m Mode) error {
	if m != ModeSRv6 && m != ModeECMP {
		return fmt.Errorf("dataplane: unknown mode %d", m)
	}
	return d.updateConfig(func(c *SwitchSwConfig) { c.Mode = uint32(m) })
}

// SetHang stops (true) or resumes (false) forwarding of the whole switch.
// Frames for the kernel (NDP, local addresses) still pass, so the control
// plane keeps answering while the data plane is dead.
func (d *Dataplane) SetHang(hang bool) error {
	return d.updateConfig(func(c *SwitchSwConfig) {
		c.Hang = 0
		if hang {
			c.Hang = 1
		}
	})
}

// AddLocalAddr makes frames to a pass to the kernel (e.g. the switch's
// management address, or its uN address block:uSID:: to make it pingable),
// also while the switch is hung or the ingress port faulty. An address that
// is an own uN with a non-zero argument is a uSID container and is shifted,
// not passed (docs/switch.md).
func (d *Dataplane) AddLocalAddr(a netip.Addr) error {
	if !a.Is6() || a.Is4In6() {
		return fmt.Errorf("dataplane: local address %v is not IPv6", a)
	}
	if err := d.objs.LocalAddrs.Put(a.As16(), uint32(1)); err != nil {
		return fmt.Errorf("dataplane: add local address %v: %w", a, err)
	}
	return nil
}

// DelLocalAddr undoes AddLocalAddr.
func (d *Dataplane) DelLocalAddr(a netip.Addr) error {
	if err := d.objs.LocalAddrs.Delete(a.As16()); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
		return fmt.Errorf("dataplane: delete local address %v: %w", a, err)
	}
	return nil
}

func checkPort(id PortID) error {
	if id >= MaxPorts {
		return fmt.Errorf("dataplane: port %d out of range 0..%d", id, MaxPorts-1)
	}
	return nil
}

// SetPort configures port id: egress interface, MACs, role and port model.
// Existing queue state is kept.
func (d *Dataplane) SetPort(id PortID, p Port) error {
	if err := checkPort(id); err != nil {
		return err
	}
	if p.Ifindex <= 0 {
		return fmt.Errorf("dataplane: port %d: invalid ifindex %d", id, p.Ifindex)
	}
	if len(p.NeighMAC) != 6 || len(p.OwnMAC) != 6 {
		return fmt.Errorf("dataplane: port %d: neighbour MAC %q and own MAC %q must be 6-byte Ethernet addresses", id, p.NeighMAC, p.OwnMAC)
	}
	if p.Role != RoleFabric && p.Role != RoleHostFacing {
		return fmt.Errorf("dataplane: port %d: unknown role %d", id, p.Role)
	}
	if err := p.Model.validate(); err != nil {
		return fmt.Errorf("dataplane: port %d: %w", id, err)
	}
	sp := SwitchSwPort{
		Ifindex: uint32(p.Ifindex), Enabled: 1, Role: uint32(p.Role),
		RateBps:   p.Model.CapacityBps / 8,
		MarkBytes: p.Model.MarkBytes, TrimBytes: p.Model.TrimBytes, BufBytes: p.Model.BufferBytes,
		MarkMaxBytes: p.Model.MarkMaxBytes, MarkPmax: markPmax(p.Model.MarkProb),
	}
	if p.Model.HostECN {
		sp.Flags |= portFlagHostECN
	}
	copy(sp.NeighMac[:], p.NeighMAC)
	copy(sp.OwnMac[:], p.OwnMAC)
	d.mu.Lock()
	defer d.mu.Unlock()
	var old SwitchSwPort
	if err := d.objs.Ports.Lookup(uint32(id), &old); err == nil && old.Enabled != 0 && old.Ifindex != sp.Ifindex {
		d.unmapIfindex(old.Ifindex, id)
	}
	// Devmap first: the port must be reachable before routes can use it.
	if err := d.objs.TxPorts.Put(uint32(id), uint32(p.Ifindex)); err != nil {
		return fmt.Errorf("dataplane: port %d: devmap entry for ifindex %d: %w", id, p.Ifindex, err)
	}
	if err := d.objs.IfindexPort.Put(uint32(p.Ifindex), uint32(id)); err != nil {
		return fmt.Errorf("dataplane: port %d: ifindex map: %w", id, err)
	}
	if err := d.objs.Ports.Put(uint32(id), sp); err != nil {
		return fmt.Errorf("dataplane: port %d: %w", id, err)
	}
	return nil
}

// unmapIfindex removes the ingress mapping of ifindex if it still names id.
func (d *Dataplane) unmapIfindex(ifindex uint32, id PortID) {
	var cur uint32
	if err := d.objs.IfindexPort.Lookup(ifindex, &cur); err == nil && cur == uint32(id) {
		d.objs.IfindexPort.Delete(ifindex)
	}
}

func (m PortModel) validate() error {
	if m.CapacityBps == 0 {
		return nil
	}
	if m.CapacityBps < 8 || m.CapacityBps > MaxCapacityBps {
		return fmt.Errorf("capacity %d bit/s out of range 8..%d", m.CapacityBps, uint64(MaxCapacityBps))
	}
	if m.BufferBytes == 0 {
		return errors.New("port model with a capacity needs BufferBytes > 0")
	}
	if m.TrimBytes > m.BufferBytes {
		return fmt.Errorf("trim threshold %d above buffer %d", m.TrimBytes, m.BufferBytes)
	}
	trim := m.TrimBytes
	if trim == 0 {
		trim = m.BufferBytes
	}
	if m.MarkBytes > trim {
		return fmt.Errorf("marking threshold %d above trim threshold %d", m.MarkBytes, trim)
	}
	switch {
	case m.MarkMaxBytes == 0 && m.MarkProb == 0:
	case m.MarkBytes == 0 || m.MarkMaxBytes <= m.MarkBytes:
		return fmt.Errorf("RED marking: maximum threshold %d must be above the marking threshold %d (and that above 0)", m.MarkMaxBytes, m.MarkBytes)
	case m.MarkMaxBytes > m.BufferBytes:
		return fmt.Errorf("RED marking: maximum threshold %d above buffer %d", m.MarkMaxBytes, m.BufferBytes)
	case !(m.MarkProb > 0 && m.MarkProb <= 1):
		return fmt.Errorf("RED marking: probability %v at the maximum threshold, want 0 < p <= 1", m.MarkProb)
	}
	return nil
}

// markPmax is a RED marking probability as sw_port.mark_pmax, a threshold
// for bpf_get_prandom_u32 (p × 2^32, at most 2^32 − 1).
func markPmax(p float64) uint32 {
	return uint32(min(math.Round(p*(1<<32)), math.MaxUint32))
}

// DelPort removes port id: routes to it then count drop_no_route.
func (d *Dataplane) DelPort(id PortID) error {
	if err := checkPort(id); err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	var old SwitchSwPort
	if err := d.objs.Ports.Lookup(uint32(id), &old); err == nil && old.Enabled != 0 {
		d.unmapIfindex(old.Ifindex, id)
	}
	if err := d.objs.Ports.Put(uint32(id), SwitchSwPort{}); err != nil {
		return fmt.Errorf("dataplane: delete port %d: %w", id, err)
	}
	if err := d.objs.TxPorts.Delete(uint32(id)); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
		return fmt.Errorf("dataplane: delete devmap entry of port %d: %w", id, err)
	}
	// A slot reused later must not inherit this port's fault.
	if err := d.objs.Faults.Put(uint32(id), SwitchSwFault{}); err != nil {
		return fmt.Errorf("dataplane: clear fault of port %d: %w", id, err)
	}
	return nil
}

// Port reads back the configuration of port id; ok is false when the slot
// is not configured.
func (d *Dataplane) Port(id PortID) (p Port, ok bool, err error) {
	if err := checkPort(id); err != nil {
		return Port{}, false, err
	}
	var sp SwitchSwPort
	if err := d.objs.Ports.Lookup(uint32(id), &sp); err != nil {
		return Port{}, false, fmt.Errorf("dataplane: read port %d: %w", id, err)
	}
	if sp.Enabled == 0 {
		return Port{}, false, nil
	}
	p = Port{
		Ifindex:  int(sp.Ifindex),
		NeighMAC: net.HardwareAddr(append([]byte(nil), sp.NeighMac[:]...)),
		OwnMAC:   net.HardwareAddr(append([]byte(nil), sp.OwnMac[:]...)),
		Role:     Role(sp.Role),
		Model: PortModel{CapacityBps: sp.RateBps * 8, MarkBytes: sp.MarkBytes, TrimBytes: sp.TrimBytes, BufferBytes: sp.BufBytes,
			HostECN: sp.Flags&portFlagHostECN != 0, MarkMaxBytes: sp.MarkMaxBytes},
	}
	if sp.MarkMaxBytes != 0 {
		p.Model.MarkProb = float64(sp.MarkPmax) / (1 << 32)
	}
	return p, true, nil
}

// portFlagHostECN mirrors SW_PORT_F_HOST_ECN in bpf/consts.h.
const portFlagHostECN = 1

func lpmKey(p netip.Prefix) SwitchSwLpmKey {
	return SwitchSwLpmKey{Prefixlen: uint32(p.Bits()), Addr: p.Masked().Addr().As16()}
}

func prefixOf(k SwitchSwLpmKey) netip.Prefix {
	return netip.PrefixFrom(netip.AddrFrom16(k.Addr), int(k.Prefixlen))
}

func (nh NextHop) value() (SwitchSwNexthop, error) {
	if nh.Group {
		if nh.GroupID >= MaxGroups {
			return SwitchSwNexthop{}, fmt.Errorf("ECMP group %d out of range 0..%d", nh.GroupID, MaxGroups-1)
		}
		return SwitchSwNexthop{Kind: nhGroup, Id: uint32(nh.GroupID)}, nil
	}
	if err := checkPort(nh.Port); err != nil {
		return SwitchSwNexthop{}, err
	}
	return SwitchSwNexthop{Kind: nhPort, Id: uint32(nh.Port)}, nil
}

// AddRoute adds or replaces a FIB entry.
func (d *Dataplane) AddRoute(prefix netip.Prefix, nh NextHop) error {
	if !prefix.IsValid() || !prefix.Addr().Is6() || prefix.Addr().Is4In6() {
		return fmt.Errorf("dataplane: route %v: not an IPv6 prefix", prefix)
	}
	v, err := nh.value()
	if err != nil {
		return fmt.Errorf("dataplane: route %v: %w", prefix, err)
	}
	if err := d.objs.Fib.Put(lpmKey(prefix), v); err != nil {
		return fmt.Errorf("dataplane: route %v (FIB holds %d routes): %w", prefix, MaxRoutes, err)
	}
	return nil
}

// DelRoute removes a FIB entry.
func (d *Dataplane) DelRoute(prefix netip.Prefix) error {
	if err := d.objs.Fib.Delete(lpmKey(prefix)); err != nil {
		if errors.Is(err, ebpf.ErrKeyNotExist) {
			return fmt.Errorf("dataplane: route %v does not exist", prefix)
		}
		return fmt.Errorf("dataplane: delete route %v: %w", prefix, err)
	}
	return nil
}

// Routes lists the FIB sorted by prefix.
func (d *Dataplane) Routes() ([]Route, error) {
	var out []Route
	var k SwitchSwLpmKey
	var v SwitchSwNexthop
	it := d.objs.Fib.Iterate()
	for it.Next(&k, &v) {
		r := Route{Prefix: prefixOf(k)}
		if v.Kind == nhGroup {
			r.NextHop = NextHop{Group: true, GroupID: GroupID(v.Id)}
		} else {
			r.NextHop = NextHop{Port: PortID(v.Id)}
		}
		out = append(out, r)
	}
	if err := it.Err(); err != nil {
		return nil, fmt.Errorf("dataplane: list routes: %w", err)
	}
	sort.Slice(out, func(i, j int) bool {
		if c := out[i].Prefix.Addr().Compare(out[j].Prefix.Addr()); c != 0 {
			return c < 0
		}
		return out[i].Prefix.Bits() < out[j].Prefix.Bits()
	})
	return out, nil
}

// SetECMPGroup sets the members of group id (1..MaxGroupMembers ports; the
// same port may appear more than once to weight it). The member for a flow is
// members[FlowHash(...) % len(members)].
func (d *Dataplane) SetECMPGroup(id GroupID, members []PortID) error {
	if id >= MaxGroups {
		return fmt.Errorf("dataplane: ECMP group %d out of range 0..%d", id, MaxGroups-1)
	}
	if len(members) == 0 || len(members) > MaxGroupMembers {
		return fmt.Errorf("dataplane: ECMP group %d: %d members, need 1..%d", id, len(members), MaxGroupMembers)
	}
	g := SwitchSwEcmpGroup{N: uint32(len(members))}
	for i, m := range members {
		if err := checkPort(m); err != nil {
			return fmt.Errorf("dataplane: ECMP group %d: %w", id, err)
		}
		g.Members[i] = uint32(m)
	}
	if err := d.objs.EcmpGroups.Put(uint32(id), g); err != nil {
		return fmt.Errorf("dataplane: ECMP group %d: %w", id, err)
	}
	return nil
}

// SetFault sets the fault state of port id (the zero Fault clears it). When
// the port already flaps with the same on/off durations, the schedule keeps
// its start time: re-applying an unchanged fault does not move the phase.
func (d *Dataplane) SetFault(id PortID, f Fault) error {
	if err := checkPort(id); err != nil {
		return err
	}
	if f.LossPPM > 1_000_000 {
		return fmt.Errorf("dataplane: port %d: loss %d ppm above 1000000", id, f.LossPPM)
	}
	if f.FlapOn < 0 || f.FlapOff < 0 || (f.FlapOn == 0) != (f.FlapOff == 0) {
		return fmt.Errorf("dataplane: port %d: flap needs both on (%v) and off (%v) durations > 0, or neither", id, f.FlapOn, f.FlapOff)
	}
	sf := SwitchSwFault{
		Down: b2u(f.Down), Blackhole: b2u(f.Blackhole),
		LossThresh: uint32(uint64(f.LossPPM) << 32 / 1_000_000),
		LossAll:    b2u(f.LossPPM == 1_000_000),
		FlapOnNs:   uint64(f.FlapOn), FlapOffNs: uint64(f.FlapOff),
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if f.FlapOn > 0 {
		var old SwitchSwFault
		if err := d.objs.Faults.Lookup(uint32(id), &old); err == nil &&
			old.FlapOnNs == sf.FlapOnNs && old.FlapOffNs == sf.FlapOffNs && old.FlapStartNs != 0 {
			sf.FlapStartNs = old.FlapStartNs
		} else {
			var ts unix.Timespec
			if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
				return fmt.Errorf("dataplane: read monotonic clock: %w", err)
			}
			sf.FlapStartNs = uint64(ts.Nano())
		}
	}
	if err := d.objs.Faults.Put(uint32(id), sf); err != nil {
		return fmt.Errorf("dataplane: port %d: set fault: %w", id, err)
	}
	return nil
}

// Fault reads the fault state of port id back from the faults map. LossPPM
// is exact for every value SetFault accepts.
func (d *Dataplane) Fault(id PortID) (Fault, error) {
	if err := checkPort(id); err != nil {
		return Fault{}, err
	}
	var sf SwitchSwFault
	if err := d.objs.Faults.Lookup(uint32(id), &sf); err != nil {
		return Fault{}, fmt.Errorf("dataplane: port %d: read fault: %w", id, err)
	}
	return faultOf(sf), nil
}

// faultOf inverts SetFault's encoding. loss_thresh = floor(ppm * 2^32 / 1e6)
// loses less than one part in 4294 of a ppm, so rounding recovers ppm.
func faultOf(sf SwitchSwFault) Fault {
	f := Fault{
		Down: sf.Down != 0, Blackhole: sf.Blackhole != 0,
		LossPPM: uint32((uint64(sf.LossThresh)*1_000_000 + 1<<31) >> 32),
		FlapOn:  time.Duration(sf.FlapOnNs), FlapOff: time.Duration(sf.FlapOffNs),
	}
	if sf.LossAll != 0 {
		f.LossPPM = 1_000_000
	}
	return f
}

// Hang reports whether the data plane is hung (SetHang).
func (d *Dataplane) Hang() (bool, error) {
	var c SwitchSwConfig
	if err := d.objs.Config.Lookup(uint32(0), &c); err != nil {
		return false, fmt.Errorf("dataplane: read switch config: %w", err)
	}
	return c.Hang != 0, nil
}

func b2u(b bool) uint32 {
	if b {
		return 1
	}
	return 0
}

// Counters reads the counters of port id (or UnmappedPort) summed over CPUs.
func (d *Dataplane) Counters(id PortID) (PortCounters, error) {
	if id > UnmappedPort {
		return PortCounters{}, fmt.Errorf("dataplane: counters: port %d out of range 0..%d", id, UnmappedPort)
	}
	var per []SwitchSwCounters
	if err := d.objs.Counters.Lookup(uint32(id), &per); err != nil {
		return PortCounters{}, fmt.Errorf("dataplane: read counters of port %d: %w", id, err)
	}
	var c PortCounters
	for _, p := range per {
		c.RxPackets += p.RxPackets
		c.RxBytes += p.RxBytes
		c.TxPackets += p.TxPackets
		c.TxBytes += p.TxBytes
		c.Forwarded += p.Forwarded
		c.ECNMarked += p.EcnMarked
		c.Trimmed += p.Trimmed
		c.DropNoRoute += p.DropNoRoute
		c.DropHopLimit += p.DropHopLimit
		c.DropFault += p.DropFault
		c.DropBuffer += p.DropBuffer
		c.DropMalformed += p.DropMalformed
		c.DropEndOfContainer += p.DropEndOfContainer
		c.Pass += p.Pass
	}
	return c, nil
}

// Dropped is the sum of every drop counter.
func (c PortCounters) Dropped() uint64 {
	return c.DropNoRoute + c.DropHopLimit + c.DropFault + c.DropBuffer + c.DropMalformed + c.DropEndOfContainer
}

// FlowHash is the ECMP hash of the switch program (internal/flowhash.Sum over
// source, destination after any uSID shift, 20-bit flow label and UDP source
// port). Exposed so that tests and tools can predict member choice:
// member = members[FlowHash(...) % len(members)].
func FlowHash(src, dst netip.Addr, flowLabel uint32, sport uint16) uint32 {
	return flowhash.Sum(src.As16(), dst.As16(), flowLabel, sport)
}
