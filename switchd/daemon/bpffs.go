package daemon

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// checkBPFFS reports whether dir is (or would be created) on a bpffs mount.
// Pins anywhere else either fail or, worse, vanish with a private mount
// namespace: `ip netns exec` gives its child a fresh /sys without
// /sys/fs/bpf, so a daemon started that way could never be adopted.
func checkBPFFS(dir string) error {
	p := filepath.Clean(dir)
	for {
		var st unix.Statfs_t
		err := unix.Statfs(p, &st)
		if err == nil {
			if st.Type == unix.BPF_FS_MAGIC {
				return nil
			}
			return fmt.Errorf("pin_dir %s: %s is not on a bpffs mount, so the switch could not be pinned and adopted after a restart. "+
				"Mount one (mount -t bpf bpf /sys/fs/bpf). If mrc-switchd runs under 'ip netns exec', that gives it a fresh /sys without bpffs: "+
				"start it with 'nsenter --net=/run/netns/NAME mrc-switchd ...' instead", dir, p)
		}
		if !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("pin_dir %s: statfs %s: %w", dir, p, err)
		}
		parent := filepath.Dir(p)
		if parent == p {
			return fmt.Errorf("pin_dir %s: no existing parent directory", dir)
		}
		p = parent
	}
}
