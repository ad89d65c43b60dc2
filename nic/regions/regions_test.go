package regions

import (
	"testing"

	"golang.org/x/sys/unix"

	"github.com/softmrc/softmrc/internal/mrc"
)

func memfd(t *testing.T, size int) int {
	t.Helper()
	fd, err := unix.MemfdCreate("test", unix.MFD_CLOEXEC)
	if err != nil {
		t.Skipf("memfd_create: %v (kernel without memfd)", err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	if err := unix.Ftruncate(fd, int64(size)); err != nil {
		t.Fatal(err)
	}
	return fd
}

const rw = mrc.AccessLocalRead | mrc.AccessLocalWrite | mrc.AccessRemoteWrite

func TestDomainsAndKeyKinds(t *testing.T) {
	rs := New()
	a, err := rs.Add(1, memfd(t, 8192), 0x7000, 8192, rw)
	if err != nil {
		t.Fatal(err)
	}
	b, err := rs.Add(2, memfd(t, 4096), 0x7000, 4096, rw)
	if err != nil {
		t.Fatal(err)
	}
	ro, err := rs.Add(1, memfd(t, 4096), 0x9000, 4096, mrc.AccessLocalRead|mrc.AccessLocalWrite)
	if err != nil {
		t.Fatal(err)
	}
	if a.RKey == b.RKey || a.LKey == b.LKey || a.RKey == 0 || a.LKey == 0 {
		t.Fatalf("keys not unique/non-zero: %+v %+v", a, b)
	}
	for _, tc := range []struct {
		name string
		pd   uint32
		key  uint32
		kind mrc.KeyKind
		want *Region
	}{
		{"own rkey", 1, a.RKey, mrc.RemoteKey, a},
		{"own lkey", 1, a.LKey, mrc.LocalKey, a},
		{"read-only region's lkey", 1, ro.LKey, mrc.LocalKey, ro},
		// Resolves with its access: the engine refuses the write.
		{"read-only region's rkey", 1, ro.RKey, mrc.RemoteKey, ro},
		{"another domain's rkey", 1, b.RKey, mrc.RemoteKey, nil},
		{"another domain's lkey", 2, a.LKey, mrc.LocalKey, nil},
		{"lkey as rkey", 1, a.LKey, mrc.RemoteKey, nil},
		{"rkey as lkey", 1, a.RKey, mrc.LocalKey, nil},
		{"rkey 0", 1, 0, mrc.RemoteKey, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, ok := rs.Region(tc.pd, tc.key, tc.kind)
			if tc.want == nil {
				if ok {
					t.Fatalf("resolved to %+v", r)
				}
				return
			}
			if !ok || r.Base != tc.want.Base || len(r.Buf) != len(tc.want.Buf) || r.Access != tc.want.Access {
				t.Fatalf("got %+v, %v; want %+v", r, ok, tc.want.Region)
			}
		})
	}
	if err := rs.Remove(2, a.LKey); err == nil {
		t.Fatal("domain 2 deregistered domain 1's region")
	}
	if err := rs.Remove(1, a.LKey); err != nil {
		t.Fatal(err)
	}
	if _, ok := rs.Region(1, a.RKey, mrc.RemoteKey); ok {
		t.Fatal("deregistered region still resolves")
	}
	rs.Release(1)
	rs.Release(2)
	if n, _ := rs.Count(); n != 0 {
		t.Fatalf("%d regions left", n)
	}
	if _, err := rs.Add(3, memfd(t, 100), 0x1000, 4096, rw); err == nil {
		t.Fatal("registered more bytes than the memfd holds")
	}
}

// The engine looks regions up per packet: no allocation.
func TestRegionLookupAllocs(t *testing.T) {
	rs := New()
	a, err := rs.Add(1, memfd(t, 4096), 0x7000, 4096, rw)
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Release(1)
	if n := testing.AllocsPerRun(100, func() { rs.Region(1, a.RKey, mrc.RemoteKey) }); n != 0 {
		t.Fatalf("Region allocates %.1f times per lookup", n)
	}
}
