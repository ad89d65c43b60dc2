// Package netns creates, enters and deletes named network namespaces and
// applies a testbed plan inside them with netlink. Every namespace switch
// happens on a goroutine locked to its OS thread; if the thread cannot be
// returned to its original namespace it is left locked, so the Go runtime
// retires it instead of reusing a thread in the wrong namespace.
package netns

import (
	"errors"
	"fmt"
	"github.com/softmrc/softmrc/internal/nsthread"
	"os"
	"path/filepath"
	"strings"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// RunDir is where named namespaces are bind-mounted (as iproute2 does, so
// `ip netns` and `ip -n` see them).
const RunDir = "/run/netns"

// ErrNotPermitted reports that the caller lacks CAP_SYS_ADMIN/CAP_NET_ADMIN.
var ErrNotPermitted = errors.New("netns: not permitted (run as root)")

// Supported reports whether this process can create network namespaces, and
// why not.
func Supported() error {
	if os.Geteuid() != 0 {
		return fmt.Errorf("%w: euid %d", ErrNotPermitted, os.Geteuid())
	}
	if _, err := os.Stat("/proc/self/ns/net"); err != nil {
		return fmt.Errorf("netns: kernel lacks network namespaces: %w", err)
	}
	return nil
}

// Path is the bind-mount path of a named namespace.
func Path(name string) string { return filepath.Join(RunDir, name) }

// Exists reports whether the named namespace exists (is mounted).
func Exists(name string) bool {
	h, err := netns.GetFromPath(Path(name))
	if err != nil {
		return false
	}
	h.Close()
	return true
}

// List returns the named namespaces whose name starts with prefix.
func List(prefix string) ([]string, error) {
	ents, err := os.ReadDir(RunDir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), prefix) {
			out = append(out, e.Name())
		}
	}
	return out, nil
}

// Create makes a named namespace with lo up. It fails if the name exists.
func Create(name string) error {
	if err := os.MkdirAll(RunDir, 0o755); err != nil {
		return err
	}
	p := Path(name)
	f, err := os.OpenFile(p, os.O_CREATE|os.O_EXCL|os.O_RDONLY, 0o444)
	if err != nil {
		return fmt.Errorf("create namespace %s: %w", name, err)
	}
	f.Close()
	err = onThread(func() error {
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			return fmt.Errorf("unshare: %w", err)
		}
		src := fmt.Sprintf("/proc/self/task/%d/ns/net", unix.Gettid())
		if err := unix.Mount(src, p, "none", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("bind-mount %s: %w", p, err)
		}
		lo, err := netlink.LinkByName("lo")
		if err != nil {
			return err
		}
		return netlink.LinkSetUp(lo)
	})
	if err != nil {
		unix.Unmount(p, unix.MNT_DETACH)
		os.Remove(p)
		return fmt.Errorf("create namespace %s: %w", name, err)
	}
	return nil
}

// Delete unmounts and removes a named namespace. The namespace (and every
// veth in it, with its peer) disappears once no process is left inside.
// A missing namespace is not an error.
func Delete(name string) error {
	p := Path(name)
	if _, err := os.Stat(p); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err := unix.Unmount(p, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("delete namespace %s: unmount: %w", name, err)
	}
	if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("delete namespace %s: %w", name, err)
	}
	return nil
}

// onThread runs f on a fresh locked OS thread and restores that thread's
// namespace afterwards (or retires the thread when it cannot).
func onThread(f func() error) error { return nsthread.Run(f) }

// Do runs f with the calling OS thread inside the named namespace; f must
// not start goroutines that expect to be in it.
func Do(name string, f func() error) error {
	h, err := netns.GetFromPath(Path(name))
	if err != nil {
		return fmt.Errorf("namespace %s: %w", name, err)
	}
	defer h.Close()
	return onThread(func() error {
		if err := netns.Set(h); err != nil {
			return fmt.Errorf("enter namespace %s: %w", name, err)
		}
		return f()
	})
}

// Handle opens a netlink handle inside the named namespace. Close it.
func Handle(name string) (*netlink.Handle, error) {
	h, err := netns.GetFromPath(Path(name))
	if err != nil {
		return nil, fmt.Errorf("namespace %s: %w", name, err)
	}
	defer h.Close()
	nh, err := netlink.NewHandleAt(h)
	if err != nil {
		return nil, fmt.Errorf("netlink in namespace %s: %w", name, err)
	}
	return nh, nil
}

// Open returns an fd handle of the named namespace (for IFLA_NET_NS_FD).
func Open(name string) (netns.NsHandle, error) {
	h, err := netns.GetFromPath(Path(name))
	if err != nil {
		return h, fmt.Errorf("namespace %s: %w", name, err)
	}
	return h, nil
}

// Sysctl writes a sysctl (key in dotted or slashed form) inside the
// namespace the calling thread is in; use it inside Do.
func Sysctl(key, value string) error {
	p := filepath.Join("/proc/sys", strings.ReplaceAll(key, ".", "/"))
	if err := os.WriteFile(p, []byte(value), 0o644); err != nil {
		return fmt.Errorf("sysctl %s=%s: %w", key, value, err)
	}
	return nil
}
