package dataplane

import (
	"bytes"
	"encoding/hex"
	"net/netip"
	"testing"

	"github.com/softmrc/softmrc/internal/wire"
)

// TestTrimMatchesWire holds the program's trimming against the reference
// wire.Trim (the one the fabric simulator uses): same frame bytes for every
// data opcode, with and without TSETH/ImmDt, fabric and last hop.
func TestTrimMatchesWire(t *testing.T) {
	for _, m := range []mrcHdr{
		{opcode: 0xC6, payload: 1024}, {opcode: 0xC7, ts: true, payload: 1024}, {opcode: 0xC8, payload: 1024},
		{opcode: 0xC9, ts: true, payload: 1024}, {opcode: 0xCA, payload: 1024}, {opcode: 0xCB, payload: 1024},
	} {
		for _, lastHop := range []bool{false, true} {
			h := newHarness(t)
			f := dataFrame(12, ecnECT0, m)
			p := PortID(1)
			if lastHop {
				f.dst = mustAddr("5f00:1:100:c001::")
				p = 4
				h.setModel(4, RoleHostFacing, slowModel(0, 500, 20000))
			} else {
				h.setModel(1, RoleFabric, slowModel(0, 500, 20000))
			}
			ret, out := h.run(f.bytes())
			da := "5f00:1:200::"
			if lastHop {
				da = "5f00:1:c001::"
			}
			want := sent(f, p, da, 63).bytes()
			n, ok := wire.Trim(want, lastHop)
			if !ok {
				t.Fatalf("opcode %#x: wire.Trim refused the frame", m.opcode)
			}
			if ret != xdpRedirect || !bytes.Equal(out, want[:n]) {
				t.Fatalf("opcode %#x last hop %v: verdict %d\n got  %s\n wire %s", m.opcode, lastHop, ret, hex.EncodeToString(out), hex.EncodeToString(want[:n]))
			}
		}
	}
}

func mustAddr(s string) netip.Addr { return netip.MustParseAddr(s) }
