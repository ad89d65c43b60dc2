package verbs

import "unsafe"

// addrOf is the address of b's first byte: the VA a region is known by.
func addrOf(b []byte) uint64 { return uint64(uintptr(unsafe.Pointer(&b[0]))) }
