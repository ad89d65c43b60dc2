// Package cliargs parses a command line whose flags and operands come in
// any order, as GNU getopt_long permutes them for perftest and ping
// (`mrc-ping h3 --path 0,1`, `mrc-write-bw h3 -s 4096`): the standard flag
// package stops at the first operand and would leave the flags after it
// unparsed.
package cliargs

import "flag"

// Parse parses args into fs, flags before, between and after operands,
// and returns the operands in order. "--" ends the flags: everything after
// it is an operand.
func Parse(fs *flag.FlagSet, args []string) ([]string, error) {
	var ops []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return ops, nil
		}
		if n := len(args) - len(rest); n > 0 && args[n-1] == "--" {
			return append(ops, rest...), nil
		}
		ops = append(ops, rest[0])
		args = rest[1:]
	}
}
