package daemon

import (
	"encoding/binary"

	"github.com/softmrc/softmrc/internal/wire"
)

// destQP reads the BTH destination QP of an MRC frame (plain IPv6/UDP or
// IPv6-in-IPv6), without decoding the rest. ok is false for anything else.
// The loop uses it to know whose memory a data packet may touch before the
// engine sees it.
func destQP(f []byte) (wire.QPN, bool) {
	const ip = wire.EthLen
	if len(f) < ip+wire.IPv6Len || binary.BigEndian.Uint16(f[12:]) != wire.EtherTypeIPv6 {
		return 0, false
	}
	off := ip
	if f[off+6] == wire.ProtoIPv6 {
		off += wire.IPv6Len
		if len(f) < off+wire.IPv6Len {
			return 0, false
		}
	}
	if f[off+6] != wire.ProtoUDP {
		return 0, false
	}
	bth := off + wire.IPv6Len + wire.UDPLen
	if len(f) < bth+wire.BTHLen {
		return 0, false
	}
	return wire.QPN(uint32(f[bth+5])<<16 | uint32(f[bth+6])<<8 | uint32(f[bth+7])), true
}
