package mrc

// MemTable is a simple Memory: a fixed table of regions by protection
// domain, key kind and key. Register and Deregister allocate; Region does
// not.
type MemTable struct {
	// By key kind, then by memKey(pd, key): a uint64 key takes the map's
	// 64-bit fast path, where a struct key cost the engine benchmark 34 ns
	// per packet in hashing (nic/regions, mrc-nicd's table, is keyed the
	// same way).
	regions [2]map[uint64]Region
}

func memKey(pd, key uint32) uint64 { return uint64(pd)<<32 | uint64(key) }

// NewMemTable makes an empty table.
func NewMemTable() *MemTable {
	return &MemTable{regions: [2]map[uint64]Region{{}, {}}}
}

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
		m.regions[LocalKey][memKey(pd, lkey)] = r
	}
	if rkey != 0 {
		m.regions[RemoteKey][memKey(pd, rkey)] = r
	}
}

// Deregister removes key (both kinds) from protection domain 0.
func (m *MemTable) Deregister(key uint32) {
	delete(m.regions[LocalKey], memKey(0, key))
	delete(m.regions[RemoteKey], memKey(0, key))
}

// Region implements Memory.
func (m *MemTable) Region(pd, key uint32, kind KeyKind) (Region, bool) {
	if kind != LocalKey && kind != RemoteKey {
		return Region{}, false
	}
	r, ok := m.regions[kind][memKey(pd, key)]
	return r, ok
}
