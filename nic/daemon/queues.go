package daemon

import (
	"fmt"

	"github.com/vishvananda/netlink"

	"github.com/softmrc/softmrc/internal/ethtool"
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
		if msg := queueGap(p.Interface, rxQueues(p.Interface), p.Queue, d.cfg.ThreadCount()); msg != "" {
			d.log.Warn("port receive queues without a socket", "port", p.PortName(), "problem", msg)
		}
	}
}

// rxQueues is the number of receive queues interface ifname uses (0:
// unknown). Not netlink's count, which is what the device allocated: every
// testbed host link (a veth made without numrxqueues) allocates one per
// CPU and uses one, and mrc-nicd warned, wrongly, that frames on the
// second were lost (ethtool.RxQueues). netlink's count stands in only for a
// driver that does not report its channels.
func rxQueues(ifname string) int {
	if n, err := ethtool.RxQueues(ifname); err == nil && n > 0 {
		return n
	}
	l, err := netlink.LinkByName(ifname)
	if err != nil {
		return 0 // the socket's own error said it already
	}
	return l.Attrs().NumRxQueues
}
