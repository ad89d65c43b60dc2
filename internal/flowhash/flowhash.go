// Package flowhash is the ECMP flow hash of the fabric: the function by which
// mrc-switchd's XDP program (bpf/srv6.h ecmp_hash) picks a group member, and
// which the simulator's switch and the switch tests use to predict that
// choice. It is the one Go definition; the C twin is held to it by the
// switch's BPF_PROG_RUN tests.
package flowhash

const (
	fnvOffset = 2166136261
	fnvPrime  = 16777619
)

// Sum is FNV-1a (32 bit) over the source address, the destination address
// (after any uSID shift), the 20-bit flow label as 3 big-endian bytes and the
// UDP source port as 2 big-endian bytes, followed by the murmur3 finaliser.
//
// The finaliser is why this is not plain FNV-1a: FNV multiplies by an odd
// prime, so the hash's low bit is the XOR of the low bits of every byte, and
// with two members `h % 2` was one parity bit. For RoCE QPs that parity
// reduced to one bit of lqpn·rqpn, shared by consecutive QPNs, so the 16 QPs
// of one peer all took the same uplink (docs/results/README.md, S7). The
// finaliser makes every output bit depend on every input bit.
func Sum(src, dst [16]byte, flowLabel uint32, sport uint16) uint32 {
	h := uint32(fnvOffset)
	for _, b := range src {
		h = (h ^ uint32(b)) * fnvPrime
	}
	for _, b := range dst {
		h = (h ^ uint32(b)) * fnvPrime
	}
	for _, b := range [5]byte{byte(flowLabel >> 16 & 0x0f), byte(flowLabel >> 8), byte(flowLabel), byte(sport >> 8), byte(sport)} {
		h = (h ^ uint32(b)) * fnvPrime
	}
	return Mix(h)
}

// Mix is murmur3's fmix32: a bijection whose every output bit depends on
// every input bit.
func Mix(h uint32) uint32 {
	h ^= h >> 16
	h *= 0x85ebca6b
	h ^= h >> 13
	h *= 0xc2b2ae35
	h ^= h >> 16
	return h
}
