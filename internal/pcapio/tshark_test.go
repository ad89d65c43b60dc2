package pcapio_test

import (
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/softmrc/softmrc/internal/pcapio"
	"github.com/softmrc/softmrc/internal/wire"
)

// These tests hold softmrc's frames against an outside decoder: stock tshark
// must see Ethernet / outer IPv6 / inner IPv6 / UDP 4791 / InfiniBand with
// the right destination QP and PSN, and with internal/wire/wireshark/mrc.lua loaded
// it must also show the SACK bitmap, the reflected EV and the NACK reason.

func addr(s string) wire.Addr128 { return wire.Addr128FromNetip(netip.MustParseAddr(s)) }

var (
	src   = addr("fd00:7:2::1")
	dst   = addr("fd00:7:2::2")
	usids = addr("5f00:1:4002:102:4102:c002::")
)

// capture is one frame of the test pcap with what tshark must say about it.
type capture struct {
	p wire.Packet
}

func captures() []capture {
	base := wire.Packet{Src: src, Dst: dst, DSCP: wire.DSCPTrimmable, ECN: wire.ECNECT0, HopLimit: 64}
	data := base
	data.Encap, data.OuterSrc, data.OuterDst = true, src, usids
	data.EV, data.Opcode, data.DestQP, data.PSN = wire.MakeEV(2, 1, 0x12345), wire.OpWriteOnlyImm, 0xABCDEF, 0xFFFFFE
	data.Rtx, data.HasTS, data.TS, data.FType = true, true, 4242, wire.FTypeTimestamp
	data.MSN, data.VA, data.RKey, data.DMALen, data.Imm = 9, 0x7F0000001000, 0x77, 5, 0xDEADBEEF
	data.Payload = []byte("hello")

	sack := base
	sack.DSCP = wire.DSCPControl
	sack.EV, sack.Opcode, sack.DestQP, sack.PSN = wire.MakeEV(3, 0, 1), wire.OpSACK, 0x000102, 0x000010
	sack.SACK = wire.SACKFields{M: wire.MSkipOnce, Entropy: 0x2010_0042, CackPSN: 0x000010, SackOffset: -3,
		Bitmap: 0x8000_0000_0000_0005, TSEcho: 4242, RcvdBytes: 3}

	nack := base
	nack.DSCP, nack.Encap, nack.OuterSrc, nack.OuterDst = wire.DSCPControl, true, src, usids
	nack.EV, nack.Opcode, nack.DestQP, nack.PSN = wire.MakeEV(1, 5, 9), wire.OpNACK, 0x000103, 0x000011
	nack.NACK = wire.NACKFields{Reason: wire.NackTrimmedLastHop, Entropy: 0x1050_0009, NackPSN: 0x000011}

	ep := base
	ep.DSCP, ep.Opcode, ep.DestQP, ep.PSN = wire.DSCPControl, wire.OpEndpointReq, wire.QPEndpoint, 0x77
	ep.Endpoint = wire.EndpointFields{Op: wire.EPPortStatusUpdate, PortStatusMask: 0b1011}
	trimmed := data
	trimmed.Opcode, trimmed.Payload, trimmed.Trimmed, trimmed.PadCount = wire.OpWriteMiddle, nil, true, 3
	trimmed.DSCP, trimmed.PSN = wire.DSCPTrimmedLastHop, 0x000005
	return []capture{{data}, {sack}, {nack}, {ep}, {trimmed}}
}

func writeCapture(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "mrc.pcap")
	w, err := pcapio.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 9000)
	for i, c := range captures() {
		n, err := c.p.Encode(buf)
		if err != nil {
			t.Fatalf("frame %d: %v", i, err)
		}
		if err := w.WriteFrame(time.Unix(1700000000, int64(i)*1000), buf[:n]); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

func luaPath(t *testing.T) string {
	_, here, _, _ := runtime.Caller(0)
	p := filepath.Join(filepath.Dir(here), "..", "wire", "wireshark", "mrc.lua")
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("dissector not found: %v", err)
	}
	return p
}

// tshark runs tshark on path and returns one row of tab-separated fields per
// frame. HOME points at an empty directory so that no personal plugin (say a
// copy of mrc.lua) sneaks into the "stock" run.
func tshark(t *testing.T, path string, extra []string, fields ...string) [][]string {
	t.Helper()
	bin, err := exec.LookPath("tshark")
	if err != nil {
		t.Skip("tshark is not installed (apt-get install tshark; .ci/run installs it): skipping the outside-decoder check")
	}
	args := append([]string{"-n", "-r", path, "-T", "fields", "-E", "separator=/t", "-E", "occurrence=a", "-E", "aggregator=,"}, extra...)
	for _, f := range fields {
		args = append(args, "-e", f)
	}
	cmd := exec.Command(bin, args...)
	home := t.TempDir()
	cmd.Env = append(os.Environ(), "HOME="+home, "XDG_CONFIG_HOME="+home)
	out, err := cmd.Output()
	if err != nil {
		stderr := ""
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		t.Fatalf("tshark %v: %v\n%s", args, err, stderr)
	}
	var rows [][]string
	for _, line := range strings.Split(strings.TrimRight(string(out), "\n"), "\n") {
		rows = append(rows, strings.Split(line, "\t"))
	}
	if len(rows) != len(captures()) {
		t.Fatalf("tshark printed %d rows for %d frames:\n%s", len(rows), len(captures()), out)
	}
	return rows
}

func TestStockTsharkDecodesFrames(t *testing.T) {
	path := writeCapture(t)
	rows := tshark(t, path, nil, "frame.protocols", "ipv6.src", "ipv6.dst", "ipv6.flow", "udp.srcport", "udp.dstport",
		"infiniband.bth.opcode", "infiniband.bth.destqp", "infiniband.bth.psn")
	for i, c := range captures() {
		p, r := c.p, rows[i]
		protos, dsts := "eth:ethertype:ipv6:udp:infiniband", dst.String()
		flow := fmt.Sprintf("0x%05x", p.EV.FlowLabel())
		if p.Encap {
			protos = "eth:ethertype:ipv6:ipv6:udp:infiniband"
			dsts = p.OuterDst.String() + "," + dst.String()
			flow += "," + flow
		}
		want := []string{protos, "", dsts, flow, fmt.Sprint(p.EV.SrcPort()), "4791",
			fmt.Sprint(uint8(p.Opcode)), fmt.Sprintf("0x%06x", uint32(p.DestQP)), fmt.Sprint(uint32(p.PSN))}
		for j, w := range want {
			if j == 1 { // source addresses: just check the inner one is there
				if !strings.HasSuffix(r[j], src.String()) {
					t.Errorf("frame %d ipv6.src = %q", i+1, r[j])
				}
				continue
			}
			if !sameValue(r[j], w) {
				t.Errorf("frame %d (%s): field %d = %q, want %q (row %q)", i+1, p.Opcode, j, r[j], w, r)
			}
		}
	}
}

func TestLuaDissectorShowsMRCFields(t *testing.T) {
	path := writeCapture(t)
	lua := []string{"-X", "lua_script:" + luaPath(t)}
	rows := tshark(t, path, lua, "infiniband.bth.destqp", "infiniband.bth.psn", "mrc.opcode", "mrc.bth.rtx", "mrc.bth.ts",
		"mrc.ev", "mrc.seth.bitmap", "mrc.seth.ev", "mrc.seth.m", "mrc.seth.received", "mrc.neth.reason", "mrc.neth.ev",
		"mrc.ep.port_status_mask", "mrc.ep.ports_up", "mrc.tseth.ts", "mrc.immdt", "_ws.col.Info", "mrc.trimmed")
	for i, c := range captures() {
		p, r := c.p, rows[i]
		check := func(field int, name, want string) {
			t.Helper()
			if !sameValue(r[field], want) {
				t.Errorf("frame %d (%s): %s = %q, want %q", i+1, p.Opcode, name, r[field], want)
			}
		}
		check(0, "infiniband.bth.destqp", fmt.Sprintf("0x%06x", uint32(p.DestQP)))
		check(1, "infiniband.bth.psn", fmt.Sprint(uint32(p.PSN)))
		check(2, "mrc.opcode", fmt.Sprintf("0x%02x", uint8(p.Opcode)))
		check(5, "mrc.ev", fmt.Sprintf("0x%08x", uint32(p.EV)))
		trimmed := "0"
		if p.Trimmed {
			trimmed = "1"
		}
		if got := r[17]; got != trimmed && !(got == "" && trimmed == "0") {
			t.Errorf("frame %d: mrc.trimmed = %q, want %s", i+1, got, trimmed)
		}
		switch p.Opcode {
		case wire.OpWriteOnlyImm:
			check(3, "mrc.bth.rtx", "1")
			check(4, "mrc.bth.ts", "1")
			check(14, "mrc.tseth.ts", fmt.Sprint(p.TS))
			check(15, "mrc.immdt", fmt.Sprintf("0x%08x", p.Imm))
		case wire.OpSACK:
			check(6, "mrc.seth.bitmap", fmt.Sprintf("0x%016x", p.SACK.Bitmap))
			check(7, "mrc.seth.ev", fmt.Sprintf("0x%08x", uint32(p.SACK.Entropy)))
			check(8, "mrc.seth.m", fmt.Sprint(uint8(p.SACK.M)))
			var got []string
			base := p.SACK.CackPSN.Add(int(p.SACK.SackOffset))
			for b := range 64 {
				if p.SACK.Bitmap>>b&1 == 1 {
					got = append(got, fmt.Sprint(uint32(base.Add(b))))
				}
			}
			check(9, "mrc.seth.received", strings.Join(got, ","))
		case wire.OpNACK:
			check(10, "mrc.neth.reason", fmt.Sprintf("0x%02x", uint8(p.NACK.Reason)))
			check(11, "mrc.neth.ev", fmt.Sprintf("0x%08x", uint32(p.NACK.Entropy)))
			if !strings.Contains(r[16], "reason="+p.NACK.Reason.String()) {
				t.Errorf("frame %d: Info column %q does not name the NACK reason %s", i+1, r[16], p.NACK.Reason)
			}
		case wire.OpEndpointReq:
			check(12, "mrc.ep.port_status_mask", fmt.Sprintf("0x%08x", p.Endpoint.PortStatusMask))
			check(13, "mrc.ep.ports_up", "0,1,3")
		}
	}
}

// sameValue compares tshark's text with ours element by element, as numbers
// where both parse as numbers (tshark versions differ in hex padding), else
// as strings.
func sameValue(got, want string) bool {
	g, w := strings.Split(got, ","), strings.Split(want, ",")
	if len(g) != len(w) {
		return false
	}
	for i := range g {
		a, errA := strconv.ParseUint(g[i], 0, 64)
		b, errB := strconv.ParseUint(w[i], 0, 64)
		if errA == nil && errB == nil {
			if a != b {
				return false
			}
		} else if g[i] != w[i] {
			return false
		}
	}
	return true
}
