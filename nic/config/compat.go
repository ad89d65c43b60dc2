package config

import (
	"bytes"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"

	"gopkg.in/yaml.v3"
)

// testbedNIC is the NIC file mrc-testbed writes today (testbed/plan
// NICConfig): it predates this package. LoadAny converts it so that
// mrc-nicd runs on testbeds from either generation; once the testbed
// writes this package's format, the shim can go.
type testbedNIC struct {
	Host     string        `yaml:"host"`
	Mode     string        `yaml:"mode"`
	Template string        `yaml:"usid_template"`
	MgmtAddr netip.Prefix  `yaml:"mgmt_addr"`
	MTU      int           `yaml:"mtu"` // the links' MTU, not the RoCE MTU
	Ports    []testbedPort `yaml:"ports"`
}

type testbedPort struct {
	Plane      int          `yaml:"plane"`
	Interface  string       `yaml:"interface"`
	MAC        string       `yaml:"mac"`
	Addr       netip.Prefix `yaml:"addr"`
	Locator    netip.Prefix `yaml:"locator"`
	GatewayMAC string       `yaml:"gateway_mac"`
}

// LoadAny reads path in this package's format or, when the file has the
// testbed's usid_template key, in the testbed's older NIC format; the device
// socket of a converted file is <folder>/<host>.sock and the RoCE MTU 2048.
func LoadAny(path string) (*Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read nic config: %w", err)
	}
	var probe map[string]any
	if yaml.Unmarshal(b, &probe) != nil || probe["usid_template"] == nil {
		return Load(path)
	}
	var t testbedNIC
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&t); err != nil {
		return nil, fmt.Errorf("nic config %s (testbed format): %w", path, err)
	}
	c := &Config{Host: t.Host, Mode: Mode(t.Mode), Template: t.Template,
		DeviceSocket: filepath.Join(filepath.Dir(path), t.Host+".sock")}
	if c.Template != "" && !filepath.IsAbs(c.Template) {
		c.Template = filepath.Join(filepath.Dir(path), c.Template)
	}
	for _, p := range t.Ports {
		port := Port{Name: fmt.Sprintf("p%d", p.Plane), Interface: p.Interface, Plane: p.Plane,
			Address: p.Addr.Addr(), Locator: p.Locator}
		if err := port.MAC.UnmarshalText([]byte(p.MAC)); err != nil {
			return nil, fmt.Errorf("nic config %s: port %s: %w", path, p.Interface, err)
		}
		if err := port.NeighborMAC.UnmarshalText([]byte(p.GatewayMAC)); err != nil {
			return nil, fmt.Errorf("nic config %s: port %s gateway_mac: %w", path, p.Interface, err)
		}
		c.Ports = append(c.Ports, port)
	}
	c.SetDefaults()
	if err := c.Validate(); err != nil {
		return nil, fmt.Errorf("nic config %s (testbed format): %w", path, err)
	}
	return c, nil
}
