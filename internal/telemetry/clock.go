package telemetry

import "golang.org/x/sys/unix"

// Now reads CLOCK_MONOTONIC in nanoseconds: the time base of every Sample,
// shared by all processes on the machine and by bpf_ktime_get_ns. (Go's
// time.Now carries a monotonic reading too, but only relative to its own
// process.) One vDSO call, no syscall.
func Now() int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		// CLOCK_MONOTONIC exists on every Linux this runs on; a failure
		// here is a broken system, not a condition to handle.
		panic("telemetry: clock_gettime(CLOCK_MONOTONIC): " + err.Error())
	}
	return ts.Nano()
}
