// Command mrc-lab runs experiments on the real softmrc testbed: a scenario
// file names a topology, traffic, a fault timeline, the sampling interval
// and the expectations; mrc-lab brings the fabric up with every daemon,
// drives the traffic, injects the faults, samples, tears down and writes the
// raw samples, the series, one figure per series group and report.md with a
// PASS/FAIL per claim computed from the samples (docs/lab.md).
//
//	mrc-lab list
//	mrc-lab check FILE|NAME...|all
//	mrc-lab run [--out DIR] [--bin DIR] FILE|NAME|all...
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/softmrc/softmrc/internal/cliargs"
	"github.com/softmrc/softmrc/testbed/lab"
	"github.com/softmrc/softmrc/testbed/lab/report"
	"github.com/softmrc/softmrc/testbed/lab/scenario"
	"github.com/softmrc/softmrc/testbed/scenarios"
)

const usage = `usage:
  mrc-lab list                                  the shipped scenarios (testbed/scenarios/)
  mrc-lab check FILE|NAME...|all                parse and validate scenario files
  mrc-lab run [options] FILE|NAME|all...        run scenarios on a fresh testbed each

run options:
  --out DIR      where results go (default results/<time>); each scenario
                 gets DIR/<name>/ (samples.jsonl, series.csv, fig-*.png,
                 report.md, the tools' output) and DIR/report.md combines them
  --bin DIR      mrc-switchd, mrc-nicd, mrc-write-bw (default $MRC_BIN, then PATH)
  --times N      run each scenario N times in a row (default 1)
  --readme FILE  also write the per-scenario table (runs passing, the
                 headline claim and every failed claim, run by run) into
                 FILE between its reproduce:begin/end markers (make
                 reproduce: README.md)
  --variants A,B run only these variants of a scenario with variants, and
                 only the claims that need no other (an A/B of one variant
                 of S7 in 15-25 s instead of all seven in 5 minutes)
  -v             log the testbed's steps

Needs root (namespaces, XDP, AF_XDP). Ctrl-C stops the run and tears the
testbed down. Exit status 0 when every claim passed (report-only claims,
verdict REPORTED, conditions, HOLDS or DOES NOT HOLD, and claims whose
condition went the other way, N/A, never fail a run), 1 when one failed
or a run broke, 2 on usage errors.
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(stdout, usage)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	switch args[0] {
	case "list":
		for _, n := range scenarios.Names() {
			s, _, err := scenarios.Load(n)
			if err != nil {
				fmt.Fprintf(stdout, "%-22s BROKEN: %v\n", n, err)
				continue
			}
			fmt.Fprintf(stdout, "%-22s %s\n", n, s.Title)
		}
		return 0
	case "check":
		if len(args) == 1 {
			fmt.Fprint(stderr, "mrc-lab check: name at least one scenario (FILE, NAME or all)\n")
			return 2
		}
		names := args[1:]
		if len(names) == 1 && names[0] == "all" { // as run takes it
			names = scenarios.Names()
		}
		bad := 0
		for _, a := range names {
			if _, err := load(a); err != nil {
				fmt.Fprintln(stderr, err)
				bad++
			} else {
				fmt.Fprintf(stdout, "%s: ok\n", a)
			}
		}
		if bad > 0 {
			return 1
		}
		return 0
	case "run":
		return runCmd(ctx, args[1:], stdout, stderr)
	}
	fmt.Fprintf(stderr, "mrc-lab: unknown command %q\n%s", args[0], usage)
	return 2
}

// load reads a scenario from a file path or a shipped name.
func load(a string) (*scenario.Scenario, error) {
	if s, ok, err := scenarios.Load(a); ok {
		return s, err
	}
	if _, err := os.Stat(a); err != nil {
		return nil, fmt.Errorf("%s: no such file and no shipped scenario of that name (mrc-lab list shows them)", a)
	}
	return scenario.Load(a)
}

func runCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	argv := strings.Join(args, " ")
	fs := flag.NewFlagSet("mrc-lab run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, usage) }
	out := fs.String("out", "", "results folder")
	bin := fs.String("bin", "", "folder of the daemons and tools")
	times := fs.Int("times", 1, "runs of each scenario")
	verbose := fs.Bool("v", false, "log the testbed's steps")
	readme := fs.String("readme", "", "file whose reproduce:begin/end block gets the table")
	variants := fs.String("variants", "", "comma-separated variants to run")
	names, err := cliargs.Parse(fs, args)
	if err != nil {
		return 2
	}
	if len(names) == 0 || *times < 1 {
		fmt.Fprint(stderr, "mrc-lab run: name at least one scenario (FILE, NAME or all) and --times ≥ 1\n"+usage)
		return 2
	}
	if len(names) == 1 && names[0] == "all" {
		names = scenarios.Names()
	}
	var list []*scenario.Scenario
	for _, n := range names {
		s, err := load(n)
		if err == nil && *variants != "" {
			s, err = s.Only(strings.Split(*variants, ","))
		}
		if err != nil {
			fmt.Fprintln(stderr, "mrc-lab:", err)
			return 2
		}
		list = append(list, s)
	}
	if *readme != "" {
		// Check the markers before hours of runs, not after.
		if err := spliceFile(*readme, ""); err != nil {
			fmt.Fprintf(stderr, "mrc-lab: --readme %s: %v\n", *readme, err)
			return 2
		}
	}
	if os.Geteuid() != 0 {
		fmt.Fprintln(stderr, "mrc-lab: run needs root (network namespaces, XDP, AF_XDP)")
		return 1
	}
	if *out == "" {
		*out = filepath.Join("results", time.Now().UTC().Format("20060102-150405"))
	}
	level := slog.LevelWarn
	if *verbose {
		level = slog.LevelInfo
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	var outs []*lab.Outcome
	var sections []string
	start := time.Now()
	failed := false
	for _, s := range list {
		for i := 0; i < *times; i++ {
			name := s.Name
			if *times > 1 {
				name = fmt.Sprintf("%s-run%d", s.Name, i+1)
			}
			dir := filepath.Join(*out, name)
			o := lab.Run(ctx, s, lab.Options{BinDir: *bin, OutDir: dir, Progress: stderr, Log: log})
			o.Label = name
			path, err := report.Write(dir, o)
			if err != nil {
				fmt.Fprintf(stderr, "mrc-lab: writing the report of %s: %v\n", name, err)
				failed = true
			}
			outs = append(outs, o)
			v := report.Verdict(o)
			if v != "PASS" {
				failed = true
			}
			fmt.Fprintf(stdout, "%-24s %s  (%v)  %s\n", name, v, o.Took.Round(100*time.Millisecond), path)
			if o.Err != nil {
				fmt.Fprintf(stdout, "  error: %v\n", o.Err)
			}
			for _, r := range o.Results {
				mark := "ok  "
				switch {
				case r.Reported:
					mark = "rep "
				case r.NotApplicable:
					mark = "n/a "
				case r.Condition && r.Pass:
					mark = "if+ "
				case r.Condition:
					mark = "if- "
				case !r.Pass:
					mark = "FAIL"
				}
				fmt.Fprintf(stdout, "  %s %s: %.4g %s (%s)\n", mark, r.Claim, r.Measured, r.Unit, r.Bounds)
			}
			b, _ := os.ReadFile(path)
			sections = append(sections, rebase(string(b), name))
			if ctx.Err() != nil {
				fmt.Fprintln(stderr, "mrc-lab: interrupted; the testbed was taken down")
				return 1
			}
		}
	}
	var b strings.Builder
	host, _ := os.Hostname()
	fmt.Fprintf(&b, "# mrc-lab results\n\nCommand: `mrc-lab run %s`; %d runs in %v on %s (%d CPUs), finished %s. Scenarios: %s.\n\n",
		argv, len(outs), time.Since(start).Round(time.Second), host, runtime.NumCPU(), time.Now().UTC().Format(time.RFC3339), strings.Join(names, ", "))
	b.WriteString(report.Tally(outs))
	b.WriteString("\n")
	b.WriteString(report.Summary(outs))
	b.WriteString("\n")
	for _, s := range sections {
		b.WriteString(s)
	}
	if err := os.WriteFile(filepath.Join(*out, "report.md"), []byte(b.String()), 0o644); err != nil {
		fmt.Fprintln(stderr, "mrc-lab:", err)
		return 1
	}
	fmt.Fprintf(stdout, "combined report: %s\n", filepath.Join(*out, "report.md"))
	if *readme != "" {
		block := fmt.Sprintf("Command: `mrc-lab run %s`; %d runs in %v on %d CPUs, finished %s; load average %s before the first run, %s after the last. The full report is report.md in the output folder (make reproduce: docs/results/lab/report.md).\n\n%s",
			argv, len(outs), time.Since(start).Round(time.Second), runtime.NumCPU(), time.Now().UTC().Format("2006-01-02 15:04 UTC"), outs[0].LoadBefore, outs[len(outs)-1].LoadAfter, report.Digest(outs))
		if err := spliceFile(*readme, block); err != nil {
			fmt.Fprintf(stderr, "mrc-lab: --readme %s: %v\n", *readme, err)
			return 1
		}
		fmt.Fprintf(stdout, "table written into %s\n", *readme)
	}
	if failed {
		return 1
	}
	return 0
}

// spliceFile rewrites the reproduce block of path with block; with block
// empty it only checks that the markers are there.
func spliceFile(path, block string) error {
	doc, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	out, err := report.Splice(string(doc), block)
	if err != nil || block == "" {
		return err
	}
	return os.WriteFile(path, []byte(out), 0o644)
}

// rebase points a scenario report's figure links into its folder and
// turns its heading into a sub-heading of the combined report.
func rebase(md, dir string) string {
	md = strings.ReplaceAll(md, "](fig-", "]("+dir+"/fig-")
	return md
}
