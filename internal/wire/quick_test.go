package wire

import (
	"bytes"
	"net/netip"
	"testing"
)

func TestQuickRoundTrip(t *testing.T) {
	src := Addr128FromNetip(netip.MustParseAddr("fd00:1:0::1"))
	dst := Addr128FromNetip(netip.MustParseAddr("fd00:1:0::2"))
	blk := Addr128FromNetip(netip.MustParseAddr("5f00:1::"))
	c, err := F3216.Build(blk, 0x4000, 0x0100, 0x4100, 0xc000)
	if err != nil {
		t.Fatal(err)
	}
	p := Packet{Encap: true, OuterSrc: src, OuterDst: c, Src: src, Dst: dst, DSCP: DSCPTrimmable, ECN: ECNECT0,
		EV: MakeEV(1, 2, 77), Opcode: OpWriteOnlyImm, DestQP: 0x123, PSN: 0xFFFFFF, MSN: 3, RQMSN: 1,
		HasTS: true, TS: 999, FType: 1, VA: 0x1000, RKey: 7, DMALen: 5, Imm: 42, Payload: []byte("hello")}
	buf := make([]byte, 4096)
	n, err := p.Encode(buf)
	if err != nil {
		t.Fatal(err)
	}
	var q Packet
	if err := (Decoder{}).Decode(buf[:n], &q); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(q.Payload, p.Payload) || q.Imm != 42 || q.PSN != 0xFFFFFF || q.EV != p.EV || q.OuterDst != c || !CheckICRC(buf[:n], &q) {
		t.Fatalf("mismatch %+v", q)
	}
	buf[n-6] ^= 1
	if CheckICRC(buf[:n], &q) {
		t.Fatal("flipped bit not caught")
	}
	buf[n-6] ^= 1
	m, ok := Trim(buf[:n], false)
	if !ok {
		t.Fatal("trim")
	}
	if err := (Decoder{}).Decode(buf[:m], &q); err != nil || !q.Trimmed {
		t.Fatalf("trimmed decode %v %v", err, q.Trimmed)
	}
	if F3216.Active(F3216.Shift(c)) != 0x0100 || F3216.ArgIsZero(c) {
		t.Fatal("usid")
	}
}
