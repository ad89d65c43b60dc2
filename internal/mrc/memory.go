package mrc

// MemTable is a simple Memory: a fixed table of regions by protection
// domain, key kind and key. Register and Deregister allocate; Region does
// not.
type MemTable struct {
	regions map[memKey]Region
}

type memKey struct {
	pd   uint32
	key  uint32
	kind KeyKind
}

// NewMemTable makes an empty table.
func NewMemTable() *MemTable { return &MemTable{regions: map[memKey]Region{}} }

// Register makes buf reachable in protection domain 0 under key, as both
// lkey and rkey, as [base, base+len(buf)).
func (m *MemTable) Register(key uint32, base uint64, buf []byte, access Access) {
	m.RegisterPD(0, key, key, base, buf, access)
}

// RegisterPD makes buf reachable in protection domain pd as [base,
// base+len(buf)) under lkey (local) and rkey (remote); a zero key is not
// registered.
func (m *MemTable) RegisterPD(pd, lkey, rkey uint32, base uint64, buf []byte, access Access) {
	r := Region{Base: base, Buf: buf, Access: access}
	if lkey != 0 {
		m.regions[memKey{pd, lkey, LocalKey}] = r
	}
	if rkey != 0 {
		m.regions[memKey{pd, rkey, RemoteKey}] = r
	}
}

// Deregister removes key (both kinds) from protection domain 0.
func (m *MemTable) Deregister(key uint32) {
	delete(m.regions, memKey{0, key, LocalKey})
	delete(m.regions, memKey{0, key, RemoteKey})
}

// Region implements Memory.
func (m *MemTable) Region(pd, key uint32, kind KeyKind) (Region, bool) {
	r, ok := m.regions[memKey{pd, key, kind}]
	return r, ok
}
