package xsk

import (
	"fmt"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ethtool's channel query (linux/ethtool.h ETHTOOL_GCHANNELS, linux/sockios.h
// SIOCETHTOOL).
const (
	siocEthtool      = 0x8946
	ethtoolGChannels = 0x0000003c
)

// ethtoolChannels is struct ethtool_channels.
type ethtoolChannels struct {
	cmd                                         uint32
	maxRx, maxTx, maxOther, maxCombined         uint32
	rxCount, txCount, otherCount, combinedCount uint32
}

// RxQueues is the number of receive queues interface ifname (in the calling
// thread's network namespace) uses: its ethtool channels, rx plus combined.
// That is the number frames can arrive on, and the one an AF_XDP user must
// cover. The count netlink reports (IFLA_NUM_RX_QUEUES) is what the device
// allocated, which can be more: a veth made without numrxqueues allocates
// one queue per possible CPU and uses one (the kernel's veth_init_queues),
// so on a 2-CPU machine netlink says 2 where frames only ever reach queue 0.
func RxQueues(ifname string) (int, error) {
	if len(ifname) >= unix.IFNAMSIZ {
		return 0, fmt.Errorf("xsk: interface name %q too long", ifname)
	}
	fd, err := unix.Socket(unix.AF_INET6, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return 0, fmt.Errorf("xsk: channels of %s: %w", ifname, err)
	}
	defer unix.Close(fd)
	ch := ethtoolChannels{cmd: ethtoolGChannels}
	var ifr struct {
		name [unix.IFNAMSIZ]byte
		data unsafe.Pointer
		_    [16]byte // the rest of struct ifreq's union
	}
	copy(ifr.name[:], ifname)
	ifr.data = unsafe.Pointer(&ch)
	_, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), siocEthtool, uintptr(unsafe.Pointer(&ifr)))
	runtime.KeepAlive(&ch)
	if errno != 0 {
		return 0, fmt.Errorf("xsk: ethtool channels of %s: %w", ifname, errno)
	}
	return int(ch.rxCount + ch.combinedCount), nil
}
