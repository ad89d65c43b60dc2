package mrc

import (
	"math/rand/v2"
	"testing"

	"github.com/softmrc/softmrc/internal/wire"
)

// TestQPNShards: an engine that is shard k of n gives out only QP numbers
// n*i+k (mrc-nicd --threads steers a frame to its engine by that number),
// skips the reserved ones, and reuses a destroyed number of its own.
func TestQPNShards(t *testing.T) {
	for _, tc := range []struct{ shards, shard int }{{0, 0}, {1, 0}, {2, 0}, {2, 1}, {3, 2}, {16, 5}} {
		cfg := Config{Planes: 1, Mode: ECMP, QPNShards: tc.shards, QPNShard: tc.shard}
		e, err := New(cfg, NewMemTable(), rand.New(rand.NewPCG(1, 2)))
		if err != nil {
			t.Fatal(err)
		}
		n := max(tc.shards, 1)
		seen := map[wire.QPN]bool{}
		var first wire.QPN
		for i := 0; i < 40; i++ {
			q, err := e.CreateQP(QPConfig{})
			if err != nil {
				t.Fatal(err)
			}
			if int(q)%n != tc.shard || q <= wire.QPEndpoint || seen[q] {
				t.Fatalf("shard %d of %d: QPN %#x (seen before: %v)", tc.shard, tc.shards, q, seen[q])
			}
			seen[q] = true
			if i == 0 {
				first = q
			}
		}
		if err := e.DestroyQP(first); err != nil {
			t.Fatal(err)
		}
		// Wrap the counter: the next free number of this shard is found
		// again, never another shard's.
		e.nextQP = wire.QPNMask - 1
		q, err := e.CreateQP(QPConfig{})
		if err != nil || int(q)%n != tc.shard {
			t.Fatalf("shard %d of %d after wrap: QPN %#x, %v", tc.shard, tc.shards, q, err)
		}
	}
	for _, bad := range []struct{ shards, shard int }{{2, 2}, {-1, 0}, {65, 0}, {2, -1}} {
		if _, err := New(Config{Planes: 1, Mode: ECMP, QPNShards: bad.shards, QPNShard: bad.shard}, NewMemTable(), rand.New(rand.NewPCG(1, 2))); err == nil {
			t.Errorf("shard %d of %d accepted", bad.shard, bad.shards)
		}
	}
}
