package topo

import (
	"fmt"
	"github.com/softmrc/softmrc/nic/pathmtu"
	"regexp"
)

var prefixRE = regexp.MustCompile(`^[a-z][a-z0-9]{0,7}$`)

// Validate checks cross-field rules; Parse and Preset results pass it.
func (t *Topology) Validate() error { return t.validate(nil) }

func (t *Topology) validate(lines map[string]int) error {
	bad := func(field, allowed, format string, args ...any) error {
		return &Error{File: t.Source, Line: lines[field], Field: field, Msg: fmt.Sprintf(format, args...), Allowed: allowed}
	}
	switch {
	case t.Prefix == "":
		return bad("prefix", "1-8 characters [a-z0-9], starting with a letter", "missing: every namespace and pin of the run is named after it")
	case !prefixRE.MatchString(t.Prefix):
		return bad("prefix", "1-8 characters [a-z0-9], starting with a letter", "bad prefix %q", t.Prefix)
	case t.Planes == 0:
		return bad("planes", fmt.Sprintf("an integer from 1 to %d", MaxPlanes), "missing")
	case t.T0PerPlane == 0:
		return bad("t0_per_plane", fmt.Sprintf("an integer from 1 to %d", MaxT0), "missing")
	case t.HostsPerT0 == 0:
		return bad("hosts_per_t0", fmt.Sprintf("an integer from 1 to %d", MaxHostsPerT0), "missing")
	case t.T1PerPlane == 0 && t.T0PerPlane > 1:
		return bad("t1_per_plane", fmt.Sprintf("an integer from 1 to %d when t0_per_plane > 1", MaxT1), "%d T0s per plane need at least one T1 to reach each other", t.T0PerPlane)
	case t.Hosts() < 2:
		return bad("hosts_per_t0", "at least 2 hosts in total (t0_per_plane × hosts_per_t0)", "a testbed with %d host has nobody to talk to", t.Hosts())
	case t.Mode != ModeSRv6 && t.Mode != ModeECMP:
		return bad("mode", "srv6 | ecmp", "unknown mode %q", t.Mode)
	case t.Dataplane != DataplaneXDP && t.Dataplane != DataplaneKernel:
		return bad("dataplane", "xdp | kernel", "unknown dataplane %q", t.Dataplane)
	case t.MTU < MinMTU || t.MTU > MaxMTU:
		return bad("mtu", fmt.Sprintf("an integer from %d to %d", MinMTU, MaxMTU), "%d is out of range", t.MTU)
	case t.RoCEMTU != 1024 && t.RoCEMTU != 2048 && t.RoCEMTU != 4096:
		return bad("roce_mtu", "1024, 2048 or 4096", "%d is not a RoCE MTU", t.RoCEMTU)
	case t.NICPathProbes != 0 && (t.NICPathProbes < MinPathProbes || t.NICPathProbes > MaxPathProbes):
		return bad("nic_path_probes", "a Go duration from 1ms to 10s, e.g. 5ms", "bad nic_path_probes %v: out of range", t.NICPathProbes)
	case t.NICPathProbes != 0 && t.Mode != ModeSRv6:
		return bad("nic_path_probes", "only with mode: srv6 (the agent's loops are uSID paths)", "path probes in %s mode", t.Mode)
	case t.MTU < pathmtu.IfMTU(t.RoCEMTU, t.Mode == ModeSRv6):
		need := pathmtu.IfMTU(t.RoCEMTU, t.Mode == ModeSRv6)
		return bad("mtu", fmt.Sprintf("at least %d for roce_mtu %d (or leave mtu out: it follows roce_mtu)", need, t.RoCEMTU),
			"the links' MTU %d cannot carry the NICs' frames", t.MTU)
	}
	for _, l := range []struct {
		name string
		s    LinkSpec
	}{{"links.fabric", t.Fabric}, {"links.host", t.Host}} {
		// Queue stages must nest: mark before trim before drop.
		prev, prevName := uint64(0), ""
		for _, st := range []struct {
			name string
			v    uint64
		}{{"ecn_threshold", l.s.ECNThreshold}, {"trim_threshold", l.s.TrimThreshold}, {"buffer", l.s.Buffer}} {
			if st.v == 0 {
				continue
			}
			if st.v <= prev {
				return bad(l.name+"."+st.name, fmt.Sprintf("greater than %s (%d bytes)", prevName, prev), "thresholds must increase: ecn_threshold < trim_threshold < buffer")
			}
			prev, prevName = st.v, st.name
		}
		if l.s.CapacityBps != 0 && l.s.Buffer == 0 {
			return bad(l.name+".buffer", "a size such as 256KiB (the virtual queue's drop threshold)", "a capacity needs a buffer")
		}
		if l.s.Buffer >= 1<<32 {
			return bad(l.name+".buffer", "less than 4GiB", "too large for the switch's 32-bit queue thresholds")
		}
		switch {
		case l.s.ECNMax == 0 && l.s.ECNPMax == 0:
		case l.s.ECNMax == 0:
			return bad(l.name+".ecn_pmax", "with an ecn_max such as 512KiB", "ecn_pmax is the marking probability at ecn_max, which is not set")
		case l.s.ECNPMax == 0:
			return bad(l.name+".ecn_max", "with an ecn_pmax such as 1%", "ecn_max needs the marking probability it reaches (ecn_pmax)")
		case l.s.ECNThreshold == 0 || l.s.ECNMax <= l.s.ECNThreshold:
			return bad(l.name+".ecn_max", fmt.Sprintf("greater than ecn_threshold (%d bytes)", l.s.ECNThreshold), "RED marking rises from ecn_threshold to ecn_max")
		case l.s.Buffer != 0 && l.s.ECNMax > l.s.Buffer:
			return bad(l.name+".ecn_max", fmt.Sprintf("at most buffer (%d bytes)", l.s.Buffer), "ecn_max above the buffer")
		}
		if l.s.HostECN && l.name != "links.host" {
			return bad(l.name+".host_ecn", "only under links.host", "fabric links always mark CE above ecn_threshold")
		}
		if l.s.HostECN && l.s.ECNThreshold == 0 {
			return bad(l.name+".host_ecn", "with an ecn_threshold such as 16KiB", "host_ecn marks above ecn_threshold, which is not set")
		}
		if (l.s.ECNThreshold != 0 || l.s.TrimThreshold != 0 || l.s.Buffer != 0) && l.s.CapacityBps == 0 {
			return bad(l.name+".capacity", "a rate such as 10Gbit", "queue thresholds need a capacity to drain the virtual queue")
		}
	}
	return nil
}
