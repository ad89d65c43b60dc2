package lockedbuf

import (
	"strings"
	"sync"
	"testing"
)

// TestConcurrent: writers and a reader at once (run with -race); every
// write lands whole.
func TestConcurrent(t *testing.T) {
	var b Buffer
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 100 {
				b.Write([]byte("line\n"))
				_ = b.String()
			}
		}()
	}
	wg.Wait()
	if n := strings.Count(b.String(), "line\n"); n != 400 {
		t.Fatalf("%d lines, want 400", n)
	}
}
