package verbs_test

import (
	"context"
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/softmrc/softmrc/nic/verbs"
)

// TestPing: Ping succeeds only against a socket that completes the verbs
// handshake, and gives up when ctx ends instead of hanging on a socket that
// accepts but never answers.
func TestPing(t *testing.T) {
	served, _ := startLoop(t)
	dir := t.TempDir()
	// A SOCK_SEQPACKET listener that accepts and never answers hello.
	mute := filepath.Join(dir, "mute.sock")
	ml, err := net.ListenUnix("unixpacket", &net.UnixAddr{Name: mute, Net: "unixpacket"})
	if err != nil {
		t.Fatal(err)
	}
	defer ml.Close()
	go func() {
		for {
			c, err := ml.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	// A stream socket: the wrong type for a device.
	stream := filepath.Join(dir, "stream.sock")
	sl, err := net.Listen("unix", stream)
	if err != nil {
		t.Fatal(err)
	}
	defer sl.Close()
	for _, c := range []struct {
		name, path string
		ok         bool
	}{
		{"daemon", served, true},
		{"no socket", filepath.Join(dir, "none.sock"), false},
		{"stream socket", stream, false},
		{"accepts but never answers", mute, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			defer cancel()
			err := verbs.Ping(ctx, c.path)
			if (err == nil) != c.ok {
				t.Fatalf("Ping(%s) = %v, want ok=%v", c.path, err, c.ok)
			}
		})
	}
}
