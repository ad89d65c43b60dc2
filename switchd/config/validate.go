package config

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"github.com/softmrc/softmrc/internal/wire"
)

// Error is one problem with a config: where it is and what is allowed.
type Error struct {
	File  string // "" for a Config built in code
	Line  int    // 0 when unknown
	Field string // YAML path, e.g. ports[1].neighbour_mac
	Msg   string
}

func (e *Error) Error() string {
	var b strings.Builder
	if e.File != "" {
		b.WriteString(e.File)
		if e.Line > 0 {
			fmt.Fprintf(&b, ":%d", e.Line)
		}
		b.WriteString(": ")
	}
	if e.Field != "" {
		b.WriteString(e.Field)
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// Limits that follow from the kernel and the file formats.
const (
	MaxNameLen    = 32
	maxIfNameLen  = 15  // IFNAMSIZ-1
	maxSunPathLen = 107 // sizeof(sun_path)-1
)

var nameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`)

// conventions.md: uSID blocks come from 5f00::/16.
var usidSpace = netip.MustParsePrefix("5f00::/16")

// Validate checks c (defaults applied first) and returns every problem found,
// joined, as *Error values; nil when c is usable.
func Validate(c *Config) error {
	errs := validate(c)
	if len(errs) == 0 {
		return nil
	}
	out := make([]error, len(errs))
	for i := range errs {
		out[i] = &errs[i]
	}
	return errors.Join(out...)
}

func validate(c0 *Config) []Error {
	c := c0.WithDefaults()
	var errs []Error
	bad := func(field, format string, args ...any) {
		errs = append(errs, Error{Field: field, Msg: fmt.Sprintf(format, args...)})
	}

	checkName := func(field, what, s string) {
		switch {
		case s == "":
			bad(field, "missing: give the %s a name", what)
		case len(s) > MaxNameLen || !nameRE.MatchString(s):
			bad(field, "%q is not a valid %s name: use up to %d letters, digits, '.', '_' or '-', starting with a letter or digit", s, what, MaxNameLen)
		}
	}
	checkName("name", "switch", c.Name)

	switch c.Mode {
	case ModeSRv6, ModeECMP:
	default:
		bad("mode", "%q is not a forwarding mode: want srv6 or ecmp", c.Mode)
	}

	switch {
	case !c.Block.IsValid():
		if c.Mode == ModeSRv6 || len(c.USIDs) > 0 {
			bad("usid_block", "missing: give the uSID block as an IPv6 prefix, e.g. 5f00:1::/32")
		}
	case !c.Block.Addr().Is6() || c.Block.Addr().Is4In6():
		bad("usid_block", "%s is not an IPv6 prefix: want e.g. 5f00:1::/32", c.Block)
	case c.Block.Bits() != 16 && c.Block.Bits() != 32 && c.Block.Bits() != 48:
		bad("usid_block", "block length /%d is not allowed: want /16, /32 or /48 (RFC 9800 with 16-bit uSIDs)", c.Block.Bits())
	case c.Block != c.Block.Masked():
		bad("usid_block", "%s has bits set after the prefix length: did you mean %s?", c.Block, c.Block.Masked())
	case !usidSpace.Contains(c.Block.Addr()) || c.Block.Bits() < usidSpace.Bits():
		bad("usid_block", "%s is outside %s, where softmrc allocates uSID blocks (docs/conventions.md)", c.Block, usidSpace)
	}

	if c.Mode == ModeSRv6 && len(c.USIDs) == 0 {
		bad("usids", "missing: a switch in srv6 mode needs at least one own uN uSID, e.g. [0x0140]")
	}
	seenU := map[wire.USID]int{}
	for i, u := range c.USIDs {
		f := fmt.Sprintf("usids[%d]", i)
		if u == 0 {
			bad(f, "uSID 0 is reserved (end of container, RFC 9800): want 0x0001..0xffff")
		}
		if j, dup := seenU[u]; dup {
			bad(f, "uSID %s is listed twice (also usids[%d])", u.Hex(), j)
		}
		seenU[u] = i
	}

	if len(c.Ports) == 0 {
		bad("ports", "missing: a switch needs at least one port")
	}
	portIdx := map[string]int{}
	ifIdx := map[string]int{}
	for i, p := range c.Ports {
		f := fmt.Sprintf("ports[%d]", i)
		checkName(f+".name", "port", p.Name)
		if j, dup := portIdx[p.Name]; dup && p.Name != "" {
			bad(f+".name", "port name %q is used twice (also ports[%d])", p.Name, j)
		} else {
			portIdx[p.Name] = i
		}
		switch {
		case p.Interface == "":
			bad(f+".interface", "missing: give the Linux interface name of the port")
		case len(p.Interface) > maxIfNameLen || strings.ContainsAny(p.Interface, "/: \t") || p.Interface == "." || p.Interface == "..":
			bad(f+".interface", "%q is not a Linux interface name: at most %d characters, no '/', ':' or spaces", p.Interface, maxIfNameLen)
		}
		if j, dup := ifIdx[p.Interface]; dup && p.Interface != "" {
			bad(f+".interface", "interface %q is used by two ports (also ports[%d])", p.Interface, j)
		} else {
			ifIdx[p.Interface] = i
		}
		switch {
		case p.NeighbourMAC.IsZero():
			bad(f+".neighbour_mac", "missing (or 00:00:00:00:00:00): give the MAC address of the device at the far end, e.g. 02:00:00:00:00:01")
		case p.NeighbourMAC.IsMulticast():
			bad(f+".neighbour_mac", "%s is a multicast address: want the unicast MAC of the neighbour", p.NeighbourMAC)
		}
		switch p.Role {
		case RoleHost, RoleFabric:
		case "":
			bad(f+".role", "missing: want host (faces a NIC) or fabric (faces a switch)")
		default:
			bad(f+".role", "%q is not a port role: want host (faces a NIC) or fabric (faces a switch)", p.Role)
		}
		if m := p.Model; m != nil {
			mf := f + ".model"
			if m.CapacityBps == 0 {
				bad(mf+".capacity_bps", "missing: the port model needs a capacity in bit/s, e.g. 10G")
			}
			if m.Buffer == 0 {
				bad(mf+".buffer", "missing: the port model needs a buffer size in bytes, e.g. 256KiB")
			}
			if m.ECNThreshold != 0 && m.Buffer != 0 && m.ECNThreshold >= m.Buffer {
				bad(mf+".ecn_threshold", "%d is not below buffer %d: marking would never happen", m.ECNThreshold, m.Buffer)
			}
			if m.TrimThreshold != 0 && m.Buffer != 0 && m.TrimThreshold >= m.Buffer {
				bad(mf+".trim_threshold", "%d is not below buffer %d: trimming would never happen", m.TrimThreshold, m.Buffer)
			}
			if m.HostECN && p.Role != RoleHost {
				bad(mf+".host_ecn", "set on a %s port: only host ports need it (fabric ports always mark)", p.Role)
			}
			if m.HostECN && m.ECNThreshold == 0 {
				bad(mf+".host_ecn", "set without ecn_threshold: give the backlog above which to mark, e.g. 16KiB")
			}
			switch {
			case m.ECNMax == 0 && m.ECNPMax == 0:
			case m.ECNMax == 0:
				bad(mf+".ecn_pmax", "set without ecn_max: give the backlog at which the marking probability reaches it, e.g. 200KB")
			case m.ECNPMax == 0:
				bad(mf+".ecn_max", "set without ecn_pmax: give the marking probability at ecn_max, e.g. 1%%")
			case m.ECNThreshold == 0 || m.ECNMax <= m.ECNThreshold:
				bad(mf+".ecn_max", "%d is not above ecn_threshold %d: RED marks between the two", m.ECNMax, m.ECNThreshold)
			case m.Buffer != 0 && m.ECNMax > m.Buffer:
				bad(mf+".ecn_max", "%d is above buffer %d", m.ECNMax, m.Buffer)
			}
			if m.ECNThreshold != 0 && m.TrimThreshold != 0 && m.ECNThreshold > m.TrimThreshold {
				bad(mf+".ecn_threshold", "%d is above trim_threshold %d: want ecn_threshold <= trim_threshold < buffer", m.ECNThreshold, m.TrimThreshold)
			}
		}
	}

	groupIdx := map[string]int{}
	for i, g := range c.ECMPGroups {
		f := fmt.Sprintf("ecmp_groups[%d]", i)
		checkName(f+".name", "ECMP group", g.Name)
		if j, dup := groupIdx[g.Name]; dup && g.Name != "" {
			bad(f+".name", "group name %q is used twice (also ecmp_groups[%d])", g.Name, j)
		} else {
			groupIdx[g.Name] = i
		}
		if len(g.Ports) == 0 {
			bad(f+".ports", "missing: an ECMP group needs at least one port")
		}
		seen := map[string]bool{}
		for k, pn := range g.Ports {
			pf := fmt.Sprintf("%s.ports[%d]", f, k)
			if _, ok := portIdx[pn]; !ok {
				bad(pf, "no port is named %q: want one of %s", pn, names(c.Ports))
			}
			if seen[pn] {
				bad(pf, "port %q is listed twice in the group", pn)
			}
			seen[pn] = true
		}
	}

	own := map[netip.Prefix]int{}
	if c.Block.IsValid() && c.Block.Bits() <= 112 {
		for i, u := range c.USIDs {
			own[c.UNPrefix(u)] = i
		}
	}
	seenP := map[netip.Prefix]int{}
	for i, r := range c.FIB {
		f := fmt.Sprintf("fib[%d]", i)
		switch {
		case !r.Prefix.IsValid():
			bad(f+".prefix", "missing: give an IPv6 prefix, e.g. 5f00:1:101::/48")
		case !r.Prefix.Addr().Is6() || r.Prefix.Addr().Is4In6():
			bad(f+".prefix", "%s is not an IPv6 prefix", r.Prefix)
		case r.Prefix != r.Prefix.Masked():
			bad(f+".prefix", "%s has bits set after the prefix length: did you mean %s?", r.Prefix, r.Prefix.Masked())
		default:
			if j, dup := seenP[r.Prefix]; dup {
				bad(f+".prefix", "prefix %s is routed twice (also fib[%d])", r.Prefix, j)
			}
			seenP[r.Prefix] = i
			if j, mine := own[r.Prefix]; mine && c.Mode == ModeSRv6 {
				bad(f+".prefix", "%s is this switch's own uN prefix (usids[%d]): the switch shifts it, so a route for it is never used", r.Prefix, j)
			}
		}
		switch {
		case r.Port != "" && r.Group != "":
			bad(f, "has both port and group: give exactly one")
		case r.Port == "" && r.Group == "":
			bad(f, "has neither port nor group: give exactly one")
		case r.Port != "":
			if _, ok := portIdx[r.Port]; !ok {
				bad(f+".port", "no port is named %q: want one of %s", r.Port, names(c.Ports))
			}
		default:
			if _, ok := groupIdx[r.Group]; !ok {
				bad(f+".group", "no ECMP group is named %q: want one of %s", r.Group, groupNames(c.ECMPGroups))
			}
		}
	}

	if !filepath.IsAbs(c.PinDir) {
		bad("pin_dir", "%q is not an absolute path: want a directory in bpffs, e.g. /sys/fs/bpf/softmrc/%s", c.PinDir, c.Name)
	}
	switch {
	case !filepath.IsAbs(c.Control):
		bad("control_socket", "%q is not an absolute path: want e.g. /run/softmrc/%s.sock", c.Control, c.Name)
	case len(c.Control) > maxSunPathLen:
		bad("control_socket", "path is %d bytes long: unix socket paths must be at most %d", len(c.Control), maxSunPathLen)
	}
	if c.Metrics != "" {
		if strings.HasPrefix(c.Metrics, "/") {
			if len(c.Metrics) > maxSunPathLen {
				bad("metrics", "path is %d bytes long: unix socket paths must be at most %d", len(c.Metrics), maxSunPathLen)
			}
		} else if _, port, err := net.SplitHostPort(c.Metrics); err != nil {
			bad("metrics", "%q is neither host:port nor an absolute unix socket path: want e.g. 127.0.0.1:0", c.Metrics)
		} else if n, err := strconv.ParseUint(port, 10, 16); err != nil || n > 65535 {
			bad("metrics", "port %q in %q is not a TCP port number (0..65535)", port, c.Metrics)
		}
	}
	return errs
}

func names(ps []Port) string {
	if len(ps) == 0 {
		return "(no ports defined)"
	}
	s := make([]string, len(ps))
	for i, p := range ps {
		s[i] = p.Name
	}
	return strings.Join(s, ", ")
}

func groupNames(gs []ECMPGroup) string {
	if len(gs) == 0 {
		return "(no ecmp_groups defined)"
	}
	s := make([]string, len(gs))
	for i, g := range gs {
		s[i] = g.Name
	}
	return strings.Join(s, ", ")
}
