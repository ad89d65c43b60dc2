package service

import (
	"math"
	"testing"

	"golang.org/x/sys/unix"
)

func TestRegionSliceBounds(t *testing.T) {
	r := &Region{Addr: 0x10000, Buf: make([]byte, 100)}
	for _, tc := range []struct {
		name string
		va   uint64
		n    uint32
		ok   bool
	}{
		{"whole", 0x10000, 100, true},
		{"empty at start", 0x10000, 0, true},
		{"empty at end", 0x10000 + 100, 0, true},
		{"last byte", 0x10000 + 99, 1, true},
		{"one past the end", 0x10000 + 99, 2, false},
		{"starts past the end", 0x10000 + 101, 0, false},
		{"below the start", 0xffff, 1, false},
		{"huge length", 0x10000, math.MaxUint32, false},
		{"VA wraps", math.MaxUint64, 2, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := r.Slice(tc.va, tc.n)
			if (err == nil) != tc.ok {
				t.Fatalf("Slice(%#x, %d): err = %v, want ok=%v", tc.va, tc.n, err, tc.ok)
			}
			if err == nil && (len(b) != int(tc.n) || cap(b) != int(tc.n)) {
				t.Fatalf("len %d cap %d, want %d (capped so appends cannot reach past the range)", len(b), cap(b), tc.n)
			}
		})
	}
}

func memfd(t *testing.T, size int) int {
	t.Helper()
	fd, err := unix.MemfdCreate("test", unix.MFD_CLOEXEC)
	if err != nil {
		t.Skipf("memfd_create: %v", err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	if err := unix.Ftruncate(fd, int64(size)); err != nil {
		t.Fatal(err)
	}
	return fd
}

func TestRegionsOwnership(t *testing.T) {
	rs := NewRegions()
	a, err := rs.Add(1, memfd(t, 8192), 0x7000, 8192)
	if err != nil {
		t.Fatal(err)
	}
	b, err := rs.Add(2, memfd(t, 4096), 0x7000, 4096)
	if err != nil {
		t.Fatal(err)
	}
	if a.RKey == b.RKey || a.LKey == b.LKey || a.RKey == 0 || a.LKey == 0 {
		t.Fatalf("keys not unique/non-zero: %+v %+v", a, b)
	}
	if _, err := rs.Remote(1, a.RKey, 0x7000, 8192); err != nil {
		t.Fatal(err)
	}
	if _, err := rs.Remote(1, b.RKey, 0x7000, 16); err == nil {
		t.Fatal("owner 1 reached owner 2's rkey")
	}
	if rs.Lookup(2, a.RKey) != nil || rs.Lookup(1, a.RKey) != a {
		t.Fatal("Lookup ignores the owner")
	}
	if _, err := rs.Local(2, a.LKey, 0x7000, 1); err == nil {
		t.Fatal("owner 2 reached owner 1's lkey")
	}
	if err := rs.Remove(2, a.LKey); err == nil {
		t.Fatal("owner 2 deregistered owner 1's region")
	}
	if err := rs.Remove(1, a.LKey); err != nil {
		t.Fatal(err)
	}
	if rs.Lookup(1, a.RKey) != nil {
		t.Fatal("deregistered region still resolves")
	}
	rs.ReleaseOwner(1)
	rs.ReleaseOwner(2)
	if n, _ := rs.Count(); n != 0 {
		t.Fatalf("%d regions left", n)
	}
	if _, err := rs.Add(3, memfd(t, 100), 0x1000, 4096); err == nil {
		t.Fatal("registered more bytes than the memfd holds")
	}
}
