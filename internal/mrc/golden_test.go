package mrc

import (
	"encoding/hex"
	"flag"
	"os"
	"strings"
	"testing"

	"github.com/softmrc/softmrc/internal/wire"
)

var update = flag.Bool("update", false, "rewrite testdata/*.hex golden frames")

// TestGoldenFrames pins the bytes the engine emits for a fixed seed: the
// first data packet (SRv6, WRITE_ONLY_IMM) and the SACK answering it.
// Regenerate with: go test ./internal/mrc -run TestGoldenFrames -update
func TestGoldenFrames(t *testing.T) {
	h := newHarness(t, hopts{seed: 1234})
	h.mem[1].Register(0x22, 0x1000, make([]byte, 64), AccessRemoteWrite)
	if err := h.eng[0].PostWrite(h.qp[0], WR{Op: OpWriteImm, Local: []byte("golden payload"), RemoteVA: 0x1010, RKey: 0x22, Imm: 0xC0FFEE}); err != nil {
		t.Fatal(err)
	}
	var data, sack []byte
	h.Filter = func(from int, _ wire.Plane, f []byte) bool {
		var p wire.Packet
		if (wire.Decoder{}).Decode(f, &p) != nil {
			return false
		}
		if from == 0 && p.Opcode.IsData() && data == nil {
			data = append([]byte(nil), f...)
		}
		if from == 1 && p.Opcode == wire.OpSACK && sack == nil {
			sack = append([]byte(nil), f...)
		}
		return false
	}
	h.run(Millisecond, func() bool { return data != nil && sack != nil })
	for name, got := range map[string][]byte{"data_write_only_imm": data, "sack": sack} {
		path := "testdata/" + name + ".hex"
		if *update {
			if err := os.WriteFile(path, []byte(hex.EncodeToString(got)+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%v (run with -update to create it)", err)
		}
		if g := hex.EncodeToString(got); g != strings.TrimSpace(string(want)) {
			t.Errorf("%s differs from %s:\n got %s\nwant %s", name, path, g, want)
		}
	}
	// The golden data frame decodes to what was posted.
	var p wire.Packet
	if err := (wire.Decoder{}).Decode(data, &p); err != nil || p.Opcode != wire.OpWriteOnlyImm || p.Imm != 0xC0FFEE ||
		string(p.Payload) != "golden payload" || p.VA != 0x1010 || p.RKey != 0x22 || !p.Encap || !wire.CheckICRC(data, &p) {
		t.Fatalf("golden data frame decodes to %+v (%v)", p, err)
	}
	if u := wire.F3216.USIDs(nil, p.OuterDst); len(u) != 4 || u[0] != 0x4000|wire.USID(p.EV.Plane()) {
		t.Errorf("outer DA %v: uSIDs %x", p.OuterDst, u)
	}
}
