package dataplane

import "fmt"

// QueueBytes is the backlog of port id's virtual queue (PortModel) at now,
// a CLOCK_MONOTONIC reading in nanoseconds (the clock of
// bpf_ktime_get_ns): what the switch program would find if a frame arrived
// at now. The program drains the queue only when a frame passes, so the
// stored backlog is drained here to now with the port's rate. 0 for a port
// without a model.
func (d *Dataplane) QueueBytes(id PortID, now int64) (uint64, error) {
	if err := checkPort(id); err != nil {
		return 0, err
	}
	var sp SwitchSwPort
	if err := d.objs.Ports.Lookup(uint32(id), &sp); err != nil {
		return 0, fmt.Errorf("dataplane: read port %d: %w", id, err)
	}
	if sp.Enabled == 0 || sp.RateBps == 0 {
		return 0, nil
	}
	var q SwitchSwVq
	if err := d.objs.Vqs.Lookup(uint32(id), &q); err != nil {
		return 0, fmt.Errorf("dataplane: read queue of port %d: %w", id, err)
	}
	return drained(q.Backlog, q.LastNs, sp.RateBps, uint64(max(now, 0))), nil
}

// drained is vq_drain (bpf/qmodel.h) without the update: the backlog in
// bytes left at now of one stored as bytes·1e9 at last, draining rateBps
// bytes per second. A now before last (a reading racing the program)
// counts as no time passed.
func drained(backlog, last, rateBps, now uint64) uint64 {
	const nsPerSec = 1_000_000_000
	if last == 0 || now <= last || backlog == 0 {
		return backlog / nsPerSec
	}
	elapsed := now - last
	if elapsed >= nsPerSec {
		secs := elapsed / nsPerSec
		if secs > 1<<20 || secs*rateBps >= backlog/nsPerSec+1 {
			return 0
		}
		backlog -= secs * rateBps * nsPerSec
		elapsed -= secs * nsPerSec
	}
	if d := elapsed * rateBps; backlog > d {
		return (backlog - d) / nsPerSec
	}
	return 0
}
