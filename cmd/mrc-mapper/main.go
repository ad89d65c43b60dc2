// Command mrc-mapper is the collector of the path-probe agents that run in
// every mrc-nicd (path_probes in the NIC config): it gathers each host's
// loop statistics (to its T0s, through them to each T1 and back) and
// builds the link map with the seed's localisation rule (nic/pathprobe):
// every NIC–T0 and T0–T1 link, or a whole switch, good, lossy (with its
// loss) or dead, and the evidence.
//
//	mrc-mapper map --dir RUNDIR [--json] [--bad]
//	mrc-mapper map -d SOCKET [-d SOCKET ...] [--json] [--bad]
//	mrc-mapper map --agent ADDR [--agent ADDR ...] [--json] [--bad]
//	mrc-mapper watch (--dir RUNDIR | -d SOCKET ... | --agent ADDR ...) [--deny] [--hold 2s] [--interval 100ms] [--duration 60s]
//	mrc-mapper agent [--listen ADDR] -d SOCKET [--deny --token-file FILE]
//	mrc-mapper roundtrip (-d SOCKET | --agent ADDR) --via HOST [--path PLANE,T1] [--back T1]
//
// The agent serves its host's loops over HTTP on the management network
// (agent.go), so the collector need not run on the hosts' machine.
//
// watch prints every change of a link's state; with --deny it also puts
// each bad link into the denylist of every NIC (mrcctl deny link) and
// takes it out once the link has been good for --hold.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/softmrc/softmrc/nic/pathprobe"
	"github.com/softmrc/softmrc/nic/verbs"
	"github.com/softmrc/softmrc/nic/vproto"
)

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "mrc-mapper:", err)
		os.Exit(1)
	}
}

const usage = `usage: mrc-mapper map (--dir RUNDIR | -d SOCKET ... | --agent ADDR ...) [--json | --prom] [--bad] [--png FILE]
       mrc-mapper watch (--dir RUNDIR | -d SOCKET ... | --agent ADDR ...) [--deny] [--hold D] [--interval D] [--duration D] [--metrics ADDR] [--token-file FILE]
       mrc-mapper agent [--listen ADDR] -d SOCKET [--deny --token-file FILE]
       mrc-mapper roundtrip (-d SOCKET | --agent ADDR) --via HOST [--path PLANE,T1] [--back T1] [-c COUNT]

Reads the path-probe statistics of every host's mrc-nicd (their device
sockets: those of a mrc-testbed run folder, or each -d; or, over the
management network, each --agent: a mrc-mapper agent on that host) and
prints the link map: every NIC–T0 and T0–T1 link (or a whole switch) as good, lossy with its
loss over the probe window, or dead, with the evidence. The NICs must run
with path_probes set (e.g. 5ms).

watch maps every --interval for --duration and prints each change of a
link's state. With --deny, a link that turns bad is denied on every NIC
(a NIC–T0 link: that host's plane; a T0–T1 link: every path over it; a
whole switch: every link of it seen so far) and allowed again once it has been good for --hold. Needs root; through
agents, the agents' shared token (--token-file). With --metrics
it serves the latest map on http://ADDR/metrics (mrc_link_loss,
mrc_link_state) for Prometheus to scrape.

roundtrip has one host's NIC probe an exact round trip through another
host and back (HOST's NIC reflects it; mrc-mapper roundtrip -h).

map --png FILE draws the fabric with its bad links and switches coloured
(good grey, lossy orange, dead red).

`

type socks []string

func (s *socks) String() string     { return strings.Join(*s, ",") }
func (s *socks) Set(v string) error { *s = append(*s, v); return nil }

func run(args []string, out io.Writer) error {
	if len(args) > 0 && args[0] == "agent" {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		return runAgent(ctx, args[1:], nil)
	}
	if len(args) > 0 && args[0] == "roundtrip" {
		return runRoundTrip(args[1:], out)
	}
	if len(args) == 0 || (args[0] != "map" && args[0] != "watch") {
		fmt.Fprint(os.Stderr, usage)
		return errors.New("want the map, watch, agent or roundtrip command")
	}
	watch := args[0] == "watch"
	fs := flag.NewFlagSet("mrc-mapper "+args[0], flag.ContinueOnError)
	deny := fs.Bool("deny", false, "watch: deny bad links on every NIC, allow them after --hold of good")
	hold := fs.Duration("hold", 2*time.Second, "watch --deny: how long a link must be good before its entry is withdrawn")
	interval := fs.Duration("interval", 100*time.Millisecond, "watch: time between maps (at least 10ms)")
	duration := fs.Duration("duration", time.Minute, "watch: stop after this long (at most 24h)")
	dir := fs.String("dir", "", "a mrc-testbed run folder: every host's device socket")
	var ds socks
	fs.Var(&ds, "d", "a host's mrc-nicd device socket (repeatable)")
	var agents socks
	fs.Var(&agents, "agent", "a host's mrc-mapper agent as `host:port`, over the management network (repeatable)")
	asJSON := fs.Bool("json", false, "print the map as JSON")
	asProm := fs.Bool("prom", false, "print the map as Prometheus text exposition (node_exporter's textfile collector reads it)")
	bad := fs.Bool("bad", false, "print only links that are not good")
	pngFile := fs.String("png", "", "map: also draw the fabric with its bad links coloured into this PNG file")
	metrics := fs.String("metrics", "", "watch: serve the latest map as Prometheus metrics on http://ADDR/metrics")
	var tok tokenFlags
	tok.register(fs)
	fs.Usage = func() { fmt.Fprint(fs.Output(), usage); fs.PrintDefaults() }
	if err := fs.Parse(args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	if *dir != "" {
		s, err := runSockets(*dir)
		if err != nil {
			return err
		}
		ds = append(ds, s...)
	}
	var srcs []source
	for _, s := range ds {
		srcs = append(srcs, sockSource(s))
	}
	token, err := tok.load()
	if err != nil {
		return err
	}
	if watch && *deny && len(agents) > 0 && token == "" {
		return errors.New("watch --deny through --agent needs the agents' shared token: --token-file FILE (or --token)")
	}
	for _, a := range agents {
		srcs = append(srcs, newAgentSource(a, token))
	}
	if len(srcs) == 0 {
		return errors.New("no hosts: give --dir RUNDIR, -d SOCKET or --agent ADDR")
	}
	if watch {
		if *interval < 10*time.Millisecond || *duration <= 0 || *duration > 24*time.Hour {
			return fmt.Errorf("--interval %v (at least 10ms) or --duration %v (up to 24h) out of range", *interval, *duration)
		}
		var pub *promMap
		if *metrics != "" {
			var err error
			if pub, err = serveMetrics(*metrics); err != nil {
				return err
			}
			defer pub.close()
		}
		return watchLoop(srcs, out, *deny, *hold, *interval, *duration, pub)
	}
	links, err := mapOnce(srcs)
	if err != nil {
		return err
	}
	if *pngFile != "" {
		if err := writePNG(*pngFile, links); err != nil {
			return err
		}
	}
	if *bad {
		kept := links[:0]
		for _, l := range links {
			if l.State != pathprobe.Good {
				kept = append(kept, l)
			}
		}
		links = kept
	}
	if *asProm {
		writeProm(out, links)
		return nil
	}
	if *asJSON {
		b, _ := json.MarshalIndent(links, "", "  ")
		fmt.Fprintf(out, "%s\n", b)
		return nil
	}
	tw := tabwriter.NewWriter(out, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "LINK\tKIND\tSTATE\tLOSS\tEVIDENCE")
	for _, l := range links {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%.1f%%\t%s\n", l.Name, l.Kind, l.State, 100*l.Loss, l.Evidence)
	}
	return tw.Flush()
}

func mapOnce(srcs []source) ([]pathprobe.Link, error) {
	var all []pathprobe.Stats
	for _, s := range srcs {
		st, err := s.stats()
		if err != nil {
			return nil, err
		}
		all = append(all, st...)
	}
	return pathprobe.Localise(all), nil
}

// watchLoop maps every interval until duration has passed, printing
// changes and, with deny, keeping the NICs' denylists in line with the map.
func watchLoop(ds []source, out io.Writer, deny bool, hold, interval, duration time.Duration, pub *promMap) error {
	start := time.Now()
	state := map[string]string{}     // link -> last state printed
	denied := map[string]time.Time{} // link -> when it was last seen bad
	switches := map[string]bool{}    // names that were switch rows
	stamp := func() string { return fmt.Sprintf("%8.3fs", time.Since(start).Seconds()) }
	for time.Since(start) < duration {
		links, err := mapOnce(ds)
		if err != nil {
			return err
		}
		pub.set(links)
		now := time.Now()
		markBad := func(link string) {
			if _, ok := denied[link]; !ok {
				n := denyAll(ds, vproto.CtlDeny, link)
				fmt.Fprintf(out, "%s deny link %s on %d NICs\n", stamp(), link, n)
			}
			denied[link] = now
		}
		// A switch is in the map only while bad: one that left it is
		// good again.
		inMap := map[string]bool{}
		for _, l := range links {
			inMap[l.Name] = true
		}
		for name, st := range state {
			if switches[name] && !inMap[name] && st != pathprobe.Good {
				fmt.Fprintf(out, "%s %s %s -> %s\n", stamp(), name, st, pathprobe.Good)
				state[name] = pathprobe.Good
			}
		}
		for _, l := range links {
			if l.Kind == "switch" {
				switches[l.Name] = true
			}
			if old, ok := state[l.Name]; (ok || l.State != pathprobe.Good) && old != l.State {
				fmt.Fprintf(out, "%s %s %s -> %s (%.1f%% loss) %s\n", stamp(), l.Name, orGood(old), l.State, 100*l.Loss, l.Evidence)
			}
			state[l.Name] = l.State
			if !deny {
				continue
			}
			if l.Kind == "switch" {
				// A bad switch hides its links from the map; deny
				// every link of it seen before. They come back into
				// the map when it is repaired and are allowed again
				// once good for hold, as any link.
				if l.State != pathprobe.Good {
					for _, name := range linksOf(state, l.Name) {
						markBad(name)
					}
				}
				continue
			}
			if l.State != pathprobe.Good {
				markBad(l.Name)
			} else if t, ok := denied[l.Name]; ok && now.Sub(t) >= hold {
				n := denyAll(ds, vproto.CtlAllow, l.Name)
				fmt.Fprintf(out, "%s allow link %s on %d NICs (good for %v)\n", stamp(), l.Name, n, hold)
				delete(denied, l.Name)
			}
		}
		time.Sleep(interval)
	}
	return nil
}

// linksOf lists the links in seen (link names: A--B) with sw at one end,
// sorted.
func linksOf(seen map[string]string, sw string) []string {
	var out []string
	for name := range seen {
		if a, b, ok := strings.Cut(name, "--"); ok && (a == sw || b == sw) {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
}

func orGood(s string) string {
	if s == "" {
		return pathprobe.Good
	}
	return s
}

// denyAll sends deny or allow of link to every NIC and returns how many
// took it (a NIC whose paths do not cross the link refuses it).
func denyAll(ds []source, cmd vproto.CtlCmd, link string) int {
	n := 0
	for _, s := range ds {
		if err := s.ctl(cmd, link); err != nil {
			fmt.Fprintf(os.Stderr, "mrc-mapper: %s %s on %s: %v\n", cmd, link, s, err)
			continue
		}
		n++
	}
	return n
}

func hostStats(sock string) ([]pathprobe.Stats, error) {
	d, err := verbs.OpenControl(sock)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	var st []pathprobe.Stats
	if err := d.Ctl(vproto.CtlRequest{Cmd: vproto.CtlPaths}, &st); err != nil {
		return nil, fmt.Errorf("%s: %w", sock, err)
	}
	return st, nil
}

// runSockets lists the device sockets of a testbed run's hosts: the
// folder of each host's NIC config holds <host>.sock (testbed/plan).
func runSockets(dir string) ([]string, error) {
	b, err := os.ReadFile(filepath.Join(dir, "plan.yaml"))
	if err != nil {
		return nil, fmt.Errorf("--dir %s: %w (is it a mrc-testbed run folder?)", dir, err)
	}
	var p struct {
		Hosts []struct {
			Name      string `yaml:"name"`
			NICConfig string `yaml:"nic_config"`
		} `yaml:"hosts"`
	}
	if err := yaml.Unmarshal(b, &p); err != nil {
		return nil, fmt.Errorf("--dir %s: plan.yaml: %w", dir, err)
	}
	var out []string
	for _, h := range p.Hosts {
		s := filepath.Join(filepath.Dir(h.NICConfig), h.Name+".sock")
		if _, err := os.Stat(s); err == nil {
			out = append(out, s)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("--dir %s: no host has a device socket (are the mrc-nicd daemons running?)", dir)
	}
	return out, nil
}

// writeProm prints the map in the Prometheus text format: per link its
// loss over the probe window and its state (0 good, 1 lossy, 2 dead).
func writeProm(out io.Writer, links []pathprobe.Link) {
	fmt.Fprintln(out, "# HELP mrc_link_loss Probe loss over the window of the loops that cross the link (mrc-mapper).")
	fmt.Fprintln(out, "# TYPE mrc_link_loss gauge")
	for _, l := range links {
		fmt.Fprintf(out, "mrc_link_loss{link=%q,kind=%q} %g\n", l.Name, l.Kind, l.Loss)
	}
	fmt.Fprintln(out, "# HELP mrc_link_state Link state from the path probes: 0 good, 1 lossy, 2 dead.")
	fmt.Fprintln(out, "# TYPE mrc_link_state gauge")
	for _, l := range links {
		v := 0
		switch l.State {
		case pathprobe.Lossy:
			v = 1
		case pathprobe.Dead:
			v = 2
		}
		fmt.Fprintf(out, "mrc_link_state{link=%q,kind=%q} %d\n", l.Name, l.Kind, v)
	}
}
