package wire

import (
	"fmt"
	"net"
)

// MAC is an Ethernet address: the one representation of a MAC in softmrc's
// packets, configs (NIC, switch) and the testbed plan. Text (YAML, JSON,
// %s) is six colon-separated hex bytes. net.HardwareAddr appears only at
// the I/O edge (netlink, net.Interface), converted with HardwareAddr and
// MACFromHardwareAddr.
type MAC [6]byte

// ParseMAC reads six colon- or dash-separated hex bytes.
func ParseMAC(s string) (MAC, error) {
	hw, err := net.ParseMAC(s)
	if err != nil || len(hw) != 6 {
		return MAC{}, fmt.Errorf("MAC %q: want six hex bytes like 02:00:00:00:00:01", s)
	}
	return MAC(hw), nil
}

// MACFromHardwareAddr converts an address read from the kernel; it must be
// 6 bytes long (Ethernet).
func MACFromHardwareAddr(hw net.HardwareAddr) (MAC, error) {
	if len(hw) != 6 {
		return MAC{}, fmt.Errorf("hardware address %s is %d bytes: want a 6-byte Ethernet MAC", hw, len(hw))
	}
	return MAC(hw), nil
}

// HardwareAddr converts m for the kernel interfaces that take one.
func (m MAC) HardwareAddr() net.HardwareAddr { return net.HardwareAddr(m[:]) }

// String writes aa:bb:cc:dd:ee:ff.
func (m MAC) String() string {
	const hex = "0123456789abcdef"
	b := make([]byte, 0, 17)
	for i, x := range m {
		if i > 0 {
			b = append(b, ':')
		}
		b = append(b, hex[x>>4], hex[x&0xf])
	}
	return string(b)
}

// MarshalText writes aa:bb:cc:dd:ee:ff.
func (m MAC) MarshalText() ([]byte, error) { return []byte(m.String()), nil }

// UnmarshalText reads six colon- or dash-separated hex bytes.
func (m *MAC) UnmarshalText(b []byte) error {
	x, err := ParseMAC(string(b))
	if err != nil {
		return err
	}
	*m = x
	return nil
}

// IsZero reports whether m is 00:00:00:00:00:00.
func (m MAC) IsZero() bool { return m == MAC{} }

// IsMulticast reports whether m is a group address (also broadcast).
func (m MAC) IsMulticast() bool { return m[0]&1 != 0 }
