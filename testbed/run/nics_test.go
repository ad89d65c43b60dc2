package run

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/softmrc/softmrc/nic/perf"
	"github.com/softmrc/softmrc/testbed/plan"
	"github.com/softmrc/softmrc/testbed/topo"
)

// TestNICsUpTraffic: a topology with nics: true comes up through Up, the
// code `mrc-testbed up` runs, with the real mrc-switchd on every switch and
// the real mrc-nicd on every host, and mrc-write-bw --verify then moves data
// from h0 to h3 across a T1 over both planes, every byte checked.
// (Before the fix, Up failed: its readiness probe dialled the SOCK_SEQPACKET
// device socket as SOCK_STREAM, "protocol wrong type for socket".)
func TestNICsUpTraffic(t *testing.T) {
	p, bin := upNICs(t)
	r := writeBW(t, p, bin, "h0", "h3", 65536, 300)
	t.Logf("h0 -> h3: %d x %d B verified, %.1f %s", r.Iterations, r.MsgSize, r.Average, r.Unit)
}

// upNICs brings clos-2p up with nics: true through Up and checks that an
// mrc-nicd runs on every host; cleanup brings it down and checks that
// nothing is left.
func upNICs(t *testing.T) (*plan.Plan, string) {
	t.Helper()
	needRoot(t)
	bin := bins(t, "mrc-switchd", "mrc-nicd", "mrc-write-bw")
	top, err := topo.Preset("clos-2p")
	if err != nil {
		t.Fatal(err)
	}
	top.NICs = true
	dir := filepath.Join(t.TempDir(), "run")
	p, err := plan.Build(top, plan.Options{Prefix: randPrefix(t), RunDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	var st *State
	t.Cleanup(func() {
		if _, err := os.Stat(StatePath(dir)); err == nil {
			if err := Down(dir, quietLog()); err != nil {
				t.Errorf("down: %v", err)
			}
		}
		checkGone(t, p, st)
	})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	st, err = Up(ctx, p, Options{BinDir: bin, Log: quietLog()})
	if err != nil {
		t.Fatalf("up with nics: true: %v", err)
	}
	nicds := 0
	for _, pr := range st.Processes {
		if pr.Role == "mrc-nicd" && pr.Alive() {
			nicds++
		}
	}
	if nicds != len(p.Hosts) {
		t.Fatalf("%d mrc-nicd running, want one per host (%d)", nicds, len(p.Hosts))
	}
	return p, bin
}

// writeBW runs mrc-write-bw --verify from host from to host to (server
// first, as a user does) and returns the client's result row.
func writeBW(t *testing.T, p *plan.Plan, bin, from, to string, size, iters int) perf.BWResult {
	t.Helper()
	dir := p.RunDir
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	src, dst := p.Host(from), p.Host(to)
	wbw := filepath.Join(bin, "mrc-write-bw")
	tmp := t.TempDir()
	srvOut, _ := os.Create(filepath.Join(tmp, "server.out"))
	cliOut, _ := os.Create(filepath.Join(tmp, "client.json"))
	cliErr, _ := os.Create(filepath.Join(tmp, "client.err"))
	defer srvOut.Close()
	defer cliOut.Close()
	defer cliErr.Close()
	srv := make(chan error, 1)
	go func() { srv <- Exec(ctx, dir, dst.Name, []string{wbw, "-d", NICSocket(dst)}, nil, srvOut, srvOut) }()
	err := Exec(ctx, dir, src.Name, []string{wbw, "-d", NICSocket(src), "-s", strconv.Itoa(size), "-n", strconv.Itoa(iters), "--verify", "--json",
		dst.MgmtAddr.Addr().String()}, nil, cliOut, cliErr)
	if err != nil {
		b, _ := os.ReadFile(cliErr.Name())
		s, _ := os.ReadFile(srvOut.Name())
		t.Fatalf("mrc-write-bw client: %v\n%s\nserver:\n%s", err, b, s)
	}
	if err := <-srv; err != nil {
		s, _ := os.ReadFile(srvOut.Name())
		t.Fatalf("mrc-write-bw server: %v\n%s", err, s)
	}
	b, _ := os.ReadFile(cliOut.Name())
	var doc struct {
		Planes  int             `json:"planes"`
		Results []perf.BWResult `json:"results"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatalf("mrc-write-bw --json: %v\n%s", err, b)
	}
	if len(doc.Results) != 1 {
		t.Fatalf("want one result row, got %+v", doc.Results)
	}
	r := doc.Results[0]
	if r.MsgSize != size || r.Iterations != uint64(iters) || !r.Verified || r.Mismatches != 0 || r.Average <= 0 {
		t.Errorf("result %+v: want %d verified writes of %d bytes, no mismatch", r, iters, size)
	}
	if doc.Planes != 2 {
		t.Errorf("the NIC reports %d planes, want 2", doc.Planes)
	}
	return r
}
