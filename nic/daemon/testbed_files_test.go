package daemon

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/softmrc/softmrc/internal/wire"
	"github.com/softmrc/softmrc/nic/config"
	"github.com/softmrc/softmrc/testbed/plan"
	"github.com/softmrc/softmrc/testbed/topo"
)

// The files mrc-testbed writes (a nic/config NIC config and an
// internal/pathtmpl template per host) load strictly, name a device socket
// in the run folder, and the engine config built from them gives the right
// paths.
func TestTestbedFilesLoad(t *testing.T) {
	for _, preset := range []string{"pair", "clos-2p"} {
		t.Run(preset, func(t *testing.T) {
			tp, err := topo.Preset(preset)
			if err != nil {
				t.Fatal(err)
			}
			dir := t.TempDir()
			pl, err := plan.Build(tp, plan.Options{RunDir: dir})
			if err != nil {
				t.Fatal(err)
			}
			files, err := pl.Files(nil)
			if err != nil {
				t.Fatal(err)
			}
			for _, f := range files {
				os.MkdirAll(filepath.Dir(f.Path), 0o755)
				if err := os.WriteFile(f.Path, f.Data, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			h0 := pl.Hosts[0]
			c, err := config.Load(h0.NICConfig)
			if err != nil {
				t.Fatal(err)
			}
			if len(c.Ports) != tp.Planes || c.Ports[0].NeighborMAC.IsZero() || c.DeviceSocket != filepath.Join(dir, "host", h0.Name+".sock") {
				t.Fatalf("config %+v: want %d ports with neighbor MACs and the socket in the run folder", c, tp.Planes)
			}
			ec, err := EngineConfig(c)
			if err != nil {
				t.Fatal(err)
			}
			last := pl.Hosts[len(pl.Hosts)-1]
			idx, ok := ec.Template.PeerByAddr(wire.Addr128FromNetip(last.Ports[0].Addr.Addr()))
			if !ok {
				t.Fatalf("peer %s not found by address", last.Name)
			}
			ps, err := ec.Template.Compile(idx)
			if err != nil {
				t.Fatal(err)
			}
			us := ps.USIDs(wire.MakeEV(0, 1, 5))
			want := 2 // pair: T0-local [T0, downlink]
			if preset == "clos-2p" {
				want = 4 // cross-T1: [T0, T1, T0, downlink]
			}
			if len(us) != want || us[len(us)-1] != wire.USID(last.Ports[0].Locator.Addr().As16()[4])<<8|wire.USID(last.Ports[0].Locator.Addr().As16()[5]) {
				t.Fatalf("path %04x, want %d uSIDs ending in %s's downlink", us, want, last.Name)
			}
		})
	}
}
