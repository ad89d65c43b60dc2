package daemon

import (
	"testing"

	"github.com/softmrc/softmrc/nic/vproto"
)

// Posting is allocation-free once the queue has grown: the session
// goroutine copies work requests into the queue, the loop swaps it out.
func TestPostQueueAllocs(t *testing.T) {
	d := &Daemon{}
	d.pq.drained.L = &d.pq.mu
	wrs := make([]vproto.WR, 64)
	for i := range wrs {
		wrs[i] = vproto.WR{ID: uint64(i), QPN: 7}
	}
	take := func() []postedWR {
		d.pq.mu.Lock()
		defer d.pq.mu.Unlock()
		b := d.pq.wrs
		d.pq.wrs = d.pq.spare[:0]
		d.pq.spare = b[:0]
		d.pq.n.Store(0)
		return b
	}
	d.Post(1, wrs)
	if got := take(); len(got) != len(wrs) || got[63].wr.ID != 63 || got[0].owner != 1 {
		t.Fatalf("queued %d work requests (%+v), want %d from owner 1 in order", len(got), got[:1], len(wrs))
	}
	d.Post(1, wrs) // grow the second buffer too
	take()
	if a := testing.AllocsPerRun(100, func() { d.Post(1, wrs); take() }); a != 0 {
		t.Errorf("Post allocates %.1f times per batch, want 0", a)
	}
	d.closePosts()
	d.Post(1, wrs)
	if d.pq.n.Load() != 0 {
		t.Error("Post queued work after the loop stopped")
	}
}
