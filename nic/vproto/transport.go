package vproto

import "fmt"

// Transport selects a QP's transport. Both ends of a connection must use
// the same one; the daemon cannot tell (there is no connection manager), so
// applications check it in their out-of-band exchange, as the perftest tools
// do.
type Transport uint8

// Transports.
const (
	// TransportMRC (the zero value, default): MRC, spraying over an EV set
	// with selective retransmission.
	TransportMRC Transport = 0
	// TransportRoCE: the RoCEv2 RC baseline: one path (one UDP source port)
	// for the QP's life, in-order delivery with go-back-N, DCQCN
	// (docs/roce.md).
	TransportRoCE Transport = 1
)

// String returns the name ParseTransport accepts.
func (t Transport) String() string {
	switch t {
	case TransportMRC:
		return "mrc"
	case TransportRoCE:
		return "roce"
	}
	return fmt.Sprintf("transport(%d)", uint8(t))
}

// ParseTransport parses "mrc" or "roce".
func ParseTransport(s string) (Transport, error) {
	switch s {
	case "mrc", "MRC":
		return TransportMRC, nil
	case "roce", "RoCE", "ROCE":
		return TransportRoCE, nil
	}
	return 0, fmt.Errorf("unknown transport %q: want mrc or roce", s)
}

// Valid reports whether t is a known transport.
func (t Transport) Valid() bool { return t <= TransportRoCE }

// MarshalText makes the JSON form the name, so that the protocol stays
// readable and an unknown value fails loudly.
func (t Transport) MarshalText() ([]byte, error) {
	if !t.Valid() {
		return nil, fmt.Errorf("vproto: unknown transport %d", uint8(t))
	}
	return []byte(t.String()), nil
}

// UnmarshalText parses the name.
func (t *Transport) UnmarshalText(b []byte) error {
	v, err := ParseTransport(string(b))
	if err != nil {
		return err
	}
	*t = v
	return nil
}
