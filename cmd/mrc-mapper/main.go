// Command mrc-mapper is the collector of the path-probe agents that run in
// every mrc-nicd (path_probes in the NIC config): it gathers each host's
// loop statistics (to its T0s, through them to each T1 and back) and
// builds the link map with the seed's localisation rule (nic/pathprobe):
// every NIC–T0 and T0–T1 link, or a whole switch, good, lossy (with its
// loss) or dead, and the evidence.
//
//	mrc-mapper map --dir RUNDIR [--json] [--bad]
//	mrc-mapper map -d SOCKET [-d SOCKET ...] [--json] [--bad]
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"

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

const usage = `usage: mrc-mapper map (--dir RUNDIR | -d SOCKET ...) [--json] [--bad]

Reads the path-probe statistics of every host's mrc-nicd (their device
sockets: those of a mrc-testbed run folder, or each -d) and prints the link
map: every NIC–T0 and T0–T1 link (or a whole switch) as good, lossy with its
loss over the probe window, or dead, with the evidence. The NICs must run
with path_probes set (e.g. 5ms).

`

type socks []string

func (s *socks) String() string     { return strings.Join(*s, ",") }
func (s *socks) Set(v string) error { *s = append(*s, v); return nil }

func run(args []string, out io.Writer) error {
	if len(args) == 0 || args[0] != "map" {
		fmt.Fprint(os.Stderr, usage)
		return errors.New("want the map command")
	}
	fs := flag.NewFlagSet("mrc-mapper map", flag.ContinueOnError)
	dir := fs.String("dir", "", "a mrc-testbed run folder: every host's device socket")
	var ds socks
	fs.Var(&ds, "d", "a host's mrc-nicd device socket (repeatable)")
	asJSON := fs.Bool("json", false, "print the map as JSON")
	bad := fs.Bool("bad", false, "print only links that are not good")
	fs.Usage = func() { fmt.Fprint(fs.Output(), usage); fs.PrintDefaults() }
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	if *dir != "" {
		s, err := runSockets(*dir)
		if err != nil {
			return err
		}
		ds = append(ds, s...)
	}
	if len(ds) == 0 {
		return errors.New("no hosts: give --dir RUNDIR or -d SOCKET")
	}
	var all []pathprobe.Stats
	for _, s := range ds {
		st, err := hostStats(s)
		if err != nil {
			return err
		}
		all = append(all, st...)
	}
	links := pathprobe.Localise(all)
	if *bad {
		kept := links[:0]
		for _, l := range links {
			if l.State != pathprobe.Good {
				kept = append(kept, l)
			}
		}
		links = kept
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

func hostStats(sock string) ([]pathprobe.Stats, error) {
	d, err := verbs.Open(sock)
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
