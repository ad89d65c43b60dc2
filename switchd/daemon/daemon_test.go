package daemon

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/softmrc/softmrc/switchd/config"
	"github.com/softmrc/softmrc/switchd/ctl"
	"github.com/softmrc/softmrc/switchd/dataplane"

	"github.com/softmrc/softmrc/internal/wire"
)

func testConfig(t testing.TB) *config.Config {
	dir := t.TempDir()
	return &config.Config{
		Name:  "tsw",
		Block: netip.MustParsePrefix("5f00:1::/32"),
		USIDs: []wire.USID{0x4000},
		Ports: []config.Port{
			{Name: "h0", Interface: "eth-h0", NeighbourMAC: wire.MAC{2, 0, 0, 0, 1, 0}, Role: config.RoleHost},
			{Name: "u0", Interface: "eth-u0", NeighbourMAC: wire.MAC{2, 0, 0, 0, 2, 0}, Role: config.RoleFabric,
				Model: &config.PortModel{CapacityBps: 1e9, ECNThreshold: 1000, TrimThreshold: 2000, Buffer: 4000}},
			{Name: "u1", Interface: "eth-u1", NeighbourMAC: wire.MAC{2, 0, 0, 0, 2, 1}, Role: config.RoleFabric},
		},
		FIB: []config.Route{
			{Prefix: netip.MustParsePrefix("5f00:1:c000::/48"), Port: "h0"},
			{Prefix: netip.MustParsePrefix("5f00:1:100::/48"), Port: "u0"},
			{Prefix: netip.MustParsePrefix("5f00:1::/32"), Group: "up"},
		},
		ECMPGroups: []config.ECMPGroup{{Name: "up", Ports: []string{"u0", "u1"}}},
		PinDir:     filepath.Join(dir, "pins"),
		Control:    filepath.Join(dir, "tsw.sock"),
	}
}

type harness struct {
	t     testing.TB
	pins  *fakePins
	links *fakeLinks
}

func newHarness(t testing.TB) *harness {
	h := &harness{t: t, pins: newFakePins(), links: newFakeLinks()}
	h.links.pins = h.pins
	h.links.add("eth-h0", 10, 100, "peer-h0") // veth whose peer is visible here
	h.links.add("eth-u0", 11, 0, "")
	h.links.add("eth-u1", 12, 0, "")
	h.links.addrs["eth-u0"] = []netip.Addr{netip.MustParseAddr("fe80::1"), netip.MustParseAddr("fd00:ff::7")}
	return h
}

// start runs a daemon for cfg and waits until it is ready; the returned
// function stops it (as SIGTERM does) and returns Run's error.
func (h *harness) start(cfg *config.Config) (*Daemon, func() error) {
	h.t.Helper()
	d, err := New(Options{Config: cfg, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Backend: h.pins.backend(), Links: h.links, AnyPinDir: true})
	if err != nil {
		h.t.Fatal(err)
	}
	// The fake pin dir must look non-empty once something is pinned, as
	// bpffs does.
	if h.pins.pinned {
		os.MkdirAll(cfg.PinDir, 0o755)
		os.WriteFile(filepath.Join(cfg.PinDir, "config"), nil, 0o644)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	wctx, wcancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer wcancel()
	if _, err := ctl.WaitReady(wctx, cfg.Control); err != nil {
		cancel()
		h.t.Fatalf("daemon not ready: %v (Run: %v)", err, drain(done))
	}
	stopped := false
	stop := func() error {
		if stopped {
			return nil
		}
		stopped = true
		cancel()
		select {
		case err := <-done:
			return err
		case <-time.After(10 * time.Second):
			return errors.New("Run did not return within 10s of cancel")
		}
	}
	h.t.Cleanup(func() { stop() })
	return d, stop
}

func drain(ch chan error) error {
	select {
	case err := <-ch:
		return err
	default:
		return nil
	}
}

func client(t *testing.T, path string) (*ctl.Client, context.Context) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	c, err := ctl.Dial(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, ctx
}

func TestProgramsConfig(t *testing.T) {
	h := newHarness(t)
	cfg := testConfig(t)
	_, stop := h.start(cfg)
	p := h.pins
	p.mu.Lock()
	if p.sc.BlockBits != 32 || p.sc.Block != cfg.Block || len(p.sc.OwnUSIDs) != 1 || p.sc.OwnUSIDs[0] != 0x4000 || p.sc.Mode != dataplane.ModeSRv6 {
		t.Errorf("switch config %+v", p.sc)
	}
	u0 := p.ports[1]
	if u0.Ifindex != 11 || u0.NeighMAC.String() != "02:00:00:00:02:00" || u0.OwnMAC.String() != "02:ee:00:00:00:0b" || u0.Role != dataplane.RoleFabric {
		t.Errorf("port u0 %+v", u0)
	}
	if u0.Model != (dataplane.PortModel{CapacityBps: 1e9, MarkBytes: 1000, TrimBytes: 2000, BufferBytes: 4000}) {
		t.Errorf("port u0 model %+v", u0.Model)
	}
	if p.ports[0].Role != dataplane.RoleHostFacing || p.ports[0].Model != (dataplane.PortModel{}) {
		t.Errorf("port h0 %+v", p.ports[0])
	}
	wantRoutes := map[string]dataplane.NextHop{
		"5f00:1:c000::/48": {Port: 0},
		"5f00:1:100::/48":  {Port: 1},
		"5f00:1::/32":      {Group: true, GroupID: 0},
	}
	if len(p.routes) != len(wantRoutes) {
		t.Errorf("routes %v", p.routes)
	}
	for pfx, nh := range wantRoutes {
		if got := p.routes[netip.MustParsePrefix(pfx)]; got != nh {
			t.Errorf("route %s -> %+v, want %+v", pfx, got, nh)
		}
	}
	if g := p.groups[0]; len(g) != 2 || g[0] != 1 || g[1] != 2 {
		t.Errorf("group up = %v", g)
	}
	wantLinks := map[int]string{10: "switch", 11: "switch", 12: "switch", 100: "pass"}
	for ifx, kind := range wantLinks {
		if p.links[ifx] != kind {
			t.Errorf("link on %d = %q, want %q (all: %v)", ifx, p.links[ifx], kind, p.links)
		}
	}
	if !p.local[netip.MustParseAddr("fd00:ff::7")] || len(p.local) != 1 {
		t.Errorf("local addresses %v, want only fd00:ff::7 (link-local is passed by the program itself)", p.local)
	}
	p.mu.Unlock()

	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(cfg.Control); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("control socket left behind after stop: %v", err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.links) != 4 || len(p.routes) != 3 {
		t.Errorf("stop removed forwarding state: links %v routes %v", p.links, p.routes)
	}
}

func TestStatsAndRoutes(t *testing.T) {
	h := newHarness(t)
	cfg := testConfig(t)
	h.pins.counters[1] = dataplane.PortCounters{RxPackets: 5, RxBytes: 500, TxPackets: 7, TxBytes: 700, Forwarded: 7, ECNMarked: 2, Trimmed: 1, DropNoRoute: 3, DropHopLimit: 4, DropFault: 5, DropBuffer: 6, DropMalformed: 8, DropEndOfContainer: 9, Pass: 11}
	h.pins.counters[dataplane.UnmappedPort] = dataplane.PortCounters{RxPackets: 42}
	h.start(cfg)
	c, ctx := client(t, cfg.Control)
	st, err := c.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Switch != "tsw" || st.Mode != "srv6" || len(st.Ports) != 3 || st.Unmapped.RxPackets != 42 {
		t.Fatalf("stats %+v", st)
	}
	u0 := st.Ports[1]
	want := ctl.Counters{RxPackets: 5, RxBytes: 500, TxPackets: 7, TxBytes: 700, Forwarded: 7, Pass: 11, ECNMarked: 2, Trimmed: 1,
		Drops: ctl.Drops{NoRoute: 3, HopLimit: 4, Fault: 5, Buffer: 6, Malformed: 8, EndOfContainer: 9}}
	if u0.Name != "u0" || u0.Interface != "eth-u0" || u0.Role != "fabric" || u0.Counters != want {
		t.Errorf("u0 stats %+v, want counters %+v", u0, want)
	}
	if u0.Counters.Drops.Total() != 35 {
		t.Errorf("drop total %d", u0.Counters.Drops.Total())
	}
	rs, err := c.Routes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := make([]string, len(rs))
	for i, r := range rs {
		got[i] = r.Prefix + " " + r.Port + r.Group + " " + strings.Join(r.Ports, ",")
	}
	want2 := []string{"5f00:1::/32 up u0,u1", "5f00:1:100::/48 u0 ", "5f00:1:c000::/48 h0 "}
	if strings.Join(got, "|") != strings.Join(want2, "|") {
		t.Errorf("routes\n got %q\nwant %q", got, want2)
	}
}

func TestFaults(t *testing.T) {
	h := newHarness(t)
	cfg := testConfig(t)
	h.start(cfg)
	c, ctx := client(t, cfg.Control)
	must := func(target, spec string) {
		t.Helper()
		f, err := ctl.ParseFault(target, spec)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.SetFault(ctx, f); err != nil {
			t.Fatalf("fault %s %s: %v", target, spec, err)
		}
	}
	fault := func(id dataplane.PortID) dataplane.Fault {
		h.pins.mu.Lock()
		defer h.pins.mu.Unlock()
		return h.pins.faults[id]
	}

	must("u0", "down")
	if !fault(1).Down || h.links.isUp("eth-u0") {
		t.Errorf("down: fault %+v, link up=%v", fault(1), h.links.isUp("eth-u0"))
	}
	must("u0", "up")
	if fault(1).Down || !h.links.isUp("eth-u0") {
		t.Errorf("up: fault %+v, link up=%v", fault(1), h.links.isUp("eth-u0"))
	}
	must("u1", "loss=0.25")
	must("u1", "blackhole")
	if f := fault(2); f.LossPPM != 250000 || !f.Blackhole {
		t.Errorf("loss+blackhole: %+v", f)
	}
	must("h0", "flap=200ms/50ms")
	if f := fault(0); f.FlapOn != 200*time.Millisecond || f.FlapOff != 50*time.Millisecond {
		t.Errorf("flap: %+v", f)
	}
	st, err := c.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if s := st.Ports[2].Fault.String(); s != "blackhole,loss=0.25" {
		t.Errorf("u1 fault shown as %q", s)
	}
	must("switch", "hang")
	st, _ = c.Stats(ctx)
	if !h.pins.hang || !st.Hang {
		t.Errorf("hang not set: plane %v stats %v", h.pins.hang, st.Hang)
	}
	must("switch", "down")
	for i := range 3 {
		if !fault(dataplane.PortID(i)).Down {
			t.Errorf("switch down: port %d not down", i)
		}
	}
	must("switch", "clear")
	for i := range 3 {
		if f := fault(dataplane.PortID(i)); f != (dataplane.Fault{}) {
			t.Errorf("switch clear: port %d still %+v", i, f)
		}
	}
	if h.pins.hang || !h.links.isUp("eth-u0") {
		t.Errorf("switch clear: hang %v, eth-u0 up %v", h.pins.hang, h.links.isUp("eth-u0"))
	}

	for _, tc := range []struct {
		f    ctl.Fault
		want string
	}{
		{ctl.Fault{Target: "nope", Action: ctl.ActDown}, `no port named "nope" on switch tsw: want "switch" or one of h0, u0, u1`},
		{ctl.Fault{Target: "u0", Action: ctl.ActHang}, "hang applies to the whole switch"},
		{ctl.Fault{Target: "u0", Action: ctl.ActLoss, Loss: 2}, "not a probability"},
		{ctl.Fault{Target: "u0", Action: "melt"}, `unknown fault action "melt"`},
	} {
		err := c.SetFault(ctx, tc.f)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("fault %+v: got %v, want %q", tc.f, err, tc.want)
		}
	}
	if _, err := c.Do(ctx, ctl.Request{Cmd: "reboot"}); err == nil || !strings.Contains(err.Error(), `unknown command "reboot"`) {
		t.Errorf("unknown command: %v", err)
	}
}

func TestRestartAdopts(t *testing.T) {
	h := newHarness(t)
	cfg := testConfig(t)
	_, stop := h.start(cfg)
	c, ctx := client(t, cfg.Control)
	if err := c.SetFault(ctx, ctl.Fault{Target: "u1", Action: ctl.ActLoss, Loss: 0.5}); err != nil {
		t.Fatal(err)
	}
	c.Close()
	if err := stop(); err != nil {
		t.Fatal(err)
	}

	// The new config drops the group route and adds another.
	cfg2 := *cfg
	cfg2.FIB = []config.Route{cfg.FIB[0], cfg.FIB[1], {Prefix: netip.MustParsePrefix("5f00:1:200::/48"), Port: "u1"}}
	links := h.pins.newLinks
	_, stop2 := h.start(&cfg2)
	c2, ctx2 := client(t, cfg.Control)
	r, err := c2.Ready(ctx2)
	if err != nil || !r.Adopted {
		t.Fatalf("ready %+v err %v, want adopted", r, err)
	}
	if h.pins.loads != 1 || h.pins.adopts != 1 {
		t.Errorf("loads %d adopts %d, want 1 and 1", h.pins.loads, h.pins.adopts)
	}
	if h.pins.newLinks != links {
		t.Errorf("restart created %d new links, want 0 (adopt the pinned ones)", h.pins.newLinks-links)
	}
	rs, _ := c2.Routes(ctx2)
	var got []string
	for _, r := range rs {
		got = append(got, r.Prefix)
	}
	if strings.Join(got, " ") != "5f00:1:100::/48 5f00:1:200::/48 5f00:1:c000::/48" {
		t.Errorf("routes after restart: %v", got)
	}
	st, _ := c2.Stats(ctx2)
	if st.Ports[2].Fault.Loss != 0.5 || h.pins.faults[2].LossPPM != 500000 {
		t.Errorf("fault not kept across restart: %+v / %+v", st.Ports[2].Fault, h.pins.faults[2])
	}
	stop2()
}

func TestDetach(t *testing.T) {
	h := newHarness(t)
	cfg := testConfig(t)
	d, err := New(Options{Config: cfg, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Backend: h.pins.backend(), Links: h.links, AnyPinDir: true})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- d.Run(context.Background()) }()
	wctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := ctl.WaitReady(wctx, cfg.Control); err != nil {
		t.Fatal(err)
	}
	c, ctx := client(t, cfg.Control)
	if err := c.SetFault(ctx, ctl.Fault{Target: "u0", Action: ctl.ActDown}); err != nil {
		t.Fatal(err)
	}
	if err := c.Detach(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after detach")
	}
	if len(h.pins.links) != 0 || len(h.pins.routes) != 0 {
		t.Errorf("detach left links %v routes %v", h.pins.links, h.pins.routes)
	}
	if !h.links.isUp("eth-u0") {
		t.Error("detach left a downed port down")
	}
	if _, err := os.Stat(strings.TrimSuffix(cfg.Control, ".sock") + ".state.json"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("state file left: %v", err)
	}
}

func TestSecondDaemonRefused(t *testing.T) {
	h := newHarness(t)
	cfg := testConfig(t)
	h.start(cfg)
	d2, err := New(Options{Config: cfg, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Backend: h.pins.backend(), Links: h.links, AnyPinDir: true})
	if err != nil {
		t.Fatal(err)
	}
	err = d2.Run(context.Background())
	if err == nil || !strings.Contains(err.Error(), "another mrc-switchd runs this switch") {
		t.Fatalf("second daemon: got %v", err)
	}
}

func TestBadInterfaceFails(t *testing.T) {
	h := newHarness(t)
	cfg := testConfig(t)
	cfg.Ports[2].Interface = "eth-gone"
	d, err := New(Options{Config: cfg, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Backend: h.pins.backend(), Links: h.links, AnyPinDir: true})
	if err != nil {
		t.Fatal(err)
	}
	err = d.Run(context.Background())
	if err == nil || !strings.Contains(err.Error(), `ports[2] (u1): interface "eth-gone"`) {
		t.Fatalf("got %v", err)
	}
	if h.pins.loads != 0 {
		t.Error("data plane loaded although an interface is missing")
	}
}

func TestLimits(t *testing.T) {
	cfg := testConfig(t)
	cfg.ECMPGroups[0].Ports = nil
	for range dataplane.MaxGroupMembers + 1 {
		cfg.ECMPGroups[0].Ports = append(cfg.ECMPGroups[0].Ports, "u0")
	}
	cfg.Ports[1].Model.CapacityBps = dataplane.MaxCapacityBps + 1
	err := CheckLimits(cfg)
	for _, want := range []string{"ecmp_groups[0].ports: 17 members", "ports[1].model.capacity_bps"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("CheckLimits: %v, want %q", err, want)
		}
	}
}

func TestMetrics(t *testing.T) {
	h := newHarness(t)
	cfg := testConfig(t)
	cfg.Metrics = "127.0.0.1:0"
	h.pins.counters[1] = dataplane.PortCounters{RxPackets: 1234, DropBuffer: 77}
	h.start(cfg)
	c, ctx := client(t, cfg.Control)
	r, err := c.Ready(ctx)
	if err != nil || r.Metrics == "" {
		t.Fatalf("ready %+v, %v: want the metrics address", r, err)
	}
	resp, err := http.Get("http://" + r.Metrics + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	for _, want := range []string{
		`softmrc_switch_rx_packets_total{interface="eth-u0",port="u0",role="fabric",switch="tsw"} 1234`,
		`softmrc_switch_dropped_total{interface="eth-u0",port="u0",reason="buffer",role="fabric",switch="tsw"} 77`,
		`softmrc_switch_ready{switch="tsw"} 1`,
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("metrics lack %q:\n%s", want, body)
		}
	}
}

func TestRestartWithFewerPorts(t *testing.T) {
	h := newHarness(t)
	cfg := testConfig(t)
	_, stop := h.start(cfg)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	cfg2 := *cfg
	cfg2.Ports = cfg.Ports[:2]
	cfg2.ECMPGroups = nil
	cfg2.FIB = cfg.FIB[:2]
	h.start(&cfg2)
	h.pins.mu.Lock()
	defer h.pins.mu.Unlock()
	if _, ok := h.pins.links[12]; ok {
		t.Error("link on the removed port's interface kept")
	}
	if _, ok := h.pins.ports[2]; ok {
		t.Error("removed port slot not cleared")
	}
	if _, ok := h.pins.routes[netip.MustParsePrefix("5f00:1::/32")]; ok {
		t.Error("route of the removed group kept")
	}
	if h.pins.links[10] != "switch" || h.pins.links[11] != "switch" {
		t.Errorf("links of kept ports: %v", h.pins.links)
	}
}

func TestMetricsUnixSocket(t *testing.T) {
	h := newHarness(t)
	cfg := testConfig(t)
	cfg.Metrics = filepath.Join(t.TempDir(), "metrics.sock")
	h.start(cfg)
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", cfg.Metrics)
	}}}
	resp, err := hc.Get("http://switch/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if !strings.Contains(string(body), `softmrc_switch_ready{switch="tsw"} 1`) {
		t.Errorf("metrics over unix socket:\n%s", body)
	}
}

// FuzzControlLine feeds arbitrary request lines to a programmed daemon: no
// panic, every answer is either OK or carries an error, and a rejected
// request changes nothing.
func FuzzControlLine(f *testing.F) {
	for _, s := range []string{
		`{"cmd":"ready"}`, `{"cmd":"stats"}`, `{"cmd":"routes"}`,
		`{"cmd":"fault","fault":{"target":"u0","action":"loss","loss":0.5}}`,
		`{"cmd":"fault","fault":{"target":"switch","action":"hang"}}`,
		`{"cmd":"fault","fault":{"target":"u1","action":"flap","flap_on_ns":1,"flap_off_ns":-5}}`,
		`{"cmd":"fault"}`, `{"cmd":"fault","fault":null}`, `[]`, `{`, `{"cmd":7}`,
	} {
		f.Add([]byte(s))
	}
	h := newHarness(f)
	cfg := testConfig(f)
	d, err := New(Options{Config: cfg, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Backend: h.pins.backend(), Links: h.links, AnyPinDir: true})
	if err != nil {
		f.Fatal(err)
	}
	if err := d.setup(); err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		if bytes.Contains(line, []byte("detach")) {
			return // ends the daemon; covered by TestDetach
		}
		before := h.pins.snapshot()
		_, resp := d.handleLine(line)
		if resp.OK == (resp.Error != "") {
			t.Fatalf("answer %+v: want OK xor Error", resp)
		}
		if !resp.OK && h.pins.snapshot() != before {
			t.Fatalf("rejected request %q changed the data plane", line)
		}
	})
}

// A fresh start that fails half-way removes what it set up; an adopted one
// leaves the previous programming forwarding.
func TestFailedStartCleansUp(t *testing.T) {
	h := newHarness(t)
	cfg := testConfig(t)
	h.links.addrs["eth-u1"] = nil
	d, err := New(Options{Config: cfg, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Backend: h.pins.backend(), Links: failingAddrs{h.links, "eth-u1"}, AnyPinDir: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Run(context.Background()); err == nil || !strings.Contains(err.Error(), "ports[2] (u1)") {
		t.Fatalf("got %v", err)
	}
	if h.pins.pinned || len(h.pins.routes) != 0 {
		t.Errorf("failed fresh start left pins %v routes %v", h.pins.pinned, h.pins.routes)
	}
}

type failingAddrs struct {
	*fakeLinks
	bad string
}

func (f failingAddrs) Addrs(name string) ([]netip.Addr, error) {
	if name == f.bad {
		return nil, errors.New("netlink says no")
	}
	return f.fakeLinks.Addrs(name)
}

// Pins that outlived their interfaces (namespace rebuilt, same ifindex) are
// re-attached rather than trusted.
func TestRestartReattachesDeadLinks(t *testing.T) {
	h := newHarness(t)
	cfg := testConfig(t)
	_, stop := h.start(cfg)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	h.pins.mu.Lock()
	h.pins.gone[11] = true
	links := h.pins.newLinks
	h.pins.mu.Unlock()
	h.start(cfg)
	h.pins.mu.Lock()
	defer h.pins.mu.Unlock()
	if h.pins.newLinks != links+1 || h.pins.gone[11] || h.pins.links[11] != "switch" {
		t.Errorf("dead link on ifindex 11 not replaced: new links %d (was %d), links %v", h.pins.newLinks, links, h.pins.links)
	}
}

// Faults and hang live only in the (pinned) maps: a restarted daemon reads
// them back, no state file is written, a fault follows its interface when
// the config reorders the ports, and stats show what the maps hold.
func TestRestartReadsFaultsFromMaps(t *testing.T) {
	h := newHarness(t)
	cfg := testConfig(t)
	_, stop := h.start(cfg)
	c, ctx := client(t, cfg.Control)
	for _, f := range []ctl.Fault{
		{Target: "u1", Action: ctl.ActLoss, Loss: 0.125},
		{Target: "u0", Action: ctl.ActFlap, FlapOnNS: int64(time.Second), FlapOffNS: int64(2 * time.Second)},
		{Target: "h0", Action: ctl.ActDown},
		{Target: ctl.TargetSwitch, Action: ctl.ActHang},
	} {
		if err := c.SetFault(ctx, f); err != nil {
			t.Fatal(err)
		}
	}
	c.Close()
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if m, _ := filepath.Glob(filepath.Join(filepath.Dir(cfg.Control), "*.json")); len(m) != 0 {
		t.Errorf("daemon wrote state files %v; faults belong in the maps only", m)
	}

	// Same ports in another order: slots change, interfaces do not.
	cfg2 := *cfg
	cfg2.Ports = []config.Port{cfg.Ports[2], cfg.Ports[0], cfg.Ports[1]}
	h.start(&cfg2)
	c2, ctx2 := client(t, cfg.Control)
	st, err := c2.Stats(ctx2)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, p := range st.Ports {
		got[p.Name] = p.Fault.String()
	}
	want := map[string]string{"u1": "loss=0.125", "h0": "down", "u0": "flap=1s/2s"}
	for n, w := range want {
		if got[n] != w {
			t.Errorf("after restart with reordered ports, %s shows fault %q, want %q (all: %v)", n, got[n], w, got)
		}
	}
	if !st.Hang {
		t.Error("hang lost across the restart")
	}
	if h.links.isUp("eth-h0") {
		t.Error("port h0 (down fault) was brought up by the restart")
	}
	h.pins.mu.Lock()
	defer h.pins.mu.Unlock()
	if f := h.pins.faults[0]; f.LossPPM != 125000 { // u1 is slot 0 now
		t.Errorf("slot 0 (u1) has fault %+v in the map", f)
	}
}

// Pinned links whose device is gone are dropped by the data plane at
// adoption; the daemon adopts the rest (no fresh load, counters kept) and
// attaches a new link on the interface.
func TestRestartWithStaleLinks(t *testing.T) {
	h := newHarness(t)
	cfg := testConfig(t)
	_, stop := h.start(cfg)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	h.pins.mu.Lock()
	h.pins.dropGone = true
	h.pins.gone[11] = true
	h.pins.gone[100] = true // the XDP_PASS link on h0's peer
	h.pins.counters[1] = dataplane.PortCounters{Forwarded: 42}
	links := h.pins.newLinks
	h.pins.mu.Unlock()
	h.start(cfg)
	c, ctx := client(t, cfg.Control)
	r, err := c.Ready(ctx)
	if err != nil || !r.Adopted {
		t.Fatalf("ready %+v err %v, want adopted despite dead links", r, err)
	}
	st, _ := c.Stats(ctx)
	h.pins.mu.Lock()
	defer h.pins.mu.Unlock()
	if h.pins.loads != 1 {
		t.Errorf("%d fresh loads, want 1 (the restart must adopt)", h.pins.loads)
	}
	if h.pins.newLinks != links+2 || h.pins.links[11] != "switch" || h.pins.links[100] != "pass" {
		t.Errorf("dead links not replaced: new links %d (was %d), links %v", h.pins.newLinks, links, h.pins.links)
	}
	if st.Ports[1].Counters.Forwarded != 42 {
		t.Errorf("counters lost: %+v", st.Ports[1].Counters)
	}
}

// XDP_PASS links on interfaces that are no longer veth peers of a port are
// removed; an interface that changes from peer to port gets the switch
// program.
func TestPassLinksCleanedUp(t *testing.T) {
	h := newHarness(t)
	h.links.add("peer-h0", 100, 10, "eth-h0")
	cfg := testConfig(t)
	_, stop := h.start(cfg)
	h.pins.mu.Lock()
	if h.pins.links[100] != "pass" {
		t.Fatalf("no XDP_PASS on h0's veth peer: %v", h.pins.links)
	}
	h.pins.mu.Unlock()
	if err := stop(); err != nil {
		t.Fatal(err)
	}

	// h0 goes (its peer 100 needs no XDP_PASS any more).
	cfg2 := *cfg
	cfg2.Ports = cfg.Ports[1:]
	cfg2.FIB = cfg.FIB[1:]
	_, stop2 := h.start(&cfg2)
	h.pins.mu.Lock()
	if _, ok := h.pins.links[100]; ok {
		t.Errorf("XDP_PASS link on the former port's peer kept: %v", h.pins.links)
	}
	if _, ok := h.pins.links[10]; ok {
		t.Errorf("switch link on the removed port kept: %v", h.pins.links)
	}
	h.pins.mu.Unlock()
	if err := stop2(); err != nil {
		t.Fatal(err)
	}

	// Back with h0, then its peer becomes a port of its own.
	_, stop3 := h.start(cfg)
	h.pins.mu.Lock()
	if h.pins.links[100] != "pass" {
		t.Errorf("XDP_PASS not re-attached: %v", h.pins.links)
	}
	h.pins.mu.Unlock()
	if err := stop3(); err != nil {
		t.Fatal(err)
	}
	cfg4 := *cfg
	cfg4.Ports = append(append([]config.Port(nil), cfg.Ports...), config.Port{Name: "p0", Interface: "peer-h0", NeighbourMAC: wire.MAC{2, 0, 0, 0, 3, 0}, Role: config.RoleFabric})
	h.start(&cfg4)
	h.pins.mu.Lock()
	defer h.pins.mu.Unlock()
	if h.pins.links[100] != "switch" || h.pins.links[10] != "switch" {
		t.Errorf("veth with both ends ports: links %v, want the switch program on 10 and 100", h.pins.links)
	}
}
