package mrcsim

import (
	"testing"

	"github.com/softmrc/softmrc/internal/mrc"
)

// BenchmarkFabricPacket is the CPU cost of one data packet carried end to end
// (two engines, four links, three switches, SACKs back) in the simulator.
func BenchmarkFabricPacket(b *testing.B) {
	size := max(b.N, 64) * 2048
	f, err := New(crossT1(100), mrc.Config{MTU: 2048}, 1, nil)
	if err != nil {
		b.Fatal(err)
	}
	fl, err := f.Connect(0, 1, mrc.QPConfig{}, size, 256<<10, 16)
	if err != nil {
		b.Fatal(err)
	}
	fl.StartAt(0)
	b.ReportAllocs()
	b.ResetTimer()
	f.RunUntilDone(1 << 62)
	if !fl.Done() {
		b.Fatal("flow did not finish")
	}
}
