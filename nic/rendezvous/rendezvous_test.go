package rendezvous

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

// Every rank of groups of 1..5 gets every blob, over several rounds, on
// loopback; rank 0 starts last.
func TestAllGather(t *testing.T) {
	for _, n := range []int{1, 2, 3, 5} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			addr := make(chan string, 1)
			var wg sync.WaitGroup
			errs := make([]error, n)
			run := func(r int, a string) {
				defer wg.Done()
				cfg := Config{Rank: r, Size: n, Addr: a, Timeout: 10 * time.Second}
				if r == 0 {
					cfg.Addr = "127.0.0.1:0"
					cfg.OnListen = func(s string) { addr <- s }
				}
				g, err := Join(ctx, cfg)
				if err != nil {
					errs[r] = err
					return
				}
				defer g.Close()
				for round := 0; round < 3; round++ {
					all, err := g.AllGather(ctx, []byte(fmt.Sprintf("r%d/%d", r, round)))
					if err != nil {
						errs[r] = err
						return
					}
					for k, b := range all {
						if string(b) != fmt.Sprintf("r%d/%d", k, round) {
							errs[r] = fmt.Errorf("round %d: rank %d's blob is %q", round, k, b)
							return
						}
					}
				}
			}
			wg.Add(1)
			go run(0, "")
			a := "unused"
			if n > 1 {
				a = strings.Replace(<-addr, "[::]", "127.0.0.1", 1)
			}
			for r := 1; r < n; r++ {
				wg.Add(1)
				go run(r, a)
			}
			wg.Wait()
			for r, err := range errs {
				if err != nil {
					t.Errorf("rank %d: %v", r, err)
				}
			}
		})
	}
}

// A rank that never comes makes rank 0 fail within the timeout, saying so.
func TestMissingRankTimesOut(t *testing.T) {
	_, err := Join(context.Background(), Config{Rank: 0, Size: 2, Addr: "127.0.0.1:0", Timeout: 300 * time.Millisecond})
	if err == nil || !strings.Contains(err.Error(), "waited for 1 of 1 ranks") {
		t.Fatalf("err = %v", err)
	}
	_, err = Join(context.Background(), Config{Rank: 1, Size: 2, Addr: "127.0.0.1:1", Timeout: 300 * time.Millisecond})
	if err == nil || !strings.Contains(err.Error(), "cannot reach rank 0") {
		t.Fatalf("err = %v", err)
	}
	if _, err := Join(context.Background(), Config{Rank: 2, Size: 2}); err == nil {
		t.Fatal("rank 2 of 2 accepted")
	}
}
