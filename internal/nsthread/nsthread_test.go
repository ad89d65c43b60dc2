package nsthread

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"os"
	"testing"

	"github.com/vishvananda/netns"
)

func TestNamedEntersAndRestores(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("not root: creating a network namespace needs CAP_SYS_ADMIN")
	}
	b := make([]byte, 4)
	rand.Read(b)
	name := "nst" + hex.EncodeToString(b)
	// NewNamed switches the calling thread; do it on a throwaway thread.
	var created netns.NsHandle
	if err := Run(func() error {
		h, err := netns.NewNamed(name)
		created = h
		return err
	}); err != nil {
		t.Skipf("kernel cannot create network namespaces: %v", err)
	}
	t.Cleanup(func() { created.Close(); netns.DeleteNamed(name) })

	host, err := netns.Get()
	if err != nil {
		t.Fatal(err)
	}
	defer host.Close()
	var inside netns.NsHandle
	if err := Named(name, func() error {
		inside, err = netns.Get()
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer inside.Close()
	if !inside.Equal(created) {
		t.Fatal("f did not run inside the named namespace")
	}
	if inside.Equal(host) {
		t.Fatal("named namespace is the host's")
	}
	want := errors.New("boom")
	if err := In(created, func() error { return want }); !errors.Is(err, want) {
		t.Fatalf("In returned %v, want f's error", err)
	}
	if err := Named(name+"-missing", func() error { return nil }); err == nil {
		t.Fatal("missing namespace: want an error")
	}
}
