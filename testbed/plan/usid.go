package plan

import (
	"fmt"
	"net/netip"
)

// USID is a 16-bit micro-SID; YAML writes it as 4 hex digits.
type USID uint16

// MarshalText writes the uSID as 4 hex digits.
func (u USID) MarshalText() ([]byte, error) { return fmt.Appendf(nil, "%04x", uint16(u)), nil }

// UnmarshalText reads 1-4 hex digits.
func (u *USID) UnmarshalText(b []byte) error {
	var x uint16
	if len(b) == 0 || len(b) > 4 {
		return fmt.Errorf("uSID %q: want 1-4 hex digits", b)
	}
	if _, err := fmt.Sscanf(string(b), "%x", &x); err != nil {
		return fmt.Errorf("uSID %q: want 1-4 hex digits", b)
	}
	*u = USID(x)
	return nil
}

// Container returns the outer IPv6 destination carrying usids in an F3216
// block (at most 6 uSIDs, zero filled).
func Container(block netip.Prefix, usids ...USID) (netip.Addr, error) {
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
