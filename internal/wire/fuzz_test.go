package wire

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"testing"
)

// Seed corpora live in testdata/fuzz/Fuzz*/ (committed). The golden frames
// are written there by: go test ./internal/wire -run TestGolden -update
// Run a fuzzer with e.g.: go test ./internal/wire -run '^$' -fuzz '^FuzzDecode$' -fuzztime 30s

func writeSeed(t *testing.T, fuzzer, name string, args ...any) {
	t.Helper()
	dir := filepath.Join("testdata", "fuzz", fuzzer)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	body := "go test fuzz v1\n"
	for _, a := range args {
		switch v := a.(type) {
		case []byte:
			body += "[]byte(" + strconv.Quote(string(v)) + ")\n"
		default:
			body += fmt.Sprintf("%T(%#v)\n", v, v)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestGoldenSeeds (with -update) refreshes the committed seed corpora from
// the golden frames and a few hand-picked edge inputs.
func TestGoldenSeeds(t *testing.T) {
	if !*update {
		t.Skip("only with -update")
	}
	for _, c := range goldenCases(t) {
		writeSeed(t, "FuzzDecode", "golden_"+c.name, c.frame)
	}
	gc := goldenCases(t)
	writeSeed(t, "FuzzDecode", "truncated_bth", gc[0].frame[:70])
	writeSeed(t, "FuzzDecode", "empty", []byte{})
	blk := mustAddr("5f00:1::")
	for i, s := range []struct {
		c   Addr128
		sel uint8
	}{{sampleUSID, 1}, {blk, 1}, {mustAddr("5f00:4002:102:4102:c002:1:2:3"), 0}, {mustAddr("5f00:1:2:4002:102:c002::"), 2}, {mustAddr("5f00:1:4002:0:4102::"), 1}} {
		writeSeed(t, "FuzzUSID", fmt.Sprintf("seed%d", i), s.c.hi, s.c.lo, s.sel)
	}
	for i, ev := range []uint32{0, 0xFFFFFFFF, uint32(MakeEV(2, 1, 0x5a5a5)), 0x0000FFFF, 0xFFFF0000} {
		writeSeed(t, "FuzzEV", fmt.Sprintf("seed%d", i), ev, uint16(ev), ev>>12)
	}
}

// FuzzDecode: arbitrary bytes never panic the decoder, ICRC check or Trim;
// whatever decodes re-encodes to its canonical form (canon_test.go), which
// decodes to the same Packet and re-encodes to itself.
func FuzzDecode(f *testing.F) {
	for _, c := range goldenCases(f) {
		f.Add(c.frame)
	}
	f.Fuzz(func(t *testing.T, frame []byte) {
		var p Packet
		err := (Decoder{}).Decode(frame, &p)
		trimmed := append([]byte(nil), frame...)
		if n, ok := Trim(trimmed, len(frame)%2 == 0); ok {
			var q Packet
			if err := (Decoder{}).Decode(trimmed[:n], &q); err != nil || !q.Trimmed {
				t.Fatalf("Trim output does not decode as trimmed: %v", err)
			}
		}
		if err != nil {
			return
		}
		if q, ok := PeekDestQP(frame); !ok || q != p.DestQP {
			t.Fatalf("PeekDestQP = %#x, %v; Decode found %#x", q, ok, p.DestQP)
		}
		saved := append([]byte(nil), frame...)
		if a, b := CheckICRC(frame, &p), CheckICRCInPlace(frame, &p); a != b {
			t.Fatalf("CheckICRC %v, CheckICRCInPlace %v", a, b)
		}
		if !bytes.Equal(frame, saved) {
			t.Fatalf("CheckICRCInPlace changed byte %d", firstDiff(frame, saved))
		}
		buf := make([]byte, p.Len())
		n, err := p.Encode(buf)
		if err != nil {
			t.Fatalf("decoded packet does not encode: %v\n%+v", err, p)
		}
		y := buf[:n]
		if want := canonical(frame); !bytes.Equal(y, want) {
			t.Fatalf("re-encode differs from the canonical frame at byte %d\n got %x\nwant %x", firstDiff(y, want), y, want)
		}
		var q Packet
		if err := (Decoder{}).Decode(y, &q); err != nil {
			t.Fatalf("re-encoded frame does not decode: %v", err)
		}
		if p.HopLimit == 0 {
			p.HopLimit = 64
		}
		if !bytes.Equal(p.Payload, q.Payload) || !reflect.DeepEqual(comparable(p), comparable(q)) {
			t.Fatalf("decode(encode(decode(x))) != decode(x)\n got %+v\nwant %+v", q, p)
		}
		if !p.Trimmed && !CheckICRC(y, &q) {
			t.Fatal("re-encoded frame has a bad ICRC")
		}
	})
}

// refShift is the uN shift on bytes: the bytes after the block move left by
// two, zero fill.
func refShift(c Addr128, blockBits int) Addr128 {
	b := c.As16()
	k := blockBits / 8
	copy(b[k:], b[k+2:])
	b[14], b[15] = 0, 0
	return Addr128From16(b)
}

// FuzzUSID: the container operations agree with a byte-level reference for
// every block length.
func FuzzUSID(f *testing.F) {
	f.Add(sampleUSID.hi, sampleUSID.lo, uint8(1))
	f.Fuzz(func(t *testing.T, hi, lo uint64, sel uint8) {
		bits := []int{16, 32, 48}[int(sel)%3]
		fm := USIDFormat{BlockBits: bits}
		c := Addr128{hi, lo}
		b := c.As16()
		k := bits / 8
		blk := fm.Block(c)
		bb := blk.As16()
		if !bytes.Equal(bb[:k], b[:k]) || !bytes.Equal(bb[k:], make([]byte, 16-k)) {
			t.Fatalf("Block(%v) = %v", c, blk)
		}
		if got, want := fm.Active(c), USID(b[k])<<8|USID(b[k+1]); got != want {
			t.Fatalf("Active = %#x, want %#x", got, want)
		}
		if got, want := fm.Shift(c), refShift(c, bits); got != want {
			t.Fatalf("Shift(%v) = %v, want %v", c, got, want)
		}
		if got, want := fm.ArgIsZero(c), bytes.Equal(b[k+2:], make([]byte, 16-k-2)); got != want {
			t.Fatalf("ArgIsZero(%v) = %v, want %v", c, got, want)
		}
		if !fm.MatchesUN(c, blk, fm.Active(c)) || fm.MatchesUN(c, blk, fm.Active(c)^1) {
			t.Fatalf("MatchesUN wrong for %v", c)
		}
		if pf := fm.Prefix(blk, fm.Active(c)); !pf.Contains(c.Netip()) || pf.Bits() != bits+16 {
			t.Fatalf("Prefix %v does not hold %v", pf, c)
		}
		// After Slots() shifts only the block is left.
		s := c
		for range fm.Slots() {
			s = fm.Shift(s)
		}
		if s != blk {
			t.Fatalf("%d shifts left %v, want the bare block %v", fm.Slots(), s, blk)
		}
		// Build(Block, USIDs...) rebuilds c up to its first zero uSID.
		us := fm.USIDs(nil, c)
		r, err := fm.Build(blk, us...)
		if err != nil {
			t.Fatal(err)
		}
		rb := r.As16()
		n := k + 2*len(us)
		if !bytes.Equal(rb[:n], b[:n]) || !bytes.Equal(rb[n:], make([]byte, 16-n)) {
			t.Fatalf("Build(USIDs(%v)) = %v", c, r)
		}
	})
}

// FuzzEV: the EV survives the trip through UDP source port and flow label,
// both as numbers and through a real frame, and its fields rebuild it.
func FuzzEV(f *testing.F) {
	f.Add(uint32(MakeEV(2, 1, 7)), uint16(1), uint32(0xFFFFF))
	f.Fuzz(func(t *testing.T, ev uint32, sport uint16, flow uint32) {
		e := EV(ev)
		if e.FlowLabel() > 0xFFFF {
			t.Fatalf("flow label %#x uses the top 4 bits", e.FlowLabel())
		}
		if got := EVFromWire(e.SrcPort(), e.FlowLabel()); got != e {
			t.Fatalf("EVFromWire(split(%v)) = %v", e, got)
		}
		if got := EVFromWire(sport, flow); got.SrcPort() != sport || got.FlowLabel() != flow&0xFFFF {
			t.Fatalf("EVFromWire(%#x, %#x) = %v", sport, flow, got)
		}
		if got := MakeEV(e.Plane(), e.T1(), e.Entropy()); got != e || e.Plane() >= MaxPlanes {
			t.Fatalf("MakeEV(fields(%v)) = %v", e, got)
		}
		p := samplePacket(sampleKind{op: OpSACK, encap: ev&1 == 1})
		p.EV = e
		var buf [256]byte
		n, err := p.Encode(buf[:])
		if err != nil {
			t.Fatal(err)
		}
		var q Packet
		if err := (Decoder{}).Decode(buf[:n], &q); err != nil || q.EV != e {
			t.Fatalf("EV through a frame: %v, %v", q.EV, err)
		}
		in := IPv6(buf[q.InnerOff:])
		if in.FlowLabel() != e.FlowLabel() || IPv6(buf[EthLen:]).FlowLabel() != e.FlowLabel() || UDP(buf[q.InnerOff+IPv6Len:]).SrcPort() != e.SrcPort() {
			t.Fatal("EV not in both flow labels and the source port")
		}
	})
}
