package daemon

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/softmrc/softmrc/internal/pathtmpl"
)

// loadTemplate reads the path template: internal/pathtmpl's format, or the
// older one mrc-testbed writes (testbed/template), converted.
func loadTemplate(path string) (*pathtmpl.Template, error) {
	t, err := pathtmpl.Load(path)
	if err == nil {
		return t, nil
	}
	b, rerr := os.ReadFile(path)
	if rerr != nil {
		return nil, err
	}
	var probe map[string]any
	if yaml.Unmarshal(b, &probe) != nil || probe["usid_bits"] == nil {
		return nil, err
	}
	t, cerr := convertTestbedTemplate(b)
	if cerr != nil {
		return nil, errors.Join(err, fmt.Errorf("as a testbed template: %w", cerr))
	}
	return t, nil
}

// testbedTemplate mirrors testbed/template.Template (its YAML keys), read
// without importing the testbed.
type testbedTemplate struct {
	Version   int    `yaml:"version"`
	Host      string `yaml:"host"`
	Block     string `yaml:"block"`
	BlockBits int    `yaml:"block_bits"`
	USIDBits  int    `yaml:"usid_bits"`
	Planes    int    `yaml:"planes"`
	T1Count   int    `yaml:"t1_count"`
	Local     []struct {
		Plane  int      `yaml:"plane"`
		T0USID string   `yaml:"t0_usid"`
		T1USID []string `yaml:"t1_usids"`
		Port   string   `yaml:"port"`
		Source string   `yaml:"source"`
	} `yaml:"local"`
	Peers []struct {
		Host     string   `yaml:"host"`
		T0Local  bool     `yaml:"t0_local"`
		Inner    []string `yaml:"inner"`
		DstT0    []string `yaml:"dst_t0_usid"`
		Downlink []string `yaml:"downlink_usid"`
	} `yaml:"peers"`
}

func hex16(s string) (uint16, error) {
	var v uint16
	if _, err := fmt.Sscanf(s, "%x", &v); err != nil {
		return 0, fmt.Errorf("uSID %q: %w", s, err)
	}
	return v, nil
}

func convertTestbedTemplate(b []byte) (*pathtmpl.Template, error) {
	var tt testbedTemplate
	if err := yaml.Unmarshal(b, &tt); err != nil {
		return nil, err
	}
	blk, _, _ := strings.Cut(tt.Block, "/") // "5f00:1::/32" -> "5f00:1::"
	t := &pathtmpl.Template{Version: pathtmpl.Version, Block: blk, BlockBits: tt.BlockBits, Planes: tt.Planes, T1Count: tt.T1Count}
	t.Local.Name = tt.Host
	pairNoT1 := t.T1Count == 0
	if pairNoT1 {
		t.T1Count = 1 // one T0 per plane: every peer is T0-local, the T1 is never used
	}
	for _, l := range tt.Local {
		t0, err := hex16(l.T0USID)
		if err != nil {
			return nil, err
		}
		lp := pathtmpl.LocalPlane{Plane: l.Plane, Addr: l.Source, T0: t0}
		for _, s := range l.T1USID {
			u, err := hex16(s)
			if err != nil {
				return nil, err
			}
			lp.T1 = append(lp.T1, u)
		}
		if pairNoT1 {
			lp.T1 = []uint16{0x0100 | uint16(l.Plane)}
		}
		t.Local.Planes = append(t.Local.Planes, lp)
	}
	for _, p := range tt.Peers {
		pe := pathtmpl.Peer{Name: p.Host, T0Local: p.T0Local}
		for pl := range p.Inner {
			pp := pathtmpl.PeerPlane{Plane: pl, Addr: p.Inner[pl]}
			var err error
			if pl < len(p.DstT0) {
				if pp.T0, err = hex16(p.DstT0[pl]); err != nil {
					return nil, err
				}
			}
			if pl < len(p.Downlink) {
				if pp.Downlink, err = hex16(p.Downlink[pl]); err != nil {
					return nil, err
				}
			}
			pe.Planes = append(pe.Planes, pp)
		}
		t.Peers = append(t.Peers, pe)
	}
	if err := t.Validate(); err != nil {
		return nil, err
	}
	return t, nil
}
