package wire

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// Addr128 is an IPv6 address as a comparable 128-bit value, in the spirit of
// net/netip but with the bit arithmetic a uSID container needs (shift, mask).
type Addr128 struct{ hi, lo uint64 }

// Addr128From16 makes an Addr128 from network-order bytes.
func Addr128From16(b [16]byte) Addr128 {
	return Addr128{binary.BigEndian.Uint64(b[:8]), binary.BigEndian.Uint64(b[8:])}
}

// Addr128FromSlice reads 16 network-order bytes from b (len(b) >= 16).
func Addr128FromSlice(b []byte) Addr128 {
	_ = b[15]
	return Addr128{binary.BigEndian.Uint64(b[:8]), binary.BigEndian.Uint64(b[8:16])}
}

// Addr128FromNetip converts an IPv6 netip.Addr.
func Addr128FromNetip(a netip.Addr) Addr128 { return Addr128From16(a.As16()) }

// As16 returns the network-order bytes.
func (a Addr128) As16() (b [16]byte) {
	binary.BigEndian.PutUint64(b[:8], a.hi)
	binary.BigEndian.PutUint64(b[8:], a.lo)
	return b
}

// Put writes the network-order bytes into b (len(b) >= 16).
func (a Addr128) Put(b []byte) {
	_ = b[15]
	binary.BigEndian.PutUint64(b[:8], a.hi)
	binary.BigEndian.PutUint64(b[8:16], a.lo)
}

// Netip converts to a netip.Addr.
func (a Addr128) Netip() netip.Addr { return netip.AddrFrom16(a.As16()) }

func (a Addr128) String() string { return a.Netip().String() }

// IsZero reports whether a is ::.
func (a Addr128) IsZero() bool { return a.hi == 0 && a.lo == 0 }

// shl shifts left by n bits (0 <= n < 128), zero fill.
func (a Addr128) shl(n uint) Addr128 {
	switch {
	case n == 0:
		return a
	case n >= 64:
		return Addr128{a.lo << (n - 64), 0}
	default:
		return Addr128{a.hi<<n | a.lo>>(64-n), a.lo << n}
	}
}

// shr shifts right by n bits (0 <= n < 128).
func (a Addr128) shr(n uint) Addr128 {
	switch {
	case n == 0:
		return a
	case n >= 64:
		return Addr128{0, a.hi >> (n - 64)}
	default:
		return Addr128{a.hi >> n, a.lo>>n | a.hi<<(64-n)}
	}
}

// mask keeps the top n bits (0..128).
func (a Addr128) mask(n uint) Addr128 {
	if n >= 128 {
		return a
	}
	if n == 0 {
		return Addr128{}
	}
	m := Addr128{^uint64(0), ^uint64(0)}.shl(128 - n)
	return Addr128{a.hi & m.hi, a.lo & m.lo}
}

// USIDBits is the width of one micro-SID (the "16" of F3216).
const USIDBits = 16

// USID is one 16-bit micro-SID (docs/conventions.md: index<<8 | plane): the
// one uSID type of the simulator, the path templates, the testbed plan and
// the switch config. Its text form (YAML) is 0x-prefixed hex, 0x0140, and
// only that: a bare 0140 or a decimal 320 from an older file is refused
// rather than guessed (decimal 1280 read as hex would name another switch).
// It has no String method on purpose: fmt's %x would then hex-encode the
// string; format with %04x or Hex.
type USID uint16

// Hex writes u as 0x0140.
func (u USID) Hex() string { return fmt.Sprintf("%#04x", uint16(u)) }

// MarshalText writes 0x0140.
func (u USID) MarshalText() ([]byte, error) { return fmt.Appendf(nil, "%#04x", uint16(u)), nil }

// UnmarshalText reads 0x and 1-4 hex digits.
func (u *USID) UnmarshalText(b []byte) error {
	x, err := ParseUSID(string(b))
	if err != nil {
		return err
	}
	*u = x
	return nil
}

// ParseUSID reads 0x and 1-4 hex digits (0x0140, 0x140).
func ParseUSID(s string) (USID, error) {
	h, ok := strings.CutPrefix(s, "0x")
	if !ok {
		h, ok = strings.CutPrefix(s, "0X")
	}
	h = strings.ReplaceAll(h, "_", "")
	if !ok || len(h) == 0 || len(h) > 4 {
		return 0, fmt.Errorf("uSID %q: want 1-4 hex digits such as 0x0140", s)
	}
	x, err := strconv.ParseUint(h, 16, 16)
	if err != nil {
		return 0, fmt.Errorf("uSID %q: want 1-4 hex digits such as 0x0140", s)
	}
	return USID(x), nil
}

// USIDFormat describes a uSID container: a locator block of BlockBits bits
// (16, 32 or 48) followed by 16-bit uSIDs. The zero value is F3216.
type USIDFormat struct {
	BlockBits int
}

// F3216 is the default format: a 32-bit block, 16-bit uSIDs.
var F3216 = USIDFormat{BlockBits: 32}

// ErrUSIDFormat reports an unsupported block length.
var ErrUSIDFormat = errors.New("wire: uSID block length must be 16, 32 or 48 bits")

func (f USIDFormat) block() uint {
	if f.BlockBits == 0 {
		return 32
	}
	return uint(f.BlockBits)
}

// Validate checks the block length.
func (f USIDFormat) Validate() error {
	switch f.block() {
	case 16, 32, 48:
		return nil
	}
	return fmt.Errorf("%w (got %d)", ErrUSIDFormat, f.BlockBits)
}

// Slots is how many uSIDs fit after the block.
func (f USIDFormat) Slots() int { return int(128-f.block()) / USIDBits }

// Build makes a container from a block (its top BlockBits bits are used) and
// up to Slots() uSIDs, the first one active.
func (f USIDFormat) Build(block Addr128, usids ...USID) (Addr128, error) {
	if err := f.Validate(); err != nil {
		return Addr128{}, err
	}
	if len(usids) > f.Slots() {
		return Addr128{}, fmt.Errorf("wire: %d uSIDs do not fit a container with a %d-bit block (at most %d)", len(usids), f.block(), f.Slots())
	}
	c := block.mask(f.block())
	for i, u := range usids {
		shift := 128 - f.block() - uint(i+1)*USIDBits
		c = c.or(Addr128{0, uint64(u)}.shl(shift))
	}
	return c, nil
}

func (a Addr128) or(b Addr128) Addr128 { return Addr128{a.hi | b.hi, a.lo | b.lo} }

// Block returns the container's block (the other bits zero).
func (f USIDFormat) Block(c Addr128) Addr128 { return c.mask(f.block()) }

// Active returns the active (first) uSID.
func (f USIDFormat) Active(c Addr128) USID {
	return USID(c.shr(128 - f.block() - USIDBits).lo)
}

// ArgIsZero reports whether everything after the active uSID is zero: the
// end of the container (RFC 9800 NEXT-CSID; the whole argument must be tested,
// not just the next 16 bits).
func (f USIDFormat) ArgIsZero(c Addr128) bool {
	return c.shl(f.block() + USIDBits).IsZero()
}

// Shift performs the uN shift: the bits after the block move left by one uSID
// and zeros fill from the right; the block stays.
func (f USIDFormat) Shift(c Addr128) Addr128 {
	b := f.block()
	rest := c.shl(b + USIDBits).shr(b)
	return c.mask(b).or(rest)
}

// Prefix is the node's uN prefix (block + uSID), e.g. a /48 for F3216.
func (f USIDFormat) Prefix(block Addr128, usid USID) netip.Prefix {
	c, _ := f.Build(block, usid)
	return netip.PrefixFrom(c.Netip(), int(f.block())+USIDBits)
}

// MatchesUN reports whether c's block is block and its active uSID is usid.
func (f USIDFormat) MatchesUN(c Addr128, block Addr128, usid USID) bool {
	return f.Block(c) == block.mask(f.block()) && f.Active(c) == usid
}

// USIDs lists the non-zero uSIDs of the container from the active one on,
// stopping at the first zero uSID; it appends to dst (no allocation when dst
// has room).
func (f USIDFormat) USIDs(dst []USID, c Addr128) []USID {
	for i := 0; i < f.Slots(); i++ {
		u := f.Active(c)
		if u == 0 {
			break
		}
		dst = append(dst, u)
		c = f.Shift(c)
	}
	return dst
}
