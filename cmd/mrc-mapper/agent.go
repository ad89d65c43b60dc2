package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/softmrc/softmrc/nic/pathprobe"
	"github.com/softmrc/softmrc/nic/verbs"
	"github.com/softmrc/softmrc/nic/vproto"
)

// A source is one host's path-probe agent as the collector sees it: its
// mrc-nicd's device socket on this machine, or a `mrc-mapper agent` on
// the host's management address.
type source interface {
	stats() ([]pathprobe.Stats, error)
	// ctl denies or allows a link on the host's NIC.
	ctl(cmd vproto.CtlCmd, link string) error
	String() string
}

type sockSource string

func (s sockSource) String() string                           { return string(s) }
func (s sockSource) stats() ([]pathprobe.Stats, error)        { return hostStats(string(s)) }
func (s sockSource) ctl(cmd vproto.CtlCmd, link string) error { return sockCtl(string(s), cmd, link) }

func sockCtl(sock string, cmd vproto.CtlCmd, link string) error {
	d, err := verbs.OpenControl(sock)
	if err != nil {
		return err
	}
	defer d.Close()
	var r vproto.CtlResult
	return d.Ctl(vproto.CtlRequest{Cmd: cmd, Scope: vproto.ScopeLink, Link: link}, &r)
}

// agentSource dials a `mrc-mapper agent` over HTTP (the management
// network): GET /paths for the stats, POST /deny and /allow for the
// denylist.
type agentSource struct {
	addr  string
	token string // sent with deny and allow
	c     *http.Client
}

func newAgentSource(addr, token string) agentSource {
	return agentSource{addr: addr, token: token, c: &http.Client{Timeout: 2 * time.Second}}
}

func (a agentSource) String() string { return "agent " + a.addr }

func (a agentSource) stats() ([]pathprobe.Stats, error) {
	r, err := a.c.Get("http://" + a.addr + "/paths")
	if err != nil {
		return nil, fmt.Errorf("agent %s: %w (is `mrc-mapper agent --listen %s` running on that host?)", a.addr, err, a.addr)
	}
	defer r.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(r.Body, 16<<20))
	if r.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("agent %s: %s", a.addr, strings.TrimSpace(string(b)))
	}
	var st []pathprobe.Stats
	if err := json.Unmarshal(b, &st); err != nil {
		return nil, fmt.Errorf("agent %s: /paths: %w", a.addr, err)
	}
	return st, nil
}

func (a agentSource) ctl(cmd vproto.CtlCmd, link string) error {
	op := "deny"
	if cmd == vproto.CtlAllow {
		op = "allow"
	}
	req, err := http.NewRequest(http.MethodPost, "http://"+a.addr+"/"+op, strings.NewReader(url.Values{"link": {link}}.Encode()))
	if err != nil {
		return fmt.Errorf("agent %s: %w", a.addr, err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if a.token != "" {
		req.Header.Set("Authorization", "Bearer "+a.token)
	}
	r, err := a.c.Do(req)
	if err != nil {
		return fmt.Errorf("agent %s: %w", a.addr, err)
	}
	defer r.Body.Close()
	if r.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(r.Body, 64<<10))
		return fmt.Errorf("agent %s: %s", a.addr, strings.TrimSpace(string(b)))
	}
	return nil
}

const agentUsage = `usage: mrc-mapper agent [--listen ADDR | --mgmt-if IF --port N] -d SOCKET [--deny --token-file FILE]

Serves the path-probe statistics of the local mrc-nicd (its device socket
-d) over HTTP, for a collector on another machine (mrc-mapper map
--agent ADDR): GET /paths returns them as JSON. GET /roundtrip has the NIC
probe a round trip through another host (mrc-mapper roundtrip --agent).

It listens on the host's management address only: by default the first
global address of --mgmt-if (mgmt0, the testbed's management interface)
at --port; --listen names another address, but never a wildcard (::,
0.0.0.0), which would open it on the fabric ports too.

With --deny it also takes POST /deny and /allow (form field link=NAME)
and passes them to the NIC (the daemon checks that the agent runs as
root). Those change the NIC's paths, so --deny needs a shared token
(--token-file, a file only its owner can read, or --token) and refuses
every such request whose "Authorization: Bearer TOKEN" header does not
carry it (HTTP 401). The collector sends it with its own --token-file.
Run it in each host's network namespace, e.g.
  mrc-testbed exec h0 -- mrc-mapper agent -d RUNDIR/host/h0.sock --deny --token-file /root/mapper.token
It runs until SIGINT or SIGTERM.

`

// runAgent serves until ctx ends; ready gets the address it listens on.
func runAgent(ctx context.Context, args []string, ready func(addr string)) error {
	fs := flag.NewFlagSet("mrc-mapper agent", flag.ContinueOnError)
	listen := fs.String("listen", "", "`host:port` to serve on (default: the first global address of --mgmt-if at --port)")
	mgmtIf := fs.String("mgmt-if", "mgmt0", "the management `interface` whose address the agent binds when --listen is not given")
	port := fs.Int("port", 9470, "the TCP `port` on the management address when --listen is not given")
	sock := fs.String("d", "", "the local mrc-nicd's device `socket`")
	deny := fs.Bool("deny", false, "accept POST /deny and /allow carrying the token (needs --token-file or --token)")
	var tok tokenFlags
	tok.register(fs)
	fs.Usage = func() { fmt.Fprint(fs.Output(), agentUsage); fs.PrintDefaults() }
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	if *sock == "" {
		return errors.New("agent: want -d SOCKET (the local mrc-nicd's device socket)")
	}
	token, err := tok.load()
	if err != nil {
		return fmt.Errorf("agent: %w", err)
	}
	if *deny && token == "" {
		return errors.New("agent: --deny lets the collector change the NIC's denylist; give the shared token with --token-file FILE (or --token)")
	}
	addr, err := listenAddr(*listen, *mgmtIf, *port)
	if err != nil {
		return fmt.Errorf("agent: %w", err)
	}
	if _, err := hostStats(*sock); err != nil {
		// The NIC may come up later; the collector gets the error
		// with each request until it does.
		slog.Warn("mrc-mapper agent: the local NIC has no path stats yet", "err", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /paths", func(w http.ResponseWriter, r *http.Request) {
		st, err := hostStats(*sock)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(st)
	})
	// Round trips send a bounded number of probes and change nothing.
	mux.HandleFunc("GET /roundtrip", func(w http.ResponseWriter, r *http.Request) {
		a, err := parseQuery(r.URL.Query())
		if err != nil {
			http.Error(w, "roundtrip: "+err.Error(), http.StatusBadRequest)
			return
		}
		res, err := sockRoundTrip(*sock, a)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(res)
	})
	for _, op := range []struct {
		path string
		cmd  vproto.CtlCmd
	}{{"POST /deny", vproto.CtlDeny}, {"POST /allow", vproto.CtlAllow}} {
		mux.HandleFunc(op.path, func(w http.ResponseWriter, r *http.Request) {
			if !*deny {
				http.Error(w, "this agent was started without --deny", http.StatusForbidden)
				return
			}
			if !authorized(r, token) {
				slog.Warn("mrc-mapper agent: refused a request without the token", "op", op.cmd, "from", r.RemoteAddr)
				w.Header().Set("WWW-Authenticate", `Bearer realm="mrc-mapper"`)
				http.Error(w, "this request changes the NIC's denylist: send the agent's shared token as \"Authorization: Bearer TOKEN\" (mrc-mapper --token-file FILE)", http.StatusUnauthorized)
				return
			}
			link := r.FormValue("link")
			if err := sockCtl(*sock, op.cmd, link); err != nil {
				http.Error(w, fmt.Sprintf("%s link %s: %v", op.cmd, link, err), http.StatusBadRequest)
				return
			}
			slog.Info("denylist", "op", op.cmd, "link", link, "from", r.RemoteAddr)
		})
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("agent: listen on %s: %w", addr, err)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { <-ctx.Done(); srv.Close() }()
	slog.Info("mrc-mapper agent serving", "listen", ln.Addr().String(), "nic", *sock, "deny", *deny)
	if ready != nil {
		ready(ln.Addr().String())
	}
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
