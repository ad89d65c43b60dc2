package mrc

// MemTable is a simple Memory: a fixed table of regions by key. Register
// and Deregister allocate; Region does not.
type MemTable struct {
	regions map[uint32]Region
}

// NewMemTable makes an empty table.
func NewMemTable() *MemTable { return &MemTable{regions: map[uint32]Region{}} }

// Register makes buf reachable under key as [base, base+len(buf)).
func (m *MemTable) Register(key uint32, base uint64, buf []byte, access Access) {
	m.regions[key] = Region{Base: base, Buf: buf, Access: access}
}

// Deregister removes key.
func (m *MemTable) Deregister(key uint32) { delete(m.regions, key) }

// Region implements Memory.
func (m *MemTable) Region(key uint32) (Region, bool) {
	r, ok := m.regions[key]
	return r, ok
}
