package main

import (
	"crypto/subtle"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strconv"
	"strings"
)

// The agent's HTTP endpoint sits on the management network. Reading the
// loops is harmless; deny and allow change every application's paths on
// the host, so they need a token shared by the collector and the agents,
// and the agent binds the management address only (a wildcard would
// expose it on the fabric ports as well).

// tokenFlags are --token-file and --token, of the agent and the collector.
type tokenFlags struct{ file, value string }

func (t *tokenFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&t.file, "token-file", "", "`file` holding the shared token that deny and allow requests to the agents carry (mode 0600)")
	fs.StringVar(&t.value, "token", "", "the shared `token` itself (visible in ps; prefer --token-file)")
}

// load returns the token ("" when neither flag is given).
func (t tokenFlags) load() (string, error) {
	if t.file != "" && t.value != "" {
		return "", errors.New("give --token-file or --token, not both")
	}
	if t.value != "" {
		return t.value, nil
	}
	if t.file == "" {
		return "", nil
	}
	st, err := os.Stat(t.file)
	if err != nil {
		return "", fmt.Errorf("--token-file: %w", err)
	}
	if st.Mode().Perm()&0o077 != 0 {
		return "", fmt.Errorf("--token-file %s is readable by others (mode %v); chmod 600 it", t.file, st.Mode().Perm())
	}
	b, err := os.ReadFile(t.file)
	if err != nil {
		return "", fmt.Errorf("--token-file: %w", err)
	}
	tok := strings.TrimSpace(string(b))
	if tok == "" {
		return "", fmt.Errorf("--token-file %s is empty", t.file)
	}
	return tok, nil
}

// authorized reports whether r carries "Authorization: Bearer token"
// (compared in constant time).
func authorized(r *http.Request, token string) bool {
	got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	return ok && token != "" && subtle.ConstantTimeCompare([]byte(got), []byte(token)) == 1
}

// listenAddr is where the agent listens: listen if given (not a
// wildcard), else the first global unicast address of interface mgmtIf
// at port.
func listenAddr(listen, mgmtIf string, port int) (string, error) {
	if listen != "" {
		host, _, err := net.SplitHostPort(listen)
		if err != nil {
			return "", fmt.Errorf("--listen %s: %w", listen, err)
		}
		if a, err := netip.ParseAddr(host); host == "" || (err == nil && a.IsUnspecified()) {
			return "", fmt.Errorf("--listen %s binds every interface, the fabric's too; name the management address (or omit --listen to use %s's)", listen, mgmtIf)
		}
		return listen, nil
	}
	if port <= 0 || port > 65535 {
		return "", fmt.Errorf("--port %d: want 1..65535", port)
	}
	ifc, err := net.InterfaceByName(mgmtIf)
	if err != nil {
		return "", fmt.Errorf("no --listen and no management interface %q (%v); give --listen ADDR or --mgmt-if", mgmtIf, err)
	}
	addrs, err := ifc.Addrs()
	if err != nil {
		return "", fmt.Errorf("addresses of %s: %w", mgmtIf, err)
	}
	for _, a := range addrs {
		if p, err := netip.ParsePrefix(a.String()); err == nil && p.Addr().IsGlobalUnicast() {
			return net.JoinHostPort(p.Addr().String(), strconv.Itoa(port)), nil
		}
	}
	return "", fmt.Errorf("management interface %s has no global address; give --listen ADDR", mgmtIf)
}
