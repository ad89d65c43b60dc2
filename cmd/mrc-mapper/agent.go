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
	d, err := verbs.Open(sock)
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
	addr string
	c    *http.Client
}

func newAgentSource(addr string) agentSource {
	return agentSource{addr: addr, c: &http.Client{Timeout: 2 * time.Second}}
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
	r, err := a.c.PostForm("http://"+a.addr+"/"+op, url.Values{"link": {link}})
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

const agentUsage = `usage: mrc-mapper agent --listen ADDR -d SOCKET [--deny]

Serves the path-probe statistics of the local mrc-nicd (its device socket
-d) over HTTP on ADDR, for a collector on another machine (mrc-mapper map
--agent ADDR): GET /paths returns them as JSON. With --deny it also takes
POST /deny and /allow (form field link=NAME) and passes them to the NIC
(the daemon checks that the agent runs as root). Run it in each host's
network namespace on its management address, e.g.
  mrc-testbed exec h0 -- mrc-mapper agent --listen [fd00:1:ffff::1]:9470 -d RUNDIR/host/h0.sock
It runs until SIGINT or SIGTERM.

`

// runAgent serves until ctx ends; ready gets the address it listens on.
func runAgent(ctx context.Context, args []string, ready func(addr string)) error {
	fs := flag.NewFlagSet("mrc-mapper agent", flag.ContinueOnError)
	listen := fs.String("listen", "", "`host:port` to serve on (the host's management address)")
	sock := fs.String("d", "", "the local mrc-nicd's device `socket`")
	deny := fs.Bool("deny", false, "accept POST /deny and /allow from the collector")
	fs.Usage = func() { fmt.Fprint(fs.Output(), agentUsage); fs.PrintDefaults() }
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	if *listen == "" || *sock == "" {
		return errors.New("agent: want --listen ADDR and -d SOCKET")
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
	for _, op := range []struct {
		path string
		cmd  vproto.CtlCmd
	}{{"POST /deny", vproto.CtlDeny}, {"POST /allow", vproto.CtlAllow}} {
		mux.HandleFunc(op.path, func(w http.ResponseWriter, r *http.Request) {
			if !*deny {
				http.Error(w, "this agent was started without --deny", http.StatusForbidden)
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
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return fmt.Errorf("agent: --listen %s: %w", *listen, err)
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
