package collective

import (
	"context"
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/softmrc/softmrc/nic/daemon/daemontest"
	"github.com/softmrc/softmrc/nic/rendezvous"
	"github.com/softmrc/softmrc/nic/verbs"
)

// ranks runs fn on n ranks, rank r on the device socket socks[r], joined
// by a rendezvous on loopback, and fails the test with every rank's error.
func ranks(t *testing.T, socks []string, cfg Config, fn func(ctx context.Context, c *Comm) error) {
	t.Helper()
	for r, err := range ranksErr(socks, func(int) Config { return cfg }, fn) {
		if err != nil {
			t.Errorf("rank %d: %v", r, err)
		}
	}
}

// ranksErr is ranks with a configuration per rank, returning each rank's
// error.
func ranksErr(socks []string, cfgOf func(rank int) Config, fn func(ctx context.Context, c *Comm) error) []error {
	n := len(socks)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	addr := make(chan string, 1)
	errs := make([]error, n)
	var wg sync.WaitGroup
	run := func(r int, a string) {
		defer wg.Done()
		rc := rendezvous.Config{Rank: r, Size: n, Addr: a, Timeout: 20 * time.Second}
		if r == 0 {
			rc.Addr, rc.OnListen = "127.0.0.1:0", func(s string) { addr <- strings.Replace(s, "[::]", "127.0.0.1", 1) }
		}
		g, err := rendezvous.Join(ctx, rc)
		if err != nil {
			errs[r] = err
			return
		}
		defer g.Close()
		dev, err := verbs.Open(socks[r])
		if err != nil {
			errs[r] = err
			return
		}
		defer dev.Close()
		c, err := New(ctx, dev, g, cfgOf(r))
		if err != nil {
			errs[r] = err
			return
		}
		if err := fn(ctx, c); err != nil {
			errs[r] = err
		}
		if err := c.Close(ctx); err != nil && errs[r] == nil {
			errs[r] = err
		}
	}
	wg.Add(1)
	go run(0, "")
	a := "unused"
	if n > 1 {
		a = <-addr
	}
	for r := 1; r < n; r++ {
		wg.Add(1)
		go run(r, a)
	}
	wg.Wait()
	return errs
}

// fill sets rank r's buffer for iteration it.
func fill(b []float32, r, it int) {
	for i := range b {
		b[i] = float32((i*7 + r*13 + it*3) % 101)
	}
}

// checkAllReduce counts the elements of got that are not the exact sum.
func wrongSums(got []float32, n, it int) (wrong, first int) {
	first = -1
	for i, v := range got {
		var want float32
		for k := 0; k < n; k++ {
			want += float32((i*7 + k*13 + it*3) % 101)
		}
		if v != want {
			if first < 0 {
				first = i
			}
			wrong++
		}
	}
	return wrong, first
}

// a2aValue is what rank src sends rank dst at element i of the block.
func a2aValue(src, dst, i, it int) float32 { return float32(src*1000 + dst*100 + (i+it)%97) }

func fillA2A(b []float32, r, n, it int) {
	blk := len(b) / n
	for d := 0; d < n; d++ {
		for i := 0; i < blk; i++ {
			b[d*blk+i] = a2aValue(r, d, i, it)
		}
	}
}

func wrongBlocks(got []float32, r, n, it int) int {
	blk := len(got) / n
	wrong := 0
	for s := 0; s < n; s++ {
		for i := 0; i < blk; i++ {
			if got[s*blk+i] != a2aValue(s, r, i, it) {
				wrong++
			}
		}
	}
	return wrong
}

// exercise runs out-of-place and in-place all-reduce and all-to-all for
// every count, back to back (so fast ranks start the next operation early).
func exercise(counts []int) func(ctx context.Context, c *Comm) error {
	return func(ctx context.Context, c *Comm) error {
		r, n := c.Rank(), c.Size()
		for it, count := range counts {
			send, recv := make([]float32, count), make([]float32, count)
			fill(send, r, it)
			if err := c.AllReduce(ctx, send, recv); err != nil {
				return fmt.Errorf("all-reduce %d: %w", count, err)
			}
			if w, first := wrongSums(recv, n, it); w > 0 {
				return fmt.Errorf("all-reduce of %d elements: %d wrong from element %d", count, w, first)
			}
			fill(send, r, it)
			if err := c.AllReduce(ctx, send, send); err != nil {
				return fmt.Errorf("in-place all-reduce %d: %w", count, err)
			}
			if w, first := wrongSums(send, n, it); w > 0 {
				return fmt.Errorf("in-place all-reduce of %d elements: %d wrong from element %d", count, w, first)
			}
			a := count / n * n
			send, recv = send[:a], recv[:a]
			fillA2A(send, r, n, it)
			if err := c.AllToAll(ctx, send, recv); err != nil {
				return fmt.Errorf("all-to-all %d: %w", a, err)
			}
			if w := wrongBlocks(recv, r, n, it); w > 0 {
				return fmt.Errorf("all-to-all of %d elements: %d wrong", a, w)
			}
			fillA2A(send, r, n, it)
			if err := c.AllToAll(ctx, send, send); err != nil {
				return fmt.Errorf("in-place all-to-all %d: %w", a, err)
			}
			if w := wrongBlocks(send, r, n, it); w > 0 {
				return fmt.Errorf("in-place all-to-all of %d elements: %d wrong", a, w)
			}
		}
		return nil
	}
}

// 2..5 ranks on the loop NIC: exact sums and blocks for counts from 0
// element to several slots per chunk, with 1 and 3 QPs per peer and small
// slots (so even small buffers are cut into many pieces).
func TestLoopRanks(t *testing.T) {
	counts := []int{0, 1, 3, 4, 17, 1000, 1 << 14}
	for _, c := range []struct {
		n   int
		cfg Config
	}{
		{1, Config{}},
		{2, Config{SlotSize: 256, Slots: 2}},
		{3, Config{SlotSize: 64, Slots: 4, QPsPerPeer: 3}},
		{4, Config{SlotSize: 1024, Slots: 1}},
		{5, Config{SlotSize: 128, Slots: 3, QPsPerPeer: 2}},
	} {
		// auto with a 64-byte limit runs direct for 1..16 elements and
		// the ring above, back to back: a fast rank's next operation
		// (the other algorithm) arrives early.
		for _, a := range []struct {
			algo Algo
			max  int
		}{{AlgoRing, 0}, {AlgoDirect, 0}, {AlgoAuto, 64}} {
			cfg := c.cfg
			cfg.AllReduce, cfg.DirectMax = a.algo, a.max
			t.Run(fmt.Sprintf("n=%d qps=%d slot=%d %v", c.n, c.cfg.QPsPerPeer, c.cfg.SlotSize, a.algo), func(t *testing.T) {
				sock := startLoop(t)
				socks := make([]string, c.n)
				for i := range socks {
					socks[i] = sock
				}
				ranks(t, socks, cfg, exercise(counts))
			})
		}
	}
}

// Every rank gets the same float32 sums, bit for bit, with either
// algorithm (values whose sums round differently in different orders);
// the direct all-reduce's are the sums in rank order.
func TestAllReduceSameBitsEveryRank(t *testing.T) {
	const n, count = 4, 5000
	val := func(r, i int) float32 { return float32(1+r) / float32(3+i%17) * float32(int(1)<<(i%29)) }
	for _, algo := range []Algo{AlgoRing, AlgoDirect} {
		t.Run(algo.String(), func(t *testing.T) {
			sock := startLoop(t)
			got := make([][]float32, n)
			ranks(t, []string{sock, sock, sock, sock}, Config{SlotSize: 4096, Slots: 2, AllReduce: algo}, func(ctx context.Context, c *Comm) error {
				send := make([]float32, count)
				for i := range send {
					send[i] = val(c.Rank(), i)
				}
				recv := make([]float32, count)
				got[c.Rank()] = recv
				return c.AllReduce(ctx, send, recv)
			})
			if t.Failed() {
				return
			}
			for r := 1; r < n; r++ {
				for i := range got[0] {
					if math.Float32bits(got[r][i]) != math.Float32bits(got[0][i]) {
						t.Fatalf("element %d: rank %d has %v, rank 0 %v", i, r, got[r][i], got[0][i])
					}
				}
			}
			if algo != AlgoDirect {
				return
			}
			for i, v := range got[0] {
				want := val(0, i)
				for r := 1; r < n; r++ {
					want += val(r, i)
				}
				if math.Float32bits(v) != math.Float32bits(want) {
					t.Fatalf("element %d: %v, want the rank-order sum %v", i, v, want)
				}
			}
		})
	}
}

// Two ranks on two in-process mrc-nicd daemons (the real engine, two
// planes): 4 B to 1 MiB, out of place and in place, 1 and 4 QPs, over MRC
// and over the RoCE baseline (the testbed test goes to 64 MiB).
func TestEngineTwoRanks(t *testing.T) {
	if testing.Short() {
		t.Skip("-short")
	}
	for _, tr := range []verbs.Transport{verbs.TransportMRC, verbs.TransportRoCE} {
		for _, qps := range []int{1, 4} {
			t.Run(fmt.Sprintf("%v qps=%d", tr, qps), func(t *testing.T) {
				nics := daemontest.Start(t, 2)
				ranks(t, nics.Sock[:], Config{QPsPerPeer: qps, QP: verbs.QPConfig{Transport: tr}}, exercise([]int{1, 1000, 1 << 18}))
			})
		}
	}
}

func TestConfigChecked(t *testing.T) {
	for _, c := range []Config{{SlotSize: 6}, {Slots: verbs.MaxCreditSlots + 1}, {QPsPerPeer: -1}, {AllReduce: AlgoDirect + 1}, {DirectMax: -1}} {
		if err := c.defaults(); err == nil {
			t.Errorf("%+v accepted", c)
		}
	}
}

// Ranks started with different transports (or shapes) refuse to connect,
// saying why: the NIC cannot tell.
func TestMismatchedRanksRefuse(t *testing.T) {
	sock := startLoop(t)
	for _, other := range []Config{
		{QP: verbs.QPConfig{Transport: verbs.TransportRoCE}},
		{AllReduce: AlgoRing},
		{DirectMax: 1024},
	} {
		errs := ranksErr([]string{sock, sock}, func(r int) Config {
			if r == 1 {
				return other
			}
			return Config{}
		}, func(ctx context.Context, c *Comm) error { return nil })
		for r, err := range errs {
			if err == nil || !strings.Contains(err.Error(), "start every rank with the same options") {
				t.Errorf("%+v: rank %d: %v, want a refusal naming the mismatch", other, r, err)
			}
		}
	}
}

// A rank that never joins the operation makes the others fail after Stall,
// saying how far they got, instead of hanging.
func TestStallEndsOperation(t *testing.T) {
	sock := startLoop(t)
	errs := ranksErr([]string{sock, sock}, func(int) Config { return Config{Stall: 300 * time.Millisecond} },
		func(ctx context.Context, c *Comm) error {
			if c.Rank() == 1 {
				return nil // goes straight to Close
			}
			return c.AllReduce(ctx, make([]float32, 1000), make([]float32, 1000))
		})
	if errs[0] == nil || !strings.Contains(errs[0].Error(), "all-reduce (direct) stalled for 300ms with 0 of 1 messages received") {
		t.Errorf("rank 0: %v, want a stall error", errs[0])
	}
}

// Ranks that disagree on the operation fail with an error, and the
// communicator refuses further operations.
func TestDisagreeingRanksFail(t *testing.T) {
	sock := startLoop(t)
	errs := ranksErr([]string{sock, sock}, func(int) Config { return Config{Stall: 2 * time.Second} },
		func(ctx context.Context, c *Comm) error {
			n := 1000
			if c.Rank() == 1 {
				n = 4000 // more pieces, other lengths
			}
			err := c.AllReduce(ctx, make([]float32, n), make([]float32, n))
			if err == nil {
				return nil
			}
			if again := c.AllReduce(ctx, make([]float32, 4), make([]float32, 4)); again == nil || !strings.Contains(again.Error(), "close the communicator") {
				return fmt.Errorf("after %v the next operation gave %v", err, again)
			}
			return err
		})
	for r, err := range errs {
		if err == nil {
			t.Errorf("rank %d: all-reduce of mismatched counts succeeded", r)
		} else {
			t.Logf("rank %d: %v", r, err)
		}
	}
}

// Credits go back in batches of half the FIFO (at least one): every credit
// immediate a rank receives stands for at least that many of its messages,
// and back-to-back operations of both algorithms and both kinds still
// complete with exact results whatever the FIFO depth.
func TestCreditsReturnedInBatches(t *testing.T) {
	counts := make([]int, 30)
	for i := range counts {
		counts[i] = 1 + i*37%300 // direct up to 64 elements, the ring above
	}
	for _, slots := range []int{1, 2, 3, 8} {
		t.Run(fmt.Sprintf("slots=%d", slots), func(t *testing.T) {
			sock := startLoop(t)
			batch := max(1, slots/2)
			run := exercise(counts)
			ranks(t, []string{sock, sock, sock}, Config{SlotSize: 64, Slots: slots, AllReduce: AlgoAuto, DirectMax: 256}, func(ctx context.Context, c *Comm) error {
				if err := run(ctx, c); err != nil {
					return err
				}
				st := c.Stats()
				if st.Credits == 0 || st.Credits*uint64(batch) > st.MessagesSent {
					return fmt.Errorf("%d credit immediates for %d messages sent: want at least %d messages a credit", st.Credits, st.MessagesSent, batch)
				}
				t.Logf("rank %d: %d messages sent, %d credit immediates back", c.Rank(), st.MessagesSent, st.Credits)
				return nil
			})
		})
	}
}

// A message of creditEagerBytes or more gets its credit back at once, not
// in a batch: two ranks, one 32 KiB all-to-all message each way per
// operation, so every credit immediate stands for one message. (Batched
// like small ones, S7's 64 KiB all-to-all lost an eighth of its busbw.)
func TestLargeMessageCreditsEager(t *testing.T) {
	sock := startLoop(t)
	const ops, block = 20, 32 << 10 / 4 // elements per peer: 32 KiB, above creditEagerBytes
	ranks(t, []string{sock, sock}, Config{Slots: 8}, func(ctx context.Context, c *Comm) error {
		send, recv := make([]float32, 2*block), make([]float32, 2*block)
		for it := 0; it < ops; it++ {
			fillA2A(send, c.Rank(), 2, it)
			if err := c.AllToAll(ctx, send, recv); err != nil {
				return err
			}
			if w := wrongBlocks(recv, c.Rank(), 2, it); w > 0 {
				return fmt.Errorf("operation %d: %d wrong", it, w)
			}
		}
		// The peer may still hold the last operation's credit: its
		// operation ended when it had the message (no wait for credits).
		if st := c.Stats(); st.MessagesSent != ops || st.Credits+1 < ops {
			return fmt.Errorf("%d messages sent, %d credit immediates back: want one per message", st.MessagesSent, st.Credits)
		}
		return nil
	})
}
