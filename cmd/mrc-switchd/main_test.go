package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/softmrc/softmrc/internal/telemetry"
	"github.com/softmrc/softmrc/switchd/ctl"
)

// fakeDaemon answers the control protocol with canned data and records
// fault requests.
func fakeDaemon(t *testing.T) (string, func() []ctl.Fault) {
	path := filepath.Join(t.TempDir(), "sw.sock")
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	var mu sync.Mutex
	var faults []ctl.Fault
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func(c net.Conn) {
				defer c.Close()
				r := bufio.NewReader(c)
				for {
					line, err := ctl.ReadLine(r)
					if err != nil {
						return
					}
					var req ctl.Request
					json.Unmarshal(line, &req)
					resp := ctl.Response{OK: true}
					switch req.Cmd {
					case ctl.CmdReady:
						resp.Ready = &ctl.Ready{Switch: "sw", Ready: true, PID: 42}
					case ctl.CmdStats:
						resp.Stats = &ctl.Stats{Switch: "sw", Mode: "srv6", Ports: []ctl.PortStats{{Name: "up0", Interface: "veth1", Role: "fabric",
							Fault: ctl.FaultState{Loss: 0.5}, Counters: ctl.Counters{RxPackets: 9, Drops: ctl.Drops{NoRoute: 3}}}}}
					case ctl.CmdRoutes:
						resp.Routes = []ctl.Route{{Prefix: "5f00:1::/32", Group: "g", Ports: []string{"a", "b"}}, {Prefix: "5f00:1:100::/48", Port: "up0"}}
					case ctl.CmdWatch:
						// The answer, then sample lines until the client goes.
						c.Write([]byte("{\"ok\":true}\n"))
						for i := 0; i < 1000; i++ {
							s := telemetry.Sample{T: int64(i + 1), Source: "sw", Kind: telemetry.KindSwitchPort, ID: "up0",
								Values: map[string]float64{telemetry.KeyTxBytes: float64(i)}}
							if _, err := c.Write(telemetry.AppendJSON(nil, &s)); err != nil {
								return
							}
						}
						return
					case ctl.CmdFault:
						if req.Fault.Target != "up0" {
							resp = ctl.Response{Error: `no port named "` + req.Fault.Target + `"`}
						} else {
							mu.Lock()
							faults = append(faults, *req.Fault)
							mu.Unlock()
						}
					}
					b, _ := json.Marshal(resp)
					c.Write(append(b, '\n'))
				}
			}(c)
		}
	}()
	return path, func() []ctl.Fault { mu.Lock(); defer mu.Unlock(); return append([]ctl.Fault(nil), faults...) }
}

func TestCLI(t *testing.T) {
	sock, faults := fakeDaemon(t)
	for _, tc := range []struct {
		args []string
		code int
		out  []string // substrings of stdout+stderr
	}{
		{[]string{"help"}, 0, []string{"usage:"}},
		{[]string{"frobnicate"}, 2, []string{`unknown command "frobnicate"`}},
		{[]string{"run"}, 2, []string{"want -c FILE"}},
		{[]string{"run", "-c", "x.yaml", "--attach", "sideways"}, 2, []string{`--attach "sideways"`}},
		{[]string{"check", "-c", "../../switchd/config/testdata/t0.yaml"}, 0, []string{"ok: switch t0-p0-0 mode srv6"}},
		{[]string{"check", "-c", "/nonexistent.yaml"}, 1, []string{"read switch config"}},
		{[]string{"stats"}, 2, []string{"which switch?"}},
		{[]string{"stats", "--ctl", sock}, 0, []string{"switch sw mode srv6 forwarding", "loss=0.5", "NO_ROUTE"}},
		{[]string{"stats", "--ctl", sock, "--json"}, 0, []string{`"rx_packets": 9`, `"no_route": 3`}},
		{[]string{"routes", "--ctl", sock}, 0, []string{"group g [a b]", "port up0"}},
		{[]string{"wait", "--ctl", sock}, 0, []string{"sw ready (pid 42"}},
		{[]string{"fault", "--ctl", sock, "up0", "loss=1%"}, 0, []string{"fault up0 loss=0.01: ok"}},
		{[]string{"fault", "--ctl", sock, "zz", "down"}, 1, []string{`no port named "zz"`}},
		{[]string{"fault", "--ctl", sock, "up0", "loss=7"}, 1, []string{"want loss=P"}},
		{[]string{"fault", "--ctl", sock, "up0"}, 2, []string{"want TARGET SPEC"}},
		{[]string{"stats", "--ctl", filepath.Join(t.TempDir(), "none.sock")}, 1, []string{"is the daemon running?"}},
		{[]string{"watch", "--ctl", sock, "--count", "3"}, 0, []string{`{"t":3,"src":"sw","kind":"swport","id":"up0","v":{"tx_bytes":2}}`}},
		{[]string{"watch", "--ctl", sock, "--interval", "1us"}, 1, []string{"want 1ms to 10s"}},
		{[]string{"watch", "--ctl", sock, "extra"}, 2, []string{"watch takes no arguments"}},
		{[]string{"watch", "--ctl", filepath.Join(t.TempDir(), "none.sock")}, 1, []string{"is the daemon running?"}},
	} {
		var out bytes.Buffer
		code := run(tc.args, &out, &out)
		if code != tc.code {
			t.Errorf("%v: exit %d, want %d\n%s", tc.args, code, tc.code, out.String())
		}
		for _, w := range tc.out {
			if !strings.Contains(out.String(), w) {
				t.Errorf("%v: output lacks %q:\n%s", tc.args, w, out.String())
			}
		}
	}
	if got := faults(); len(got) != 1 || got[0] != (ctl.Fault{Target: "up0", Action: ctl.ActLoss, Loss: 0.01}) {
		t.Errorf("faults received: %+v", got)
	}
}
