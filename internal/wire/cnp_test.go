package wire

import (
	"bytes"
	"encoding/hex"
	"testing"
)

// TestCNPLayout checks the CNP against RoCEv2 annex A17.9.2 byte by byte,
// independently of the golden file: BTH opcode 0x81, pad 0, TVer 0, the
// P_Key, the destination QP, PSN 0; then 16 reserved zero bytes; then the
// ICRC, and nothing else (UDP length 8+12+16+4 = 40).
func TestCNPLayout(t *testing.T) {
	p := Packet{Src: sampleSrc, Dst: sampleDst, DSCP: DSCPControl, ECN: ECNNotECT,
		EV: MakeEV(0, 0, 0xC123), Opcode: OpCNP, PKey: 0xFFFF, DestQP: 0x012345}
	buf := make([]byte, p.Len())
	n, err := p.Encode(buf)
	if err != nil {
		t.Fatal(err)
	}
	f := buf[:n]
	if n != EthLen+IPv6Len+40 {
		t.Fatalf("CNP frame is %d bytes, want %d", n, EthLen+IPv6Len+40)
	}
	u := f[EthLen+IPv6Len:]
	if got := hex.EncodeToString(u[:8]); got != "c12312b700280000" {
		t.Errorf("UDP header %s, want source port c123, 4791, length 40, checksum 0", got)
	}
	bth := "8100ffff" + "00012345" + "00000000"
	if got := hex.EncodeToString(u[8:20]); got != bth {
		t.Errorf("BTH %s, want %s", got, bth)
	}
	if !bytes.Equal(u[20:36], make([]byte, 16)) {
		t.Errorf("reserved bytes %x, want 16 zero bytes", u[20:36])
	}
	var d Packet
	if err := (Decoder{}).Decode(f, &d); err != nil {
		t.Fatalf("decode: %v", err)
	}
	if d.Opcode != OpCNP || d.DestQP != 0x012345 || !CheckICRC(f, &d) {
		t.Fatalf("decoded %v QP %#x, ICRC ok %v", d.Opcode, d.DestQP, CheckICRC(f, &d))
	}
}
