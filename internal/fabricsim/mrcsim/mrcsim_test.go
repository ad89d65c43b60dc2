package mrcsim

import (
	"math"
	"testing"

	"github.com/softmrc/softmrc/internal/fabricsim"
	"github.com/softmrc/softmrc/internal/mrc"
)

func TestJain(t *testing.T) {
	for _, tc := range []struct {
		xs   []float64
		want float64
	}{
		{[]float64{1, 1, 1, 1}, 1},
		{[]float64{1, 0, 0, 0}, 0.25},
		{[]float64{2, 1}, 0.9},
		{[]float64{0, 0}, 0},
	} {
		if got := Jain(tc.xs); math.Abs(got-tc.want) > 1e-9 {
			t.Errorf("Jain(%v) = %v, want %v", tc.xs, got, tc.want)
		}
	}
}

// The payload efficiency of a full 2048-byte data packet: SRv6 frames carry
// Eth 14 + 2 × IPv6 40 + UDP 8 + BTH 12 + METH 4 + TSETH 4 + RETH 16 + ICRC 4
// = 142 bytes of headers, plus 24 on the wire.
func TestPayloadEfficiency(t *testing.T) {
	if got, want := PayloadEfficiency(2048, fabricsim.ModeSRv6, 24), 2048.0/(2048+142+24); got != want {
		t.Errorf("SRv6: %v, want %v", got, want)
	}
	if got, want := PayloadEfficiency(2048, fabricsim.ModeECMP, 24), 2048.0/(2048+102+24); got != want {
		t.Errorf("ECMP: %v, want %v", got, want)
	}
}

// A small transfer with Write-with-Immediate: exact data, one immediate per
// message, in order; goodput samples are monotonic.
func TestFlowBookkeeping(t *testing.T) {
	f := newFabric(t, crossT1(100), 3, nil)
	fl := connect(t, f, 0, 1, mrc.QPConfig{}, 1<<20, 64<<10, 4)
	fl.Imm = true
	fl.StartAt(10 * us)
	if !f.RunUntilDone(1e9) {
		t.Fatal("did not finish")
	}
	checkFlow(t, fl)
	if fl.Start != 10*us || fl.End <= fl.Start || fl.Completed() != 1<<20 {
		t.Errorf("start %d end %d completed %d", fl.Start, fl.End, fl.Completed())
	}
	if len(fl.Imms) != 16 {
		t.Fatalf("%d immediates, want 16", len(fl.Imms))
	}
	for i, v := range fl.Imms {
		if v != uint32(i) {
			t.Fatalf("immediate %d = %d: out of order", i, v)
		}
	}
	for i := 1; i < len(fl.Progress); i++ {
		if fl.Progress[i].T < fl.Progress[i-1].T || fl.Progress[i].Bytes <= fl.Progress[i-1].Bytes {
			t.Fatalf("progress not monotonic at %d: %v", i, fl.Progress[i-1:i+1])
		}
	}
	if fl.BytesAt(fl.End) != 1<<20 || fl.BytesAt(fl.Start) != 0 {
		t.Errorf("BytesAt: %d at end, %d at start", fl.BytesAt(fl.End), fl.BytesAt(fl.Start))
	}
}
