// Package regions is mrc-nicd's table of the memory applications register:
// each region is an application's memfd mapped into the daemon, known by an
// lkey (the source of the application's writes) and an rkey (the target of
// its peers' writes), inside the application's protection domain, with
// verbs-style access rights. The table is the engine's mrc.Memory: the
// engine resolves a QP's keys only in that QP's protection domain.
package regions

import (
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/softmrc/softmrc/internal/mrc"
)

// Region is one registered memory region. Base (in mrc.Region) is the VA
// the application and its peers name the region by; Buf is the daemon's
// mapping of it.
type Region struct {
	mrc.Region
	PD      uint32
	LKey    uint32
	RKey    uint32
	mapping []byte
}

// Table holds every registered region. Lookups (the engine's, per packet)
// take no lock and do not allocate: the table is an immutable snapshot
// replaced on each change. Mappings are released only with Release, after
// the domain's QPs are gone, so the engine never touches unmapped memory.
type Table struct {
	mu      sync.Mutex // serialises writers
	tab     atomic.Pointer[snapshot]
	retired map[uint32][]*Region // deregistered, still mapped until the domain goes
}

var _ mrc.Memory = (*Table)(nil)

type snapshot struct {
	byLKey map[uint32]*Region
	byRKey map[uint32]*Region
}

// New returns an empty table.
func New() *Table {
	t := &Table{retired: map[uint32][]*Region{}}
	t.tab.Store(&snapshot{byLKey: map[uint32]*Region{}, byRKey: map[uint32]*Region{}})
	return t
}

// Add maps length bytes of the memfd fd (shared) and registers them in
// protection domain pd at addr with access. As in verbs every region gets
// an rkey; the engine refuses remote writes under it unless access grants
// remote write. It takes ownership of nothing: the caller closes fd.
func (t *Table) Add(pd uint32, fd int, addr, length uint64, access mrc.Access) (*Region, error) {
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
	t.mu.Lock()
	defer t.mu.Unlock()
	old := t.tab.Load()
	r := &Region{Region: mrc.Region{Base: addr, Buf: m[:length:length], Access: access}, PD: pd, mapping: m}
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
	t.tab.Store(nt)
	return r, nil
}

// Remove deregisters domain pd's region lkey. The mapping stays until
// Release (work requests in flight may still read it).
func (t *Table) Remove(pd, lkey uint32) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	old := t.tab.Load()
	r := old.byLKey[lkey]
	if r == nil || r.PD != pd {
		return fmt.Errorf("lkey %#x is not a region of this application", lkey)
	}
	nt := old.clone()
	delete(nt.byLKey, r.LKey)
	delete(nt.byRKey, r.RKey)
	t.tab.Store(nt)
	t.retired[pd] = append(t.retired[pd], r)
	return nil
}

// Release removes and unmaps every region of domain pd. Call it only when
// nothing can reach them any more (the domain's QPs are destroyed, on the
// engine's goroutine or after it has moved past them).
func (t *Table) Release(pd uint32) {
	t.mu.Lock()
	defer t.mu.Unlock()
	old := t.tab.Load()
	nt := old.clone()
	gone := t.retired[pd]
	delete(t.retired, pd)
	for k, r := range old.byLKey {
		if r.PD == pd {
			delete(nt.byLKey, k)
			delete(nt.byRKey, r.RKey)
			gone = append(gone, r)
		}
	}
	t.tab.Store(nt)
	for _, r := range gone {
		_ = unix.Munmap(r.mapping)
	}
}

// Region implements mrc.Memory: domain pd's region of key in the key space
// kind. A key of another domain does not resolve, so one application's QP
// never reads or writes another's memory.
func (t *Table) Region(pd, key uint32, kind mrc.KeyKind) (mrc.Region, bool) {
	s := t.tab.Load()
	byKey := s.byLKey
	if kind == mrc.RemoteKey {
		byKey = s.byRKey
	}
	r := byKey[key]
	if r == nil || r.PD != pd {
		return mrc.Region{}, false
	}
	return r.Region, true
}

// Count returns the number of live regions and their total bytes.
func (t *Table) Count() (n int, bytes uint64) {
	for _, r := range t.tab.Load().byLKey {
		n++
		bytes += uint64(len(r.Buf))
	}
	return n, bytes
}

func (s *snapshot) clone() *snapshot {
	nt := &snapshot{byLKey: make(map[uint32]*Region, len(s.byLKey)+1), byRKey: make(map[uint32]*Region, len(s.byRKey)+1)}
	for k, v := range s.byLKey {
		nt.byLKey[k] = v
	}
	for k, v := range s.byRKey {
		nt.byRKey[k] = v
	}
	return nt
}

func randKey() uint32 {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return binary.LittleEndian.Uint32(b[:])
}
