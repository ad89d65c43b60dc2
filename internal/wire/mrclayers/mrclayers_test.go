package mrclayers

import (
	"bytes"
	"net/netip"
	"testing"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"

	"github.com/softmrc/softmrc/internal/wire"
)

func addr(s string) wire.Addr128 { return wire.Addr128FromNetip(netip.MustParseAddr(s)) }

// kinds returns one packet per opcode, with and without the SRv6 header and
// TSETH, filled with distinct values.
func kinds() []wire.Packet {
	var ps []wire.Packet
	ops := []wire.Opcode{wire.OpWriteFirst, wire.OpWriteMiddle, wire.OpWriteLast, wire.OpWriteLastImm,
		wire.OpWriteOnly, wire.OpWriteOnlyImm, wire.OpAck, wire.OpEndpointReq, wire.OpEndpointResp,
		wire.OpSACK, wire.OpNACK, wire.OpProbe, wire.OpCNP}
	for _, op := range ops {
		for _, encap := range []bool{false, true} {
			for _, ts := range []bool{false, true} {
				if ts && !op.IsData() {
					continue
				}
				p := wire.Packet{Encap: encap, OuterSrc: addr("fd00::1"), OuterDst: addr("5f00:1:4000:c000::"),
					Src: addr("fd00:1::1"), Dst: addr("fd00:1::2"), DSCP: wire.DSCPControl, HopLimit: 9,
					EV: 0x21000042, Opcode: op, DestQP: 0xABCDEF, PSN: 0xFFFFFF, Rtx: true}
				if op.IsData() {
					p.DSCP = wire.DSCPTrimmable
					p.MSN, p.RQMSN, p.VA, p.RKey, p.DMALen, p.Imm = 5, 6, 0x1000, 7, 11, 0xFEEDF00D
					p.HasTS, p.TS, p.FType = ts, 777, wire.FTypeTimestamp
					p.Payload = []byte("hello world")
				}
				p.Syndrome, p.AckMSN = 0x1F, 3
				p.SACK = wire.SACKFields{M: wire.MAlwaysSkip, Probe: true, Entropy: 0x30000001, CackPSN: 10,
					SackOffset: -5, Bitmap: ^uint64(0), TSEcho: 777, OOOCount: 9, RcvdBytes: 100}
				p.NACK = wire.NACKFields{Reason: wire.NackTrimmedLastHop, Entropy: 0x10000002, NackPSN: 11}
				p.Probe = wire.ProbeFields{ProbeID: 4, Timestamp: 5, FType: 1}
				p.Endpoint = wire.EndpointFields{Op: wire.EPEVProbe, PortStatusMask: 0xF, Timestamp: 6}
				ps = append(ps, p)
			}
		}
	}
	return ps
}

func TestNewPacketDecodesWholeFrames(t *testing.T) {
	for _, p := range kinds() {
		buf := make([]byte, p.Len())
		n, err := p.Encode(buf)
		if err != nil {
			t.Fatal(err)
		}
		frame := buf[:n]
		pkt := gopacket.NewPacket(frame, layers.LayerTypeEthernet, gopacket.Default)
		if el := pkt.ErrorLayer(); el != nil {
			t.Fatalf("%s: decode error: %v", p.Opcode, el.Error())
		}
		want := []gopacket.LayerType{layers.LayerTypeEthernet, layers.LayerTypeIPv6}
		if p.Encap {
			want = append(want, layers.LayerTypeIPv6)
		}
		want = append(want, layers.LayerTypeUDP, LayerTypeBTH)
		switch op := p.Opcode; {
		case op.IsData():
			want = append(want, LayerTypeMETH)
			if p.HasTS {
				want = append(want, LayerTypeTSETH)
			}
			want = append(want, LayerTypeRETH)
			if op.HasImm() {
				want = append(want, LayerTypeImmDt)
			}
			want = append(want, gopacket.LayerTypePayload)
		case op == wire.OpAck:
			want = append(want, LayerTypeAETH)
		case op == wire.OpSACK:
			want = append(want, LayerTypeSETH)
		case op == wire.OpNACK:
			want = append(want, LayerTypeNETH)
		case op == wire.OpProbe:
			want = append(want, LayerTypePETH)
		case op == wire.OpEndpointReq:
			want = append(want, LayerTypeERTH)
		case op == wire.OpEndpointResp:
			want = append(want, LayerTypeEETH)
		case op == wire.OpCNP:
			want = append(want, LayerTypeCNP)
		}
		want = append(want, LayerTypeICRC)
		got := pkt.Layers()
		if len(got) != len(want) {
			t.Fatalf("%s encap=%v ts=%v: %d layers %v, want %v", p.Opcode, p.Encap, p.HasTS, len(got), got, want)
		}
		for i := range want {
			if got[i].LayerType() != want[i] {
				t.Fatalf("%s: layer %d is %v, want %v", p.Opcode, i, got[i].LayerType(), want[i])
			}
		}
		// Field values agree with the encoder's input.
		bth := pkt.Layer(LayerTypeBTH).(*BTH)
		if bth.Opcode != p.Opcode || bth.DestQP != p.DestQP || bth.PSN != p.PSN || !bth.Rtx || bth.TS != p.HasTS {
			t.Errorf("%s: BTH %+v", p.Opcode, bth)
		}
		ic := pkt.Layer(LayerTypeICRC).(*ICRC)
		if ic.Value != wire.ICRC(frame[wire.EthLen+map[bool]int{false: 0, true: wire.IPv6Len}[p.Encap]:n-4]) {
			t.Errorf("%s: ICRC layer %#x", p.Opcode, ic.Value)
		}
		switch p.Opcode {
		case wire.OpSACK:
			if s := pkt.Layer(LayerTypeSETH).(*SETH); s.SACKFields != p.SACK {
				t.Errorf("SETH %+v, want %+v", s.SACKFields, p.SACK)
			}
		case wire.OpNACK:
			if s := pkt.Layer(LayerTypeNETH).(*NETH); s.NACKFields != p.NACK {
				t.Errorf("NETH %+v, want %+v", s.NACKFields, p.NACK)
			}
		case wire.OpProbe:
			if s := pkt.Layer(LayerTypePETH).(*PETH); s.ProbeFields != p.Probe {
				t.Errorf("PETH %+v, want %+v", s.ProbeFields, p.Probe)
			}
		case wire.OpEndpointReq:
			if s := pkt.Layer(LayerTypeERTH).(*ERTH); s.EndpointFields != p.Endpoint {
				t.Errorf("ERTH %+v", s.EndpointFields)
			}
		case wire.OpEndpointResp:
			if s := pkt.Layer(LayerTypeEETH).(*EETH); s.EndpointFields != p.Endpoint {
				t.Errorf("EETH %+v", s.EndpointFields)
			}
		case wire.OpAck:
			if s := pkt.Layer(LayerTypeAETH).(*AETH); s.Syndrome != p.Syndrome || s.MSN != p.AckMSN {
				t.Errorf("AETH %+v", s)
			}
		}
		if p.Opcode.IsData() {
			m := pkt.Layer(LayerTypeMETH).(*METH)
			r := pkt.Layer(LayerTypeRETH).(*RETH)
			if m.MSN != p.MSN || m.RQMSN != p.RQMSN || r.VA != p.VA || r.RKey != p.RKey || r.DMALen != p.DMALen {
				t.Errorf("%s: METH %+v RETH %+v", p.Opcode, m, r)
			}
			if p.HasTS && pkt.Layer(LayerTypeTSETH).(*TSETH).Timestamp != p.TS {
				t.Errorf("TSETH wrong")
			}
			if p.Opcode.HasImm() && pkt.Layer(LayerTypeImmDt).(*ImmDt).Imm != p.Imm {
				t.Errorf("ImmDt wrong")
			}
			if app := pkt.ApplicationLayer(); app == nil || !bytes.Equal(app.Payload(), p.Payload) {
				t.Errorf("%s: payload %v", p.Opcode, app)
			}
			u := pkt.Layer(layers.LayerTypeUDP).(*layers.UDP)
			inner := pkt.Layers()[1].(*layers.IPv6)
			if p.Encap {
				inner = pkt.Layers()[2].(*layers.IPv6)
			}
			if wire.EVFromWire(uint16(u.SrcPort), inner.FlowLabel) != p.EV {
				t.Errorf("EV does not rebuild from gopacket's UDP and IPv6 layers")
			}
		}
	}
}

func TestTrimmedFrame(t *testing.T) {
	p := kinds()[0]
	buf := make([]byte, p.Len())
	n, _ := p.Encode(buf)
	m, ok := wire.Trim(buf[:n], true)
	if !ok {
		t.Fatal("trim refused")
	}
	pkt := gopacket.NewPacket(buf[:m], layers.LayerTypeEthernet, gopacket.Default)
	if pkt.ErrorLayer() != nil || pkt.Layer(LayerTypeRETH) == nil || pkt.Layer(LayerTypeICRC) != nil || pkt.ApplicationLayer() != nil {
		t.Fatalf("trimmed frame: %v", pkt)
	}
}

func TestTruncatedIsAnError(t *testing.T) {
	p := kinds()[len(kinds())-4] // a SACK
	buf := make([]byte, p.Len())
	n, _ := p.Encode(buf)
	for cut := 1; cut < 40; cut++ {
		pkt := gopacket.NewPacket(buf[:n-cut], layers.LayerTypeEthernet, gopacket.Default)
		if pkt.ErrorLayer() == nil && pkt.Layer(LayerTypeICRC) != nil && cut > 0 {
			// The UDP layer does not check its length against the frame, so a
			// short frame can still reach us: it must then fail, not decode.
			t.Fatalf("cut %d: decoded a full SACK from a short frame", cut)
		}
	}
}

// FuzzNewPacket: no input makes the MRC layers panic, and whatever
// wire.Decode accepts gopacket decodes without an error layer.
func FuzzNewPacket(f *testing.F) {
	for _, p := range kinds() {
		buf := make([]byte, p.Len())
		n, _ := p.Encode(buf)
		f.Add(buf[:n])
	}
	f.Fuzz(func(t *testing.T, frame []byte) {
		pkt := gopacket.NewPacket(frame, layers.LayerTypeEthernet, gopacket.Default)
		var q wire.Packet
		if (wire.Decoder{}).Decode(frame, &q) != nil {
			return
		}
		if el := pkt.ErrorLayer(); el != nil {
			t.Fatalf("wire decodes the frame, gopacket fails: %v", el.Error())
		}
		b := pkt.Layer(LayerTypeBTH)
		if b == nil || b.(*BTH).PSN != q.PSN || b.(*BTH).DestQP != q.DestQP {
			t.Fatalf("BTH layer %v disagrees with wire.Decode", b)
		}
	})
}
