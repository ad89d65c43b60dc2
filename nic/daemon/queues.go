package daemon

import (
	"fmt"

	"github.com/vishvananda/netlink"
)

// queueGap says what is wrong when an interface with rxQueues receive
// queues has NIC sockets only on queues first..first+n-1: frames the device
// puts on another queue reach no socket (the steering program passes them
// to the kernel, which drops them). A veth receives on the queue its peer
// sent from, and an XDP_REDIRECT into it (the testbed's switches) lands on
// the queue of the CPU that ran it, so a multi-queue host link needs a
// socket on every queue. Empty when nothing is missing.
func queueGap(ifname string, rxQueues, first, n int) string {
	if rxQueues <= 0 || (first == 0 && rxQueues <= n) {
		return ""
	}
	return fmt.Sprintf("%s has %d receive queues and mrc-nicd sockets only on queues %d..%d: frames the device puts on the others are lost; "+
		"set threads: %d (queue 0), or give the link one queue per thread (ip link add ... numrxqueues N numtxqueues N, mrc-testbed --nic-threads N)",
		ifname, rxQueues, first, first+n-1, rxQueues)
}

// warnQueueGaps logs queueGap for every port (real interfaces only).
func (d *Daemon) warnQueueGaps() {
	for _, p := range d.cfg.Ports {
		l, err := netlink.LinkByName(p.Interface)
		if err != nil {
			continue // the socket's own error said it already
		}
		if msg := queueGap(p.Interface, l.Attrs().NumRxQueues, p.Queue, d.cfg.ThreadCount()); msg != "" {
			d.log.Warn("port receive queues without a socket", "port", p.PortName(), "problem", msg)
		}
	}
}
