package wire

import (
	"encoding/binary"
	"hash/crc32"
	"math/rand/v2"
	"testing"
)

// refCRCRegister runs the reflected CRC-32 (polynomial 0x04C11DB7, bit
// reversed 0xEDB88320) one bit at a time over data, starting from reg, with
// no final inversion: the kernel's crc32_le(). Written out here so the test
// does not share code with the package (which uses hash/crc32).
func refCRCRegister(reg uint32, data []byte) uint32 {
	for _, b := range data {
		reg ^= uint32(b)
		for range 8 {
			if reg&1 != 0 {
				reg = reg>>1 ^ 0xEDB88320
			} else {
				reg >>= 1
			}
		}
	}
	return reg
}

// refICRC computes the wire bytes of the RoCEv2 ICRC of a frame whose
// UDP-carrying IPv6 header starts at ipOff, following the IBTA RoCEv2 annex
// as Soft-RoCE (drivers/infiniband/sw/rxe/rxe_icrc.c) implements it:
//
//  1. the register starts at 0xDEBB20E3, the CRC register after 8 bytes of
//     0xFF (the masked LRH of native InfiniBand) from the initial 0xFFFFFFFF;
//  2. the IPv6 header follows with traffic class, flow label and hop limit
//     set to all ones (version and payload length, next header and both
//     addresses stay covered); then UDP with the checksum set to 0xFFFF;
//     then BTH with its reserved byte 4 set to 0xFF;
//  3. then everything after BTH up to the ICRC field, payload and pad
//     included;
//  4. the register is inverted and stored least significant byte first.
func refICRC(frame []byte, ipOff int) [4]byte {
	ph := append([]byte(nil), frame[ipOff:ipOff+40+8+12]...)
	ph[0] |= 0x0F                          // traffic class high nibble
	ph[1], ph[2], ph[3] = 0xFF, 0xFF, 0xFF // traffic class low nibble + flow label
	ph[7] = 0xFF                           // hop limit
	ph[40+6], ph[40+7] = 0xFF, 0xFF        // UDP checksum
	ph[40+8+4] = 0xFF                      // BTH reserved byte
	reg := uint32(0xDEBB20E3)
	reg = refCRCRegister(reg, ph)
	reg = refCRCRegister(reg, frame[ipOff+60:len(frame)-4])
	var out [4]byte
	binary.LittleEndian.PutUint32(out[:], ^reg)
	return out
}

// The kernel's seed is what the text says it is.
func TestICRCSeedIsMaskedLRH(t *testing.T) {
	lrh := []byte{0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF}
	if got := refCRCRegister(0xFFFFFFFF, lrh); got != 0xDEBB20E3 {
		t.Fatalf("CRC register after the masked LRH = %#x, want 0xdebb20e3", got)
	}
}

func TestICRCMatchesReference(t *testing.T) {
	for _, c := range goldenCases(t) {
		var p Packet
		if err := (Decoder{}).Decode(c.frame, &p); err != nil || p.Trimmed {
			continue
		}
		want := refICRC(c.frame, p.InnerOff)
		got := c.frame[len(c.frame)-4:]
		if [4]byte(got) != want {
			t.Errorf("%s: ICRC on the wire %x, reference %x", c.name, got, want)
		}
		if ICRC(c.frame[p.InnerOff:len(c.frame)-4]) != binary.LittleEndian.Uint32(want[:]) {
			t.Errorf("%s: ICRC() disagrees with the reference", c.name)
		}
	}
}

// A fixed vector, so that a change in both the package and the reference
// (say, a changed mask) still fails: the frame is the SRv6 WRITE_ONLY golden
// frame, and the value was computed a third way, with Python's zlib.crc32
// over b"\xff"*8 + masked(IPv6+UDP+BTH) + rest, stored little-endian.
func TestICRCFixedVector(t *testing.T) {
	p := samplePacket(sampleKind{op: OpWriteOnly, encap: true})
	b := make([]byte, p.Len())
	n, _ := p.Encode(b)
	if got, want := refICRC(b[:n], EthLen+IPv6Len), icrcVectorWriteOnlyEncap; got != want {
		t.Fatalf("reference ICRC %x, frozen vector %x", got, want)
	}
}

// icrcVectorWriteOnlyEncap: see TestICRCFixedVector.
var icrcVectorWriteOnlyEncap = [4]byte{0x40, 0x73, 0xcd, 0x9f}

func TestICRCCoverage(t *testing.T) {
	for _, k := range []sampleKind{{op: OpWriteOnlyImm, encap: true, ts: true}, {op: OpSACK}, {op: OpNACK, encap: true}} {
		p := samplePacket(k)
		frame := make([]byte, p.Len())
		n, _ := p.Encode(frame)
		frame = frame[:n]
		var q Packet
		if err := (Decoder{}).Decode(frame, &q); err != nil {
			t.Fatal(err)
		}
		in := q.InnerOff
		masked := map[int]bool{}
		// Bits that change in the fabric or are not invariant: outer header
		// (all of it), inner traffic class / flow label / hop limit, UDP
		// checksum, BTH reserved byte 4.
		for i := EthLen; i < in; i++ {
			masked[i] = true
		}
		for _, i := range []int{in + 1, in + 2, in + 3, in + 7, in + 46, in + 47, in + 52} {
			masked[i] = true
		}
		maskedBitsB0 := byte(0x0F) // low nibble of byte 0 is traffic class
		for i := EthLen; i < len(frame)-ICRCLen; i++ {
			for bit := 0; bit < 8; bit++ {
				f := append([]byte(nil), frame...)
				f[i] ^= 1 << bit
				isMasked := masked[i] || (i == in && (1<<bit)&maskedBitsB0 != 0)
				// Validate the ICRC of the modified frame without re-decoding
				// (a flipped length would not decode at all).
				ok := ICRC(f[in:len(f)-ICRCLen]) == le.Uint32(f[len(f)-ICRCLen:])
				switch {
				case isMasked && !ok:
					t.Errorf("%v: flipping masked byte %d bit %d broke the ICRC", k, i, bit)
				case !isMasked && ok:
					t.Errorf("%v: flipping covered byte %d bit %d went unnoticed", k, i, bit)
				}
			}
		}
		// The ICRC field itself.
		f := append([]byte(nil), frame...)
		f[len(f)-1] ^= 0x80
		if CheckICRC(f, &q) {
			t.Errorf("%v: flipped ICRC byte accepted", k)
		}
	}
}

// Whole-field changes a switch makes: none may break the ICRC.
func TestICRCSurvivesFabricRewrites(t *testing.T) {
	p := samplePacket(sampleKind{op: OpWriteMiddle, encap: true})
	frame := make([]byte, p.Len())
	n, _ := p.Encode(frame)
	frame = frame[:n]
	var q Packet
	(Decoder{}).Decode(frame, &q)
	outer, inner := IPv6(frame[EthLen:]), IPv6(frame[q.InnerOff:])
	rewrites := map[string]func(){
		"outer hop limit":   func() { outer.SetHopLimit(1) },
		"outer dscp":        func() { outer.SetDSCP(DSCPTrimmed) },
		"outer ecn CE":      func() { outer.SetECN(ECNCE) },
		"outer dst (shift)": func() { outer.SetDst(F3216.Shift(outer.Dst())) },
		"outer src":         func() { outer.SetSrc(mustAddr("fd00::99")) },
		"inner hop limit":   func() { inner.SetHopLimit(7) },
		"inner tc":          func() { inner.SetTrafficClass(0xFF) },
		"inner flow label":  func() { inner.SetFlowLabel(0xABCDE) },
		"udp checksum":      func() { UDP(frame[q.InnerOff+IPv6Len:]).SetChecksum(0x1234) },
		"bth reserved byte": func() { frame[q.BTHOff+4] = 0x5A },
	}
	for name, rw := range rewrites {
		saved := append([]byte(nil), frame...)
		rw()
		if !CheckICRC(frame, &q) {
			t.Errorf("%s broke the ICRC", name)
		}
		copy(frame, saved)
	}
}

func TestICRCInPlaceAgreesAndRestores(t *testing.T) {
	for _, c := range goldenCases(t) {
		var p Packet
		if (Decoder{}).Decode(c.frame, &p) != nil || p.Trimmed {
			continue
		}
		f := append([]byte(nil), c.frame...)
		// Non-zero values in the masked fields, so restoring is visible.
		IPv6(f[p.InnerOff:]).SetHopLimit(3)
		UDP(f[p.InnerOff+IPv6Len:]).SetChecksum(0xABCD)
		f[p.BTHOff+4] = 0x42
		saved := append([]byte(nil), f...)
		body := f[p.InnerOff : len(f)-ICRCLen]
		if a, b := icrcInPlace(body), ICRC(body); a != b {
			t.Errorf("%s: icrcInPlace %#x, ICRC %#x", c.name, a, b)
		}
		if firstDiff(f, saved) != len(f) {
			t.Errorf("%s: icrcInPlace left byte %d changed", c.name, firstDiff(f, saved))
		}
	}
}

// CheckICRCInPlace gives CheckICRC's verdict on every golden frame, on the
// same frame with its ICRC field broken and with a covered byte flipped, and
// leaves every frame as it found it.
func TestCheckICRCInPlaceAgreesAndRestores(t *testing.T) {
	for _, c := range goldenCases(t) {
		var p Packet
		if (Decoder{}).Decode(c.frame, &p) != nil {
			continue
		}
		good := append([]byte(nil), c.frame...)
		IPv6(good[p.InnerOff:]).SetHopLimit(3) // masked: the verdict stays
		UDP(good[p.InnerOff+IPv6Len:]).SetChecksum(0xABCD)
		badICRC := append([]byte(nil), good...)
		badICRC[len(badICRC)-1] ^= 0x01
		badBody := append([]byte(nil), good...)
		badBody[p.BTHOff+1] ^= 0x10 // BTH flags: covered
		for _, v := range []struct {
			name string
			f    []byte
			want bool
		}{{"as sent", good, !p.Trimmed}, {"ICRC flipped", badICRC, false}, {"BTH flipped", badBody, false}} {
			saved := append([]byte(nil), v.f...)
			ref := CheckICRC(v.f, &p)
			got := CheckICRCInPlace(v.f, &p)
			if got != ref || got != v.want {
				t.Errorf("%s %s: CheckICRCInPlace %v, CheckICRC %v, want %v", c.name, v.name, got, ref, v.want)
			}
			if i := firstDiff(v.f, saved); i != len(v.f) {
				t.Errorf("%s %s: CheckICRCInPlace left byte %d changed", c.name, v.name, i)
			}
		}
	}
}

// ICRC, icrcInPlace and the bit-at-a-time reference agree on random frames
// of every length around the boundaries of the header loop (60 bytes) and of
// hash/crc32's CLMUL path (64 bytes, then 16-byte blocks), and on the
// lengths the NIC sends (a 2 B write, a 2 KiB and a 4 KiB payload).
func TestICRCRandomFramesMatchReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(12, 34))
	var lens []int
	for n := IPv6Len + UDPLen + BTHLen; n < 60+64+40; n++ {
		lens = append(lens, n)
	}
	lens = append(lens, 60+16+2+2, 60+2048+4, 60+4096+12, 60+4096+15)
	for _, n := range lens {
		for range 4 {
			frame := make([]byte, n+ICRCLen)
			for i := range frame {
				frame[i] = byte(rng.Uint32())
			}
			body := frame[:n]
			want := binary.LittleEndian.Uint32(func() []byte { r := refICRC(frame, 0); return r[:] }())
			if got := ICRC(body); got != want {
				t.Fatalf("len %d: ICRC %#x, reference %#x", n, got, want)
			}
			saved := append([]byte(nil), body...)
			if got := icrcInPlace(body); got != want {
				t.Fatalf("len %d: icrcInPlace %#x, reference %#x", n, got, want)
			}
			if firstDiff(body, saved) != len(body) {
				t.Fatalf("len %d: icrcInPlace left byte %d changed", n, firstDiff(body, saved))
			}
		}
	}
	if got := ICRC(make([]byte, IPv6Len+UDPLen+BTHLen-1)); got != 0 {
		t.Errorf("ICRC of a frame shorter than IPv6+UDP+BTH = %#x, want 0", got)
	}
}

// TestCRCUpdate: crcUpdate is crc32.Update for every length around the
// CLMUL cut-over and the 16- and 8-byte remainders, from any starting CRC.
func TestCRCUpdate(t *testing.T) {
	b := make([]byte, 4300)
	for i := range b {
		b[i] = byte(i*131 + i>>8)
	}
	for _, seed := range []uint32{0, icrcSeed, 0xDEADBEEF} {
		for n := 0; n < 300; n++ {
			if got, want := crcUpdate(seed, b[:n]), crc32.Update(seed, crc32.IEEETable, b[:n]); got != want {
				t.Fatalf("seed %#x, %d bytes: %#x, want %#x", seed, n, got, want)
			}
		}
		for _, n := range []int{2136, 2137, 2143, 2144, 4184, 4199} {
			if got, want := crcUpdate(seed, b[3:3+n]), crc32.Update(seed, crc32.IEEETable, b[3:3+n]); got != want {
				t.Fatalf("seed %#x, %d bytes at offset 3: %#x, want %#x", seed, n, got, want)
			}
		}
	}
}
