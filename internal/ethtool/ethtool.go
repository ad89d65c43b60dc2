// Package ethtool issues the few ethtool ioctls (SIOCETHTOOL) softmrc
// needs, on an interface of the calling thread's network namespace (call it
// inside a namespace switch to reach another): offload switches for the
// testbed's veths and the receive-queue count mrc-nicd checks its sockets
// against. Pure syscalls, no state.
package ethtool

import (
	"fmt"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Command numbers (linux/ethtool.h) and the ioctl (linux/sockios.h).
const (
	siocEthtool = 0x8946
	cmdSTXCSUM  = 0x00000017
	cmdSTSO     = 0x0000001f
	cmdSGSO     = 0x00000024
	cmdGGRO     = 0x0000002b
	cmdSGRO     = 0x0000002c
	cmdGChannel = 0x0000003c
)

// value is struct ethtool_value.
type value struct {
	cmd  uint32
	data uint32
}

// channels is struct ethtool_channels.
type channels struct {
	cmd                                         uint32
	maxRx, maxTx, maxOther, maxCombined         uint32
	rxCount, txCount, otherCount, combinedCount uint32
}

// SetGRO turns GRO on or off.
func SetGRO(ifname string, on bool) error {
	return set(ifname, cmdSGRO, on)
}

// GRO reports whether GRO is on.
func GRO(ifname string) (bool, error) {
	v := value{cmd: cmdGGRO}
	err := ioctl(ifname, v.cmd, unsafe.Pointer(&v))
	return v.data != 0, err
}

// SetTxOffloads turns TX checksum offload, TSO and GSO on or off.
func SetTxOffloads(ifname string, on bool) error {
	for _, cmd := range []uint32{cmdSTXCSUM, cmdSTSO, cmdSGSO} {
		if err := set(ifname, cmd, on); err != nil {
			return err
		}
	}
	return nil
}

// RxQueues is the number of receive queues the interface uses: its
// channels, rx plus combined. That is the number frames can arrive on.
// netlink's IFLA_NUM_RX_QUEUES is what the device allocated, which can be
// more: a veth made without numrxqueues allocates one queue per possible
// CPU and uses one (the kernel's veth_init_queues).
func RxQueues(ifname string) (int, error) {
	ch := channels{cmd: cmdGChannel}
	if err := ioctl(ifname, ch.cmd, unsafe.Pointer(&ch)); err != nil {
		return 0, err
	}
	return int(ch.rxCount + ch.combinedCount), nil
}

func set(ifname string, cmd uint32, on bool) error {
	v := value{cmd: cmd}
	if on {
		v.data = 1
	}
	return ioctl(ifname, cmd, unsafe.Pointer(&v))
}

// ioctl runs SIOCETHTOOL with data (a struct starting with the command) on
// ifname.
func ioctl(ifname string, cmd uint32, data unsafe.Pointer) error {
	if len(ifname) >= unix.IFNAMSIZ {
		return fmt.Errorf("ethtool %s: name too long", ifname)
	}
	fd, err := unix.Socket(unix.AF_INET6, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("ethtool %s: %w", ifname, err)
	}
	defer unix.Close(fd)
	var ifr struct {
		name [unix.IFNAMSIZ]byte
		data unsafe.Pointer
		_    [16]byte // the rest of struct ifreq's union
	}
	copy(ifr.name[:], ifname)
	ifr.data = data
	_, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), siocEthtool, uintptr(unsafe.Pointer(&ifr)))
	runtime.KeepAlive(data)
	if errno != 0 {
		return fmt.Errorf("ethtool %s cmd %#x: %w", ifname, cmd, errno)
	}
	return nil
}
