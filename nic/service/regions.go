package service

import (
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// Region is one registered memory region: the application's memfd mapped
// into the daemon. Addr is the VA the application (and its peers) name the
// region by.
type Region struct {
	Owner   uint32
	LKey    uint32
	RKey    uint32
	Addr    uint64
	Buf     []byte // the daemon's mapping, len = registered length
	mapping []byte
}

// Slice returns the region's bytes [va, va+n) or an error saying why the
// range is not inside it.
func (r *Region) Slice(va uint64, n uint32) ([]byte, error) {
	if va < r.Addr || va-r.Addr > uint64(len(r.Buf)) || uint64(n) > uint64(len(r.Buf))-(va-r.Addr) {
		return nil, fmt.Errorf("range [%#x, +%d) is outside region [%#x, +%d)", va, n, r.Addr, len(r.Buf))
	}
	off := va - r.Addr
	return r.Buf[off : off+uint64(n) : off+uint64(n)], nil
}

// Regions is the table of every registered region. Lookups (the engine's,
// per packet) take no lock: the table is an immutable snapshot replaced on
// each change. Mappings are released only with ReleaseOwner, after the
// owner's QPs are gone, so the engine never touches unmapped memory.
type Regions struct {
	mu      sync.Mutex // serialises writers
	tab     atomic.Pointer[regionTab]
	retired map[uint32][]*Region // deregistered, still mapped until the owner goes
}

type regionTab struct {
	byLKey map[uint32]*Region
	byRKey map[uint32]*Region
}

// NewRegions returns an empty table.
func NewRegions() *Regions {
	rs := &Regions{retired: map[uint32][]*Region{}}
	rs.tab.Store(&regionTab{byLKey: map[uint32]*Region{}, byRKey: map[uint32]*Region{}})
	return rs
}

// Add maps length bytes of the memfd fd (shared) and registers them for
// owner at addr. It takes ownership of nothing: the caller closes fd.
func (rs *Regions) Add(owner uint32, fd int, addr, length uint64) (*Region, error) {
	if length == 0 || length > 1<<40 {
		return nil, fmt.Errorf("region length %d: want 1 byte .. 1 TiB", length)
	}
	if addr == 0 || addr+length < addr {
		return nil, fmt.Errorf("region address %#x with length %d wraps or is 0", addr, length)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, fmt.Errorf("stat the passed memfd: %w", err)
	}
	if uint64(st.Size) < length {
		return nil, fmt.Errorf("memfd holds %d bytes, fewer than the %d registered", st.Size, length)
	}
	page := uint64(unix.Getpagesize())
	mapLen := (length + page - 1) &^ (page - 1)
	m, err := unix.Mmap(fd, 0, int(mapLen), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("map the passed memfd (%d bytes): %w", mapLen, err)
	}
	rs.mu.Lock()
	defer rs.mu.Unlock()
	old := rs.tab.Load()
	r := &Region{Owner: owner, Addr: addr, Buf: m[:length:length], mapping: m}
	// Keys are random so that one application cannot guess another's rkey;
	// both are unique and never 0.
	for r.LKey == 0 || old.byLKey[r.LKey] != nil {
		r.LKey = randKey()
	}
	for r.RKey == 0 || old.byRKey[r.RKey] != nil {
		r.RKey = randKey()
	}
	nt := old.clone()
	nt.byLKey[r.LKey] = r
	nt.byRKey[r.RKey] = r
	rs.tab.Store(nt)
	return r, nil
}

// Remove deregisters owner's region lkey. The mapping stays until
// ReleaseOwner (work requests in flight may still read it).
func (rs *Regions) Remove(owner, lkey uint32) error {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	old := rs.tab.Load()
	r := old.byLKey[lkey]
	if r == nil || r.Owner != owner {
		return fmt.Errorf("lkey %#x is not a region of this application", lkey)
	}
	nt := old.clone()
	delete(nt.byLKey, r.LKey)
	delete(nt.byRKey, r.RKey)
	rs.tab.Store(nt)
	rs.retired[owner] = append(rs.retired[owner], r)
	return nil
}

// ReleaseOwner removes and unmaps every region of owner. Call it only when
// nothing can reach them any more (the owner's QPs are destroyed, on the
// engine's goroutine or after it has moved past them).
func (rs *Regions) ReleaseOwner(owner uint32) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	old := rs.tab.Load()
	nt := old.clone()
	gone := rs.retired[owner]
	delete(rs.retired, owner)
	for k, r := range old.byLKey {
		if r.Owner == owner {
			delete(nt.byLKey, k)
			delete(nt.byRKey, r.RKey)
			gone = append(gone, r)
		}
	}
	rs.tab.Store(nt)
	for _, r := range gone {
		_ = unix.Munmap(r.mapping)
	}
}

// Local returns owner's bytes [addr, addr+n) of region lkey: the source of a
// posted write.
func (rs *Regions) Local(owner, lkey uint32, addr uint64, n uint32) ([]byte, error) {
	r := rs.tab.Load().byLKey[lkey]
	if r == nil || r.Owner != owner {
		return nil, fmt.Errorf("lkey %#x is not a region of this application", lkey)
	}
	return r.Slice(addr, n)
}

// Remote returns the bytes [va, va+n) of region rkey, which must belong to
// owner (the owner of the QP the write arrived on): one application's QP can
// never write into another's memory.
func (rs *Regions) Remote(owner, rkey uint32, va uint64, n uint32) ([]byte, error) {
	r := rs.tab.Load().byRKey[rkey]
	if r == nil || r.Owner != owner {
		return nil, fmt.Errorf("rkey %#x is not registered by the target QP's application", rkey)
	}
	return r.Slice(va, n)
}

// Count returns the number of live regions and their total bytes.
func (rs *Regions) Count() (n int, bytes uint64) {
	for _, r := range rs.tab.Load().byLKey {
		n++
		bytes += uint64(len(r.Buf))
	}
	return n, bytes
}

func (t *regionTab) clone() *regionTab {
	nt := &regionTab{byLKey: make(map[uint32]*Region, len(t.byLKey)+1), byRKey: make(map[uint32]*Region, len(t.byRKey)+1)}
	for k, v := range t.byLKey {
		nt.byLKey[k] = v
	}
	for k, v := range t.byRKey {
		nt.byRKey[k] = v
	}
	return nt
}

func randKey() uint32 {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return binary.LittleEndian.Uint32(b[:])
}

// Lookup returns owner's region rkey, or nil. It neither locks nor
// allocates (the engine calls it per packet).
func (rs *Regions) Lookup(owner, rkey uint32) *Region {
	r := rs.tab.Load().byRKey[rkey]
	if r == nil || r.Owner != owner {
		return nil
	}
	return r
}
