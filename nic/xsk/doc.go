// Package xsk is the AF_XDP port layer of the softmrc soft NIC.
//
// A Port is one AF_XDP socket bound to one interface queue, with its own UMEM
// of 4096-byte frames (2048-byte chunks cannot hold a 2 KiB-MTU frame once the
// kernel's 256-byte headroom is taken), fill/completion rings, batched receive
// and transmit, a bounded frame pool and counters. The NIC-side XDP program
// (bpf/nicsteer.bpf.c, loaded by Steer) redirects MRC frames into the socket
// and passes everything else (NDP, ICMPv6, management traffic) to the kernel.
// It is attached through a bpf_link, so it goes away when the process dies.
//
// The ring code is this package's own, on x/sys and cilium/ebpf, rather than
// github.com/asavie/xdp: that library cannot re-open a queue in the same
// process (Close leaves the rings mapped), ignores need_wakeup, has no memory
// ordering on the rings, panics on transmit errors and attaches with legacy
// netlink so its program outlives the process. docs/xsk.md has the
// measurements.
//
// NewPipe returns an in-memory twin of a Port pair for tests of the code above;
// WatchCarrier follows an interface's link state through netlink.
package xsk
