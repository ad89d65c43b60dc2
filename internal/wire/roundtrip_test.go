package wire

import (
	"bytes"
	"errors"
	"reflect"
	"testing"
)

// edgeCases are canonical Packets (HasTS only on data, HopLimit and DstPort
// non-zero) at the edges of every field.
func edgeCases() map[string]Packet {
	base := func(op Opcode, encap bool) Packet {
		return samplePacket(sampleKind{op: op, encap: encap})
	}
	big := make([]byte, 4096) // largest MTU payload
	for i := range big {
		big[i] = byte(i * 7)
	}
	cs := map[string]Packet{}
	add := func(name string, p Packet) { cs[name] = p }

	for _, k := range sampleKinds() {
		add("kind/"+k.name, samplePacket(k))
	}
	p := base(OpWriteMiddle, true)
	p.PSN = PSNMask
	add("psn_max", p)
	p = base(OpWriteMiddle, false)
	p.PSN = 0
	add("psn_zero", p)
	p = base(OpWriteOnly, true)
	p.DestQP = QPNMask
	add("qpn_max", p)
	p = base(OpWriteOnly, false)
	p.Payload = nil
	add("payload_empty", p)
	p = base(OpWriteOnlyImm, false)
	p.Payload = nil
	add("payload_empty_imm", p)
	for _, n := range []int{1, 2, 3, 5} {
		p = base(OpWriteFirst, false)
		p.Payload = big[:n]
		add("payload_pad"+string(rune('0'+n)), p)
	}
	p = base(OpWriteMiddle, true)
	p.Payload = big
	p.HasTS, p.TS, p.TSR, p.FType = true, 0xFFFF, true, 0xF
	add("payload_4096_ts_encap", p)
	p = base(OpWriteLastImm, false)
	p.MSN, p.RQMSN, p.Imm = 0xFFFF, 0xFFFF, 0xFFFFFFFF
	p.VA, p.RKey, p.DMALen = ^uint64(0), ^uint32(0), ^uint32(0)
	p.SE, p.MigReq, p.AckReq, p.R, p.Rtx = true, true, true, true, true
	p.PKey = 0
	add("data_all_ones", p)
	p = base(OpWriteOnly, false)
	p.EV, p.DSCP, p.ECN, p.HopLimit, p.DstPort = 0xFFFFFFFF, 63, ECNCE, 255, UDPPortAlias
	add("ev_max_tc_max_alias_port", p)
	p = base(OpWriteOnly, false)
	p.EV, p.DSCP, p.ECN, p.HopLimit = 0, 0, 0, 1
	add("ev_zero_tc_zero", p)

	p = base(OpSACK, false)
	p.SACK.Bitmap = ^uint64(0)
	p.SACK.SackOffset = -32768
	p.SACK.AckPSNOffset = -1
	p.SACK.CackPSN = PSNMask
	p.SACK.M = MAlwaysSkip
	p.SACK.Probe = true
	p.SACK.Entropy = 0xFFFFFFFF
	p.SACK.CCType, p.SACK.CCFlags, p.SACK.MPR = 0xF, 0xF, 0xFF
	p.SACK.TSEcho, p.SACK.OOOCount, p.SACK.RcvCwndPen, p.SACK.RcvdBytes = 0xFFFF, 0x7FFF, 0x7F, 0xFFFFFF
	add("sack_all_max_negative_offset", p)
	p = base(OpSACK, true)
	p.SACK = SACKFields{SackOffset: 32767}
	add("sack_zero_bitmap_max_offset", p)
	p = base(OpNACK, false)
	p.NACK = NACKFields{Reason: NackWImmLimit, Vendor: 0xFF, Entropy: 0xFFFFFFFF, SPDCID: 0xFFFF,
		DPDCID: 0xFFFF, NackPSN: PSNMask, CCType: 0xF, CCFlags: 0xF, Timestamp: 0xFFFF}
	add("nack_all_max", p)
	for _, r := range []NackReason{NackTrimmedLastHop, NackNoBitmap, NackNoPktBuffer, NackNoResource, NackPSNOutOfWindow, NackUnexpEvent} {
		p = base(OpNACK, true)
		p.NACK.Reason = r
		add("nack_reason_"+r.String(), p)
	}
	p = base(OpAck, false)
	p.Syndrome, p.AckMSN = 0xFF, 0xFFFFFF
	add("ack_max", p)
	p = base(OpProbe, true)
	p.Probe = ProbeFields{ProbeID: 0xFFFF, SPDCID: 0xFFFF, DPDCID: 0xFFFF, Timestamp: 0xFFFF, TSR: true, FType: 0xF, Vendor: 0xFF}
	add("probe_max", p)
	p = base(OpEndpointReq, false)
	p.Endpoint = EndpointFields{Op: 3, PortStatusMask: 0xFFFFFFFF, Timestamp: 0xFFFF, Vendor: 0xFF}
	add("erth_max", p)
	p = base(OpEndpointResp, true)
	p.Endpoint = EndpointFields{Op: EPEVProbe, PortStatusMask: 0x80000001, Timestamp: 0xFFFF, Vendor: 0xFF}
	add("eeth_max", p)

	p = base(OpWriteOnlyImm, true)
	p.HasTS, p.TS, p.FType = true, 7, 1
	p.Payload, p.Trimmed, p.PadCount, p.DSCP = nil, true, 3, DSCPTrimmed
	add("trimmed_ts_imm_encap", p)
	p = base(OpWriteMiddle, false)
	p.Payload, p.Trimmed, p.PadCount, p.DSCP = nil, true, 0, DSCPTrimmedLastHop
	add("trimmed_lasthop", p)
	return cs
}

// comparable strips what Decode fills in beyond the Packet's own fields.
func comparable(p Packet) Packet {
	p.ICRC, p.InnerOff, p.BTHOff, p.PayOff = 0, 0, 0, 0
	p.Payload = nil
	return p
}

func TestRoundTrip(t *testing.T) {
	for name, x := range edgeCases() {
		t.Run(name, func(t *testing.T) {
			buf := make([]byte, x.Len()+8)
			n, err := x.Encode(buf)
			if err != nil {
				t.Fatalf("encode: %v", err)
			}
			if n != x.Len() {
				t.Fatalf("Encode wrote %d bytes, Len says %d", n, x.Len())
			}
			frame := buf[:n]
			if !bytes.Equal(canonical(frame), frame) {
				t.Fatalf("Encode output is not in canonical form (first difference at byte %d)", firstDiff(canonical(frame), frame))
			}
			var y Packet
			if err := (Decoder{}).Decode(frame, &y); err != nil {
				t.Fatalf("decode: %v", err)
			}
			if !bytes.Equal(y.Payload, x.Payload) {
				t.Fatalf("payload: got %d bytes, want %d", len(y.Payload), len(x.Payload))
			}
			if !reflect.DeepEqual(comparable(y), comparable(x)) {
				t.Fatalf("decode(encode(x)) != x\n got %+v\nwant %+v", comparable(y), comparable(x))
			}
			if !x.Trimmed && !CheckICRC(frame, &y) {
				t.Fatal("ICRC does not check")
			}
			if x.Trimmed && y.ICRC != 0 {
				t.Fatal("trimmed frame reports an ICRC")
			}
			// Offsets Decode reports point at the headers they name.
			if Opcode(frame[y.BTHOff]) != x.Opcode || IPv6(frame[y.InnerOff:]).NextHeader() != ProtoUDP {
				t.Fatalf("offsets wrong: inner %d bth %d", y.InnerOff, y.BTHOff)
			}
			if y.PayOff+len(y.Payload) > len(frame) || (len(x.Payload) > 0 && &frame[y.PayOff] != &y.Payload[0]) {
				t.Fatal("Payload does not alias the frame at PayOff")
			}
		})
	}
}

// TestTrimMatchesEncodeTrimmed: the reference trimming of an encoded frame is
// what Encode writes for the same packet with Trimmed set (modulo the inner
// traffic class, which Trim leaves alone).
func TestTrimMatchesEncodeTrimmed(t *testing.T) {
	for _, k := range sampleKinds() {
		if !k.op.IsData() {
			continue
		}
		for _, lastHop := range []bool{false, true} {
			p := samplePacket(k)
			p.Payload = p.Payload[:13] // pad 3
			buf := make([]byte, p.Len())
			n, _ := p.Encode(buf)
			m, ok := Trim(buf[:n], lastHop)
			if !ok {
				t.Fatalf("%s: Trim refused", k.name)
			}
			q := p
			q.Payload, q.Trimmed, q.PadCount = nil, true, 3
			q.DSCP = DSCPTrimmed
			if lastHop {
				q.DSCP = DSCPTrimmedLastHop
			}
			want := make([]byte, q.Len())
			if _, err := q.Encode(want); err != nil {
				t.Fatalf("%s: encode trimmed: %v", k.name, err)
			}
			if got := canonical(buf[:m]); !bytes.Equal(got, want) {
				t.Errorf("%s lastHop=%v: Trim and Encode(Trimmed) differ at byte %d", k.name, lastHop, firstDiff(got, want))
			}
			if _, again := Trim(buf[:m], lastHop); again {
				t.Errorf("%s: a trimmed frame was trimmed again", k.name)
			}
		}
	}
}

func TestEncodeRejects(t *testing.T) {
	ok := samplePacket(sampleKind{op: OpWriteOnly})
	cases := []struct {
		name string
		mod  func(*Packet)
		want error
	}{
		{"unknown opcode", func(p *Packet) { p.Opcode = 0x0A }, ErrOpcode},
		{"psn > 24 bits", func(p *Packet) { p.PSN = 1 << 24 }, ErrField},
		{"qpn > 24 bits", func(p *Packet) { p.DestQP = 1 << 24 }, ErrField},
		{"dscp > 63", func(p *Packet) { p.DSCP = 64 }, ErrField},
		{"ecn > 3", func(p *Packet) { p.ECN = 4 }, ErrField},
		{"cack psn > 24 bits", func(p *Packet) { p.SACK.CackPSN = 1 << 24 }, ErrField},
		{"payload on a SACK", func(p *Packet) { p.Opcode = OpSACK }, ErrPayload},
		{"trimmed with payload", func(p *Packet) { p.Trimmed, p.DSCP = true, DSCPTrimmed }, ErrField},
		{"trimmed with data dscp", func(p *Packet) { p.Trimmed, p.Payload = true, nil }, ErrField},
		{"frame over 64 KiB", func(p *Packet) { p.Payload = make([]byte, 70000) }, ErrField},
	}
	for _, c := range cases {
		p := ok
		c.mod(&p)
		if _, err := p.Encode(make([]byte, 1<<17)); !errors.Is(err, c.want) {
			t.Errorf("%s: got %v, want %v", c.name, err, c.want)
		}
	}
	if _, err := ok.Encode(make([]byte, ok.Len()-1)); err != ErrShortBuffer {
		t.Errorf("short buffer: got %v", err)
	}
}

func TestDecodeRejects(t *testing.T) {
	p := samplePacket(sampleKind{op: OpWriteOnly, encap: true})
	good := make([]byte, p.Len())
	n, _ := p.Encode(good)
	good = good[:n]
	sack := samplePacket(sampleKind{op: OpSACK})
	sf := make([]byte, sack.Len())
	sack.Encode(sf)
	cases := []struct {
		name  string
		frame []byte
		mod   func([]byte)
		dec   Decoder
		want  error
	}{
		{"empty", good[:0], nil, Decoder{}, ErrTruncated},
		{"ipv4 ethertype", good, func(b []byte) { b[12], b[13] = 0x08, 0x00 }, Decoder{}, ErrNotIPv6},
		{"ip version 4", good, func(b []byte) { b[14] = 0x4F }, Decoder{}, ErrNotIPv6},
		{"inner version", good, func(b []byte) { b[54] = 0x4F }, Decoder{}, ErrNotIPv6},
		{"outer length", good, func(b []byte) { b[19]++ }, Decoder{}, ErrLength},
		{"inner length", good, func(b []byte) { b[59]++ }, Decoder{}, ErrLength},
		{"tcp", good, func(b []byte) { b[60] = 6 }, Decoder{}, ErrNotUDP},
		{"udp length", good, func(b []byte) { b[99]++ }, Decoder{}, ErrLength},
		{"other port", good, func(b []byte) { b[97]++ }, Decoder{}, ErrPort},
		{"port not the configured one", good, nil, Decoder{Port: 5000}, ErrPort},
		{"ib opcode", good, func(b []byte) { b[102] = 0x0A }, Decoder{}, ErrOpcode},
		{"truncated after bth", good[:110], func(b []byte) {
			be.PutUint16(b[18:], uint16(110-54))
			be.PutUint16(b[58:], uint16(110-94))
			be.PutUint16(b[98:], uint16(110-94))
		}, Decoder{}, ErrTruncated},
		{"unaligned payload", shrink(good, 1), nil, Decoder{}, ErrLength},
		{"pad longer than payload", shrink(good, 44), func(b []byte) { b[103] |= 0x30 }, Decoder{}, ErrTruncated},
		{"pad on a SACK", sf, func(b []byte) { b[63] |= 0x10 }, Decoder{}, ErrPayload},
	}
	for _, c := range cases {
		f := append([]byte(nil), c.frame...)
		if c.mod != nil {
			c.mod(f)
		}
		var q Packet
		if err := c.dec.Decode(f, &q); err != c.want {
			t.Errorf("%s: got %v, want %v", c.name, err, c.want)
		}
	}
}

// TestDecodeOverwrites: decoding into a Packet that held another kind leaves
// nothing of the old one behind.
func TestDecodeOverwrites(t *testing.T) {
	sack := samplePacket(sampleKind{op: OpSACK})
	data := samplePacket(sampleKind{op: OpWriteOnlyImm})
	var fs, fd [256]byte
	ns, _ := sack.Encode(fs[:])
	nd, _ := data.Encode(fd[:])
	var p Packet
	if err := (Decoder{}).Decode(fd[:nd], &p); err != nil {
		t.Fatal(err)
	}
	if err := (Decoder{}).Decode(fs[:ns], &p); err != nil {
		t.Fatal(err)
	}
	if p.Imm != 0 || p.VA != 0 || p.MSN != 0 || len(p.Payload) != 0 {
		t.Fatalf("stale data fields after decoding a SACK: %+v", p)
	}
}

// shrink removes k bytes in front of the ICRC of an SRv6 frame and fixes the
// three length fields, leaving everything else as it was.
func shrink(f []byte, k int) []byte {
	n := len(f) - k
	g := append(append([]byte(nil), f[:n-ICRCLen]...), f[len(f)-ICRCLen:]...)
	be.PutUint16(g[18:], uint16(n-54))
	be.PutUint16(g[58:], uint16(n-94))
	be.PutUint16(g[98:], uint16(n-94))
	return g
}

func TestTrimRefuses(t *testing.T) {
	cases := map[string]func(*Packet){
		"no-trim class":   func(p *Packet) { p.DSCP = DSCPNoTrim },
		"control class":   func(p *Packet) { p.DSCP = DSCPControl },
		"unknown class 0": func(p *Packet) { p.DSCP = 0 },
		"sack":            func(p *Packet) { p.Opcode, p.Payload = OpSACK, nil },
		"probe":           func(p *Packet) { p.Opcode, p.Payload = OpProbe, nil },
	}
	for name, mod := range cases {
		p := samplePacket(sampleKind{op: OpWriteMiddle, encap: true})
		mod(&p)
		buf := make([]byte, p.Len())
		n, _ := p.Encode(buf)
		orig := append([]byte(nil), buf[:n]...)
		if m, ok := Trim(buf[:n], false); ok || m != n || !bytes.Equal(buf[:n], orig) {
			t.Errorf("%s: Trim = %d, %v (frame changed: %v)", name, m, ok, !bytes.Equal(buf[:n], orig))
		}
	}
	p := samplePacket(sampleKind{op: OpWriteMiddle})
	p.DSCP = DSCPTrimmableRetx
	p.Rtx = true
	buf := make([]byte, p.Len())
	n, _ := p.Encode(buf)
	if _, ok := Trim(buf[:n], false); !ok {
		t.Error("TRIMMABLE_RETX frame not trimmed")
	}
}
