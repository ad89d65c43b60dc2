package daemon_test

import (
	"sync"
	"testing"

	"github.com/softmrc/softmrc/nic/daemon/daemontest"
	"github.com/softmrc/softmrc/nic/verbs"
	"github.com/softmrc/softmrc/nic/vproto"
)

// TestSessionListWhileOpening: listing sessions while others say hello is
// safe. Each session's readLoop records its client's name; the list is built
// on another session's goroutine. Under -race this failed (CI, cmd/mrcctl
// TestCommands) before Hello took the service lock to write the name.
func TestSessionListWhileOpening(t *testing.T) {
	p := daemontest.Start(t, 1)
	ctl, err := verbs.OpenControl(p.Sock[0])
	if err != nil {
		t.Fatal(err)
	}
	defer ctl.Close()
	const opens = 20
	var wg sync.WaitGroup
	errs := make(chan error, opens)
	for i := 0; i < opens; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d, err := verbs.OpenControl(p.Sock[0])
			if err != nil {
				errs <- err
				return
			}
			d.Close()
		}()
	}
	listed := 0
	for i := 0; i < 4*opens; i++ {
		var got []vproto.SessionInfo
		if err := ctl.Ctl(vproto.CtlRequest{Cmd: vproto.CtlSessions}, &got); err != nil {
			t.Fatalf("sessions: %v", err)
		}
		listed += len(got)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("open: %v", err)
	}
	if listed < 4*opens {
		t.Errorf("%d lists saw %d sessions in all, want at least one each (the lister's own)", 4*opens, listed)
	}
}
