package collective

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/softmrc/softmrc/nic/daemon/daemontest"
	"github.com/softmrc/softmrc/nic/verbs"
)

// BenchmarkEngineAllReduce times all-reduce between two ranks on two
// in-process mrc-nicd daemons (two planes), one QP: ns/op is one
// operation, and MB/s the buffer size over that time (algbw).
//
//	go test -run '^$' -bench EngineAllReduce -benchtime 200x ./nic/collective
func BenchmarkEngineAllReduce(b *testing.B) {
	for _, count := range []int{1, 1 << 18} {
		b.Run(fmt.Sprintf("%dB", 4*count), func(b *testing.B) {
			nics := daemontest.Start(b, 2)
			errs := ranksErr(nics.Sock[:], func(int) Config { return Config{} }, func(ctx context.Context, c *Comm) error {
				buf := make([]float32, count)
				if c.Rank() == 0 {
					b.SetBytes(int64(4 * count))
					b.ResetTimer()
				}
				for i := 0; i < b.N; i++ {
					if err := c.AllReduce(ctx, buf, buf); err != nil {
						return err
					}
				}
				if c.Rank() == 0 {
					b.StopTimer()
				}
				return nil
			})
			for r, err := range errs {
				if err != nil {
					b.Fatalf("rank %d: %v", r, err)
				}
			}
		})
	}
}

// BenchmarkEnginePingPong is the reference for the one above: a 4-byte
// Write-with-Immediate ping answered by a pong between the same two
// daemons; ns/op is one round trip.
func BenchmarkEnginePingPong(b *testing.B) {
	nics := daemontest.Start(b, 2)
	var devs [2]*verbs.Device
	var qps [2]*verbs.QP
	var mrs [2]*verbs.MR
	for i := range devs {
		d, err := verbs.Open(nics.Sock[i])
		if err != nil {
			b.Fatal(err)
		}
		defer d.Close()
		devs[i] = d
		if qps[i], err = d.CreateQP(verbs.QPConfig{}); err != nil {
			b.Fatal(err)
		}
		if mrs[i], err = d.RegMR(64, verbs.AccessLocalWrite|verbs.AccessRemoteWrite); err != nil {
			b.Fatal(err)
		}
	}
	for i := range qps {
		if err := qps[i].Connect(qps[1-i].ConnectInfo()); err != nil {
			b.Fatal(err)
		}
	}
	hop := func(i int, n int) {
		w := verbs.WriteImm(uint64(n), mrs[i], 0, 4, mrs[1-i].Addr, mrs[1-i].RKey, uint32(n))
		w.Unsignaled = true
		if err := qps[i].PostSend(w); err != nil {
			b.Fatal(err)
		}
		if _, err := devs[1-i].NextCompletion(5 * time.Second); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	for n := 0; n < b.N; n++ {
		hop(0, n)
		hop(1, n)
	}
}
