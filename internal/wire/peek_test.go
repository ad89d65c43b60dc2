package wire

import "testing"

// TestPeekDestQP: on every golden frame (plain and IPv6-in-IPv6, data,
// SACK, CNP, trimmed) the peek finds the QP Decode finds; on frames too
// short or of another protocol it says so instead of guessing.
func TestPeekDestQP(t *testing.T) {
	for _, c := range goldenCases(t) {
		var p Packet
		if err := (Decoder{}).Decode(c.frame, &p); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if q, ok := PeekDestQP(c.frame); !ok || q != p.DestQP {
			t.Errorf("%s: PeekDestQP = %#x, %v; want %#x", c.name, q, ok, p.DestQP)
		}
	}
	f := goldenCases(t)[0].frame
	var p Packet
	if err := (Decoder{}).Decode(f, &p); err != nil {
		t.Fatal(err)
	}
	bthEnd := p.InnerOff + IPv6Len + UDPLen + BTHLen
	notUDP := append([]byte(nil), f...)
	IPv6(notUDP[p.InnerOff:]).SetNextHeader(6) // TCP
	notIPv6 := append([]byte(nil), f...)
	notIPv6[12], notIPv6[13] = 0x08, 0x00
	for name, b := range map[string][]byte{"empty": nil, "ethernet only": f[:EthLen], "cut in the BTH": f[:bthEnd-1],
		"not UDP": notUDP, "IPv4 EtherType": notIPv6} {
		if q, ok := PeekDestQP(b); ok {
			t.Errorf("%s: PeekDestQP = %#x, true; want false", name, q)
		}
	}
	if _, ok := PeekDestQP(f[:bthEnd]); !ok {
		t.Error("a frame that ends right after its BTH: PeekDestQP = false")
	}
}
