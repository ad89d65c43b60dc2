// Package wire owns every byte softmrc puts on the wire: Ethernet, IPv6 (outer
// and inner), UDP, and the MRC 1.0 headers on top of RoCEv2 framing (BTH, METH,
// TSETH, RETH, ImmDt, AETH, SETH+CC_STATE, NETH, PETH, ERTH, EETH), the ICRC,
// the EV <-> (UDP source port, flow label) mapping and uSID container
// arithmetic.
//
// Headers are zero-copy views over []byte (type BTH []byte, ...) with getters
// and setters; Packet is a flat value describing a whole frame that Encode
// writes and Decoder.Decode fills without allocating. The layout choices the
// public material leaves open are written down in docs/wire-format.md and
// docs/conventions.md; FormatVersion names the set in force.
package wire

import "fmt"

// FormatVersion is the version of the softmrc wire format (docs/wire-format.md).
// Bump it whenever a byte position or a constant in docs/conventions.md changes.
const FormatVersion = 1

// PSN is a 24-bit packet sequence number. Arithmetic wraps modulo 2^24 and
// comparisons are wrap-aware (serial-number arithmetic, RFC 1982 style), valid
// while the two PSNs are less than 2^23 apart.
type PSN uint32

// PSNMask keeps the low 24 bits.
const PSNMask = 0xFFFFFF

// Add returns p+n modulo 2^24 (n may be negative).
func (p PSN) Add(n int) PSN { return PSN((int64(p) + int64(n)) & PSNMask) }

// Diff returns the signed distance p-q in [-2^23, 2^23).
func (p PSN) Diff(q PSN) int32 {
	d := (uint32(p) - uint32(q)) & PSNMask
	if d >= 1<<23 {
		return int32(d) - (1 << 24)
	}
	return int32(d)
}

// Before reports whether p comes before q.
func (p PSN) Before(q PSN) bool { return p.Diff(q) < 0 }

// After reports whether p comes after q.
func (p PSN) After(q PSN) bool { return p.Diff(q) > 0 }

// Valid reports whether p fits in 24 bits.
func (p PSN) Valid() bool { return p <= PSNMask }

// QPN is a 24-bit queue pair number.
type QPN uint32

// QPNMask keeps the low 24 bits.
const QPNMask = 0xFFFFFF

// QPEndpoint is the reserved QP that node-scoped endpoint operations (port
// status update, EV probe) are addressed to.
const QPEndpoint QPN = 0x2

// EV is a 32-bit entropy value: it names one path through the fabric.
// On the wire it is split over the UDP source port and the flow label (ev.go).
type EV uint32

// MSN is a 16-bit message sequence number (METH MSN and RQMSN).
type MSN uint16

// Plane is a fabric plane, which is also the index of the NIC port in it.
type Plane uint8

// MaxPlanes is the number of planes the EV layout and the 32-bit port-status
// mask can name (EV plane field is 4 bits).
const MaxPlanes = 16

func (p PSN) String() string { return fmt.Sprintf("%d", uint32(p)) }
func (q QPN) String() string { return fmt.Sprintf("0x%06x", uint32(q)) }
func (e EV) String() string  { return fmt.Sprintf("0x%08x", uint32(e)) }
