package plan

import (
	"fmt"
	"net/netip"

	"github.com/softmrc/softmrc/internal/wire"
)

// Container returns the outer IPv6 destination carrying usids in an F3216
// block (at most 6 uSIDs, zero filled).
func Container(block netip.Prefix, usids ...wire.USID) (netip.Addr, error) {
	if block.Bits() != 32 || !block.Addr().Is6() {
		return netip.Addr{}, fmt.Errorf("container: block %s is not a /32 (only F3216 is supported)", block)
	}
	if len(usids) == 0 || len(usids) > 6 {
		return netip.Addr{}, fmt.Errorf("container: %d uSIDs, want 1 to 6", len(usids))
	}
	a := block.Addr().As16()
	for i, u := range usids {
		a[4+2*i], a[5+2*i] = byte(u>>8), byte(u)
	}
	return netip.AddrFrom16(a), nil
}
