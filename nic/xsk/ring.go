package xsk

import (
	"fmt"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ring is one of the four mmapped AF_XDP rings. The producer and consumer
// indices are shared with the kernel: they are read and written with atomic
// loads and stores, which on every Go port are at least acquire/release and
// so order the descriptor accesses around them (the kernel side uses
// smp_load_acquire/smp_store_release). The cached copies avoid touching the
// shared cache line on every descriptor.
type ring struct {
	mem        []byte
	prod, cons *uint32
	flags      *uint32
	addrs      []uint64       // fill and completion rings
	descs      []unix.XDPDesc // rx and tx rings
	mask       uint32
	size       uint32
	cachedProd uint32
	cachedCons uint32
}

// mapRing maps the ring at pgoff, sized for size entries of entrySize bytes.
func mapRing(fd int, off unix.XDPRingOffset, pgoff int64, size uint32, entrySize uintptr, isAddr bool) (*ring, error) {
	length := int(off.Desc) + int(size)*int(entrySize)
	mem, err := unix.Mmap(fd, pgoff, length, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
	if err != nil {
		return nil, fmt.Errorf("mmap ring at page offset %#x (%d bytes): %w", pgoff, length, err)
	}
	r := &ring{
		mem:   mem,
		prod:  (*uint32)(unsafe.Pointer(&mem[off.Producer])),
		cons:  (*uint32)(unsafe.Pointer(&mem[off.Consumer])),
		flags: (*uint32)(unsafe.Pointer(&mem[off.Flags])),
		mask:  size - 1,
		size:  size,
	}
	if isAddr {
		r.addrs = unsafe.Slice((*uint64)(unsafe.Pointer(&mem[off.Desc])), size)
	} else {
		r.descs = unsafe.Slice((*unix.XDPDesc)(unsafe.Pointer(&mem[off.Desc])), size)
	}
	r.cachedProd = atomic.LoadUint32(r.prod)
	r.cachedCons = atomic.LoadUint32(r.cons)
	return r, nil
}

func (r *ring) unmap() error {
	if r == nil || r.mem == nil {
		return nil
	}
	err := unix.Munmap(r.mem)
	r.mem, r.addrs, r.descs = nil, nil, nil
	return err
}

// needWakeup reports whether the kernel asked for a syscall to make progress
// on this ring (XDP_USE_NEED_WAKEUP).
func (r *ring) needWakeup() bool {
	return atomic.LoadUint32(r.flags)&unix.XDP_RING_NEED_WAKEUP != 0
}

// Producer side (fill, tx).

// free returns how many entries can be produced, re-reading the kernel's
// consumer index only when the cached view is not enough.
func (r *ring) free(want uint32) uint32 {
	n := r.size - (r.cachedProd - r.cachedCons)
	if n >= want {
		return n
	}
	r.cachedCons = atomic.LoadUint32(r.cons)
	return r.size - (r.cachedProd - r.cachedCons)
}

// submit publishes n produced entries to the kernel.
func (r *ring) submit(n uint32) {
	r.cachedProd += n
	atomic.StoreUint32(r.prod, r.cachedProd)
}

// outstanding returns how many produced entries the kernel has not consumed.
func (r *ring) outstanding() uint32 {
	r.cachedCons = atomic.LoadUint32(r.cons)
	return r.cachedProd - r.cachedCons
}

// Consumer side (rx, completion).

// avail returns how many entries can be consumed, at most max.
func (r *ring) avail(max uint32) uint32 {
	n := r.cachedProd - r.cachedCons
	if n == 0 {
		r.cachedProd = atomic.LoadUint32(r.prod)
		n = r.cachedProd - r.cachedCons
	}
	if n > max {
		n = max
	}
	return n
}

// release hands n consumed entries back to the kernel.
func (r *ring) release(n uint32) {
	r.cachedCons += n
	atomic.StoreUint32(r.cons, r.cachedCons)
}
