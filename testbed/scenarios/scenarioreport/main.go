// Command scenarioreport turns the raw outputs of the issue-11 scenario
// scripts into their reports: verdicts computed from the measured numbers,
// a Markdown table, JSON/CSV and a PNG figure.
//
//	go run ./testbed/scenarios/scenarioreport s7 RAWDIR OUTDIR   # s7-collectives.sh
//	go run ./testbed/scenarios/scenarioreport s8 S8CSV PNG       # s8-incast.sh
//
// s7 exits 1 when a verdict fails (the files are written first), 2 on bad
// input.
package main

import (
	"fmt"
	"os"
)

func main() {
	if len(os.Args) != 4 || (os.Args[1] != "s7" && os.Args[1] != "s8") {
		fmt.Fprintln(os.Stderr, "usage: scenarioreport s7 RAWDIR OUTDIR | s8 S8CSV PNG")
		os.Exit(2)
	}
	var err error
	failed := false
	switch os.Args[1] {
	case "s7":
		var r *S7Result
		if r, err = LoadS7(os.Args[2]); err == nil {
			err = WriteS7(r, os.Args[3])
			for _, v := range r.Verdicts {
				failed = failed || !v.Pass
			}
		}
	case "s8":
		err = S8Figure(os.Args[2], os.Args[3])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "scenarioreport:", err)
		os.Exit(2)
	}
	if failed {
		fmt.Fprintln(os.Stderr, "scenarioreport: some verdicts FAILED (see the table)")
		os.Exit(1)
	}
}
