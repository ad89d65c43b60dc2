package netns

import (
	"fmt"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ethtool ioctl numbers (linux/ethtool.h, linux/sockios.h).
const (
	siocEthtool    = 0x8946
	ethtoolSGRO    = 0x0000002c
	ethtoolGGRO    = 0x0000002b
	ethtoolSTXCSUM = 0x00000017
	ethtoolSTSO    = 0x0000001f
	ethtoolSGSO    = 0x00000024
	ifNameLength   = 16
)

type ethtoolValue struct {
	cmd  uint32
	data uint32
}

type ifreqData struct {
	name [ifNameLength]byte
	data unsafe.Pointer
	_    [16]byte // the rest of struct ifreq's union
}

// SetGRO turns GRO on or off on an interface of the namespace the calling
// thread is in (use inside Do). The testbed turns it on at every veth end
// that receives XDP redirects without running an XDP program itself: without
// GRO (or a program) veth drops redirected frames silently
// (SRV6-XDP-FACTS §3).
func SetGRO(ifname string, on bool) error {
	v := ethtoolValue{cmd: ethtoolSGRO}
	if on {
		v.data = 1
	}
	return ethtoolIoctl(ifname, &v)
}

// SetTxOffloads turns TX checksum offload, TSO and GSO on or off
// (calling thread's namespace). The testbed turns them off on every fabric
// veth: an XDP redirect drops the skb's CHECKSUM_PARTIAL state, so a
// kernel-sent UDP/TCP packet would reach the far host with an unfinished
// checksum (and a GSO super-packet would exceed the MTU).
func SetTxOffloads(ifname string, on bool) error {
	for _, cmd := range []uint32{ethtoolSTXCSUM, ethtoolSTSO, ethtoolSGSO} {
		v := ethtoolValue{cmd: cmd}
		if on {
			v.data = 1
		}
		if err := ethtoolIoctl(ifname, &v); err != nil {
			return err
		}
	}
	return nil
}

// GRO reports whether GRO is on (calling thread's namespace).
func GRO(ifname string) (bool, error) {
	v := ethtoolValue{cmd: ethtoolGGRO}
	err := ethtoolIoctl(ifname, &v)
	return v.data != 0, err
}

func ethtoolIoctl(ifname string, v *ethtoolValue) error {
	if len(ifname) >= ifNameLength {
		return fmt.Errorf("ethtool %s: name too long", ifname)
	}
	fd, err := unix.Socket(unix.AF_INET6, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("ethtool %s: %w", ifname, err)
	}
	defer unix.Close(fd)
	var ifr ifreqData
	copy(ifr.name[:], ifname)
	ifr.data = unsafe.Pointer(v)
	_, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), siocEthtool, uintptr(unsafe.Pointer(&ifr)))
	runtime.KeepAlive(v)
	if errno != 0 {
		return fmt.Errorf("ethtool %s cmd %#x: %w", ifname, v.cmd, errno)
	}
	return nil
}
