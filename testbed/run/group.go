package run

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/softmrc/softmrc/internal/hostmap"
	"github.com/softmrc/softmrc/testbed/netns"
	"github.com/softmrc/softmrc/testbed/plan"
)

// GroupGrace is how long the other members of an exec group may run on
// after one failed before they get SIGTERM (tools that lost a rank stop by
// themselves; this bounds those that would not).
var GroupGrace = 10 * time.Second

// IsGroup says whether an exec NODE names a group of hosts: a comma list
// (h0,h1,h3) or "hosts" (every host of the run).
func IsGroup(node string) bool { return node == "hosts" || strings.Contains(node, ",") }

// GroupHosts resolves a group to hosts, in rank order.
func GroupHosts(p *plan.Plan, group string) ([]*plan.Host, error) {
	var names []string
	if group == "hosts" {
		for i := range p.Hosts {
			names = append(names, p.Hosts[i].Name)
		}
	} else {
		names = strings.Split(group, ",")
	}
	seen := map[string]bool{}
	var hs []*plan.Host
	for _, n := range names {
		h := p.Host(n)
		if h == nil {
			return nil, fmt.Errorf("exec: %q in group %q is not a host (hosts h0..h%d)", n, group, len(p.Hosts)-1)
		}
		if seen[n] {
			return nil, fmt.Errorf("exec: host %s twice in group %q", n, group)
		}
		seen[n] = true
		hs = append(hs, h)
	}
	return hs, nil
}

// GroupEnv is the environment member i of hosts runs with: its rank, the
// group size, rank 0's management address (the rendezvous of the
// collective tools) and HostEnv.
func GroupEnv(p *plan.Plan, hosts []*plan.Host, i int) []string {
	return append([]string{
		"MRC_RANK=" + strconv.Itoa(i),
		"MRC_NRANKS=" + strconv.Itoa(len(hosts)),
		"MRC_RENDEZVOUS=" + hosts[0].MgmtAddr.Addr().String(),
	}, HostEnv(p, hosts[i])...)
}

// HostEnv is what a command run in host h gets (alone or in a group): its
// NIC's device socket, which every verbs tool reads when -d is not given,
// its NIC's config (MRC_NIC_CONFIG: the perftest-like tools' --in-process
// NIC opens the host's ports from it), the host's name, and every host's management address by name (hostmap:
// `mrc-write-bw h3` dials h3's). They override the caller's: a device
// socket of the machine outside (or of another host) is never the right
// one here.
func HostEnv(p *plan.Plan, h *plan.Host) []string {
	names := make(map[string]netip.Addr, len(p.Hosts))
	for i := range p.Hosts {
		names[p.Hosts[i].Name] = p.Hosts[i].MgmtAddr.Addr()
	}
	return []string{"MRC_DEVICE=" + NICSocket(h), "MRC_NIC_CONFIG=" + h.NICConfig, "MRC_HOST=" + h.Name, hostmap.Env + "=" + hostmap.Format(names)}
}

// ExecGroup runs argv in every host of group at once, member i with
// GroupEnv(i), and prefixes each line it prints with "HOST: ". It returns
// when every member has exited; the error names the members that failed.
// When one fails, the others get SIGTERM after GroupGrace; when ctx ends
// they all get SIGTERM (SIGKILL 5 s later).
func ExecGroup(ctx context.Context, dir, group string, argv []string, stdout, stderr io.Writer) error {
	p, err := LoadPlan(dir)
	if err != nil {
		return err
	}
	hosts, err := GroupHosts(p, group)
	if err != nil {
		return err
	}
	if len(argv) == 0 {
		return errors.New("exec: no command given (mrc-testbed exec h0,h1 -- CMD ...)")
	}
	gctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var outMu sync.Mutex
	errs := make([]error, len(hosts))
	var once sync.Once
	var wg sync.WaitGroup
	for i, h := range hosts {
		cmd := stoppable(gctx, argv)
		cmd.Env = append(os.Environ(), GroupEnv(p, hosts, i)...)
		ow := &prefixWriter{mu: &outMu, w: stdout, prefix: h.Name + ": "}
		ew := &prefixWriter{mu: &outMu, w: stderr, prefix: h.Name + ": "}
		cmd.Stdout, cmd.Stderr = ow, ew
		if err := netns.Do(h.NS, cmd.Start); err != nil {
			errs[i] = fmt.Errorf("%s: start %s: %w", h.Name, argv[0], err)
			cancel()
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := waitStoppable(gctx, cmd)
			ow.flush()
			ew.flush()
			if err != nil {
				errs[i] = fmt.Errorf("%s: %w", h.Name, err)
				once.Do(func() { time.AfterFunc(GroupGrace, cancel) })
			}
		}()
	}
	wg.Wait()
	var failed []error
	for _, e := range errs {
		if e != nil {
			failed = append(failed, e)
		}
	}
	if len(failed) == 1 {
		// Keep the exit status of a single failure (mrc-testbed exits with it).
		return failed[0]
	}
	return errors.Join(failed...)
}

// prefixWriter writes whole lines, each prefixed, under a shared lock so
// that members' lines never interleave.
type prefixWriter struct {
	mu     *sync.Mutex
	w      io.Writer
	prefix string
	buf    []byte
}

func (p *prefixWriter) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.buf = append(p.buf, b...)
	for {
		i := bytes.IndexByte(p.buf, '\n')
		if i < 0 {
			break
		}
		if _, err := fmt.Fprintf(p.w, "%s%s\n", p.prefix, p.buf[:i]); err != nil {
			return 0, err
		}
		p.buf = p.buf[i+1:]
	}
	return len(b), nil
}

func (p *prefixWriter) flush() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.buf) > 0 {
		fmt.Fprintf(p.w, "%s%s\n", p.prefix, p.buf)
		p.buf = nil
	}
}
