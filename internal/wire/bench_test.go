package wire

import "testing"

// Benchmarks for the hot path. Run with:
//
//	go test ./internal/wire -run '^$' -bench . -benchmem
//
// BenchmarkCopyBaseline copies a frame of the same size: encode and decode
// costs are best read as ratios to it on the same machine and run.

func benchPacket(payload int) Packet {
	p := samplePacket(sampleKind{op: OpWriteOnlyImm, encap: true, ts: true})
	p.Payload = make([]byte, payload)
	return p
}

func BenchmarkEncode(b *testing.B) {
	for _, c := range []struct {
		name string
		p    Packet
	}{
		{"data_srv6_ts_imm_0B", benchPacket(0)},
		{"data_srv6_ts_imm_4096B", benchPacket(4096)},
		{"sack", samplePacket(sampleKind{op: OpSACK})},
	} {
		b.Run(c.name, func(b *testing.B) {
			buf := make([]byte, c.p.Len())
			b.ReportAllocs()
			b.SetBytes(int64(len(buf)))
			for b.Loop() {
				c.p.PSN = c.p.PSN.Add(1)
				if _, err := c.p.Encode(buf); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkDecode(b *testing.B) {
	for _, c := range []struct {
		name string
		p    Packet
	}{
		{"data_srv6_ts_imm_0B", benchPacket(0)},
		{"data_srv6_ts_imm_4096B", benchPacket(4096)},
		{"sack", samplePacket(sampleKind{op: OpSACK})},
	} {
		b.Run(c.name, func(b *testing.B) {
			buf := make([]byte, c.p.Len())
			n, _ := c.p.Encode(buf)
			var q Packet
			d := Decoder{}
			b.ReportAllocs()
			b.SetBytes(int64(n))
			for b.Loop() {
				if err := d.Decode(buf[:n], &q); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkCheckICRC checks the ICRC of a 2 B write (the latency path), a
// SACK and data frames of 2 KiB (what mrc-nicd sends at MTU 2048) and 4 KiB.
func BenchmarkCheckICRC(b *testing.B) {
	for _, c := range []struct {
		name string
		p    Packet
	}{
		{"data_2B", benchPacket(2)},
		{"sack", samplePacket(sampleKind{op: OpSACK})},
		{"data_2048B", benchPacket(2048)},
		{"data_4096B", benchPacket(4096)},
	} {
		for _, inPlace := range []bool{false, true} {
			check, name := CheckICRC, c.name
			if inPlace {
				check, name = CheckICRCInPlace, c.name+"/inplace"
			}
			b.Run(name, func(b *testing.B) {
				buf := make([]byte, c.p.Len())
				n, _ := c.p.Encode(buf)
				var q Packet
				if err := (Decoder{}).Decode(buf[:n], &q); err != nil {
					b.Fatal(err)
				}
				b.ReportAllocs()
				b.SetBytes(int64(n))
				for b.Loop() {
					if !check(buf[:n], &q) {
						b.Fatal("bad ICRC")
					}
				}
			})
		}
	}
}

func BenchmarkCopyBaseline(b *testing.B) {
	p := benchPacket(4096)
	src, dst := make([]byte, p.Len()), make([]byte, p.Len())
	b.ReportAllocs()
	b.SetBytes(int64(len(src)))
	for b.Loop() {
		copy(dst, src)
	}
}

func BenchmarkTrim(b *testing.B) {
	p := benchPacket(4096)
	orig := make([]byte, p.Len())
	n, _ := p.Encode(orig)
	buf := make([]byte, n)
	b.ReportAllocs()
	for b.Loop() {
		copy(buf[:200], orig[:200]) // Trim touches only the headers
		if _, ok := Trim(buf[:n], false); !ok {
			b.Fatal("trim refused")
		}
	}
}

func BenchmarkUSIDShift(b *testing.B) {
	c := sampleUSID
	b.ReportAllocs()
	for b.Loop() {
		c = F3216.Shift(c)
		if F3216.ArgIsZero(c) {
			c = sampleUSID
		}
	}
}

// TestZeroAllocs: the hot-path operations never allocate (a correctness
// property: a per-packet allocation would put the GC on the data path).
func TestZeroAllocs(t *testing.T) {
	p := benchPacket(4096)
	buf := make([]byte, p.Len())
	n, _ := p.Encode(buf)
	frame := append([]byte(nil), buf[:n]...)
	var q Packet
	d := Decoder{}
	us := make([]USID, 0, 8)
	ops := map[string]func(){
		"Encode":           func() { p.Encode(buf) },
		"Decode":           func() { d.Decode(frame, &q) },
		"CheckICRC":        func() { CheckICRC(frame, &q) },
		"CheckICRCInPlace": func() { CheckICRCInPlace(frame, &q) },
		"ICRC":             func() { ICRC(frame[EthLen+IPv6Len : n-ICRCLen]) },
		"Trim": func() {
			copy(buf, frame)
			Trim(buf[:n], true)
		},
		"USID": func() {
			c := F3216.Shift(sampleUSID)
			_ = F3216.Active(c) + USID(len(F3216.USIDs(us[:0], c)))
			_ = F3216.ArgIsZero(c) && F3216.MatchesUN(c, c, 1)
		},
		"EV": func() { _ = EVFromWire(p.EV.SrcPort(), p.EV.FlowLabel()).Plane() },
	}
	for name, f := range ops {
		if a := testing.AllocsPerRun(100, f); a != 0 {
			t.Errorf("%s allocates %.1f times per call, want 0", name, a)
		}
	}
}
