// Package hostmap carries a testbed's host names to the commands it runs.
// mrc-testbed exec puts "h0=ADDR,h1=ADDR,..." (each host's management
// address) in MRC_HOSTS, and the tools that dial a peer by name
// (mrc-write-bw's client, a rendezvous) look the name up there before the
// resolver: `mrc-write-bw h3` in a testbed host works as a perftest user
// expects, and no name query goes to a resolver the namespace cannot reach.
package hostmap

import (
	"fmt"
	"maps"
	"net"
	"net/netip"
	"slices"
	"strings"
)

// Env is the environment variable that holds the map.
const Env = "MRC_HOSTS"

// Format is the map as Env's value, sorted by name.
func Format(m map[string]netip.Addr) string {
	var b strings.Builder
	for i, n := range slices.Sorted(maps.Keys(m)) {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(n + "=" + m[n].String())
	}
	return b.String()
}

// Parse reads Env's value; an empty value is an empty map.
func Parse(s string) (map[string]netip.Addr, error) {
	m := map[string]netip.Addr{}
	if s == "" {
		return m, nil
	}
	for _, kv := range strings.Split(s, ",") {
		name, a, ok := strings.Cut(kv, "=")
		if !ok || name == "" {
			return nil, fmt.Errorf("%s: %q is not NAME=ADDRESS", Env, kv)
		}
		addr, err := netip.ParseAddr(a)
		if err != nil {
			return nil, fmt.Errorf("%s: %s: %w", Env, name, err)
		}
		m[name] = addr
	}
	return m, nil
}

// Resolve replaces the host of hostport ("h3", "h3:18515", "[h3]:18515")
// with its address when env (Env's value) names it, and returns hostport
// unchanged otherwise. The error is for a malformed env only.
func Resolve(env, hostport string) (string, error) {
	if env == "" {
		return hostport, nil
	}
	m, err := Parse(env)
	if err != nil {
		return "", err
	}
	host, port, err := net.SplitHostPort(hostport)
	if err != nil {
		host, port = hostport, ""
	}
	a, ok := m[host]
	if !ok {
		return hostport, nil
	}
	if port == "" {
		return a.String(), nil
	}
	return net.JoinHostPort(a.String(), port), nil
}

// Names lists the names env holds, sorted (for error messages).
func Names(env string) []string {
	m, err := Parse(env)
	if err != nil {
		return nil
	}
	return slices.Sorted(maps.Keys(m))
}
