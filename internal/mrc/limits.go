package mrc

// DefaultMTU is the MTU of a Config that leaves it 0: payload bytes per data
// packet.
const DefaultMTU = 2048

// ValidMTU reports whether the engine supports n payload bytes per data
// packet: 1024, 2048 or 4096 (RoCE MTUs). Configuration front ends (nic/config)
// check with it, so they accept exactly what New accepts.
func ValidMTU(n int) bool {
	switch n {
	case 1024, 2048, 4096:
		return true
	}
	return false
}
