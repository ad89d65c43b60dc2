package pathmtu

import (
	"errors"
	"strings"
	"testing"

	"github.com/softmrc/softmrc/internal/wire"
)

// FrameLen must be what the encoder really produces for the longest data
// packet of a full-MTU payload.
func TestFrameLenMatchesEncoder(t *testing.T) {
	for _, mtu := range []int{1024, 2048, 4096} {
		for _, encap := range []bool{false, true} {
			longest := 0
			for _, op := range []wire.Opcode{wire.OpWriteFirst, wire.OpWriteMiddle, wire.OpWriteLast,
				wire.OpWriteLastImm, wire.OpWriteOnly, wire.OpWriteOnlyImm} {
				p := wire.Packet{Opcode: op, Encap: encap, HasTS: true, DMALen: uint32(mtu), Payload: make([]byte, mtu)}
				b := make([]byte, 9000)
				n, err := p.Encode(b)
				if err != nil {
					t.Fatalf("encode %v: %v", op, err)
				}
				longest = max(longest, n)
			}
			if got := FrameLen(mtu, encap); got != longest {
				t.Errorf("FrameLen(%d, encap=%v) = %d, encoder's longest frame is %d", mtu, encap, got, longest)
			}
		}
	}
}

func TestCheck(t *testing.T) {
	need4k := IfMTU(4096, true)
	tests := []struct {
		name    string
		mtu     int
		encap   bool
		ports   []Port
		wantBad []string
	}{
		{"2048 on the testbed default 3500", 2048, true, []Port{{"p0", "eth0", 3500}, {"p1", "eth1", 3500}}, nil},
		{"4096 on 3500 fails", 4096, true, []Port{{"p0", "eth0", 3500}}, []string{"p0"}},
		{"4096 on exactly enough", 4096, true, []Port{{"p0", "eth0", need4k}}, nil},
		{"4096 one byte short", 4096, true, []Port{{"p0", "eth0", need4k - 1}}, []string{"p0"}},
		{"4096 ECMP mode needs one header less", 4096, false, []Port{{"p0", "eth0", need4k - wire.IPv6Len}}, nil},
		{"only the short port is named", 4096, true, []Port{{"p0", "eth0", 9000}, {"p1", "eth1", 2048}}, []string{"p1"}},
		{"unknown MTU is not checked", 4096, true, []Port{{"p0", "pipe", 0}}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := Check(tc.mtu, tc.encap, tc.ports)
			if tc.wantBad == nil {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("error %v, want *Error", err)
			}
			if len(e.Short) != len(tc.wantBad) {
				t.Fatalf("short ports %+v, want %v", e.Short, tc.wantBad)
			}
			for i, p := range e.Short {
				if p.Name != tc.wantBad[i] {
					t.Errorf("short port %d is %s, want %s", i, p.Name, tc.wantBad[i])
				}
			}
			for _, w := range []string{"path MTU", "raise the interface MTU", "mtu:"} {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
}
