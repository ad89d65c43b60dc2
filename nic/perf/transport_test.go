package perf

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/softmrc/softmrc/nic/daemon/daemontest"
)

// runPairSplit is runPair with separate server and client arguments.
func runPairSplit(t *testing.T, kind Kind, planes int, sargs, cargs []string) (cout, sout string, cerr, serr error) {
	t.Helper()
	pr := daemontest.Start(t, planes)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	sp, err := Parse(kind, append([]string{"-d", pr.Sock[1], "--bind", "127.0.0.1", "-p", "0"}, sargs...), &syncBuf{})
	if err != nil {
		t.Fatal(err)
	}
	addrc := make(chan string, 1)
	sp.OnListen = func(a string) { addrc <- a }
	serrc := make(chan error, 1)
	var sbuf syncBuf
	go func() { serrc <- Run(ctx, sp, &sbuf, &sbuf) }()
	var addr string
	select {
	case addr = <-addrc:
	case err := <-serrc:
		t.Fatalf("server: %v\n%s", err, sbuf.String())
	}
	_, port, _ := net.SplitHostPort(addr)
	cp, err := Parse(kind, append([]string{"-d", pr.Sock[0], "-p", port, "127.0.0.1"}, cargs...), &syncBuf{})
	if err != nil {
		t.Fatal(err)
	}
	var cbuf syncBuf
	cerr = Run(ctx, cp, &cbuf, &cbuf)
	serr = <-serrc
	return cbuf.String(), sbuf.String(), cerr, serr
}

// TestTransportFlag: --transport roce runs the RoCE baseline end to end
// (the banner says so and --verify checks every byte); sides that disagree
// fail in the out-of-band exchange with an error naming both transports.
func TestTransportFlag(t *testing.T) {
	for _, tc := range []struct {
		name         string
		sargs, cargs []string
		wantErr      string // "" = success
		banner       string
	}{
		{"roce both", []string{"--transport", "roce"}, []string{"--transport", "roce", "-s", "300000", "-n", "5", "--verify"}, "", "Transport type : RoCE"},
		{"mrc default", nil, []string{"-s", "65536", "-n", "5", "--verify"}, "", "Transport type : MRC"},
		{"client roce, server mrc", nil, []string{"--transport", "roce", "-n", "5"}, "transport mismatch: the server runs --transport mrc, the client --transport roce", ""},
		{"client mrc, server roce", []string{"--transport", "roce"}, []string{"-n", "5"}, "transport mismatch: the server runs --transport roce, the client --transport mrc", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cout, sout, cerr, serr := runPairSplit(t, BW, 2, tc.sargs, tc.cargs)
			if tc.wantErr == "" {
				if cerr != nil || serr != nil {
					t.Fatalf("client: %v; server: %v\n%s\n%s", cerr, serr, cout, sout)
				}
				if !strings.Contains(cout, tc.banner) || bwRow.FindString(cout) == "" {
					t.Fatalf("want %q and a result row:\n%s", tc.banner, cout)
				}
				return
			}
			if cerr == nil || !strings.Contains(cerr.Error(), tc.wantErr) {
				t.Fatalf("client error %v, want one containing %q", cerr, tc.wantErr)
			}
			if serr == nil || !strings.Contains(serr.Error(), "transport mismatch") {
				t.Fatalf("server error %v, want a transport mismatch", serr)
			}
		})
	}
	if _, err := Parse(BW, []string{"--transport", "iwarp"}, &syncBuf{}); err == nil || !strings.Contains(err.Error(), "want mrc or roce") {
		t.Fatalf("--transport iwarp: %v", err)
	}
}
