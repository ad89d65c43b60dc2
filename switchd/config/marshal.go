package config

import (
	"fmt"
	"os"
	"path/filepath"

	"gopkg.in/yaml.v3"
)

// The YAML file format. Kept separate from Config so that Config can use
// typed Go values (netip, wire.MAC, wire.USID) and the file can use the
// spelling people write (0x0140, 02:00:..., 10G).
type yamlConfig struct {
	Name       string      `yaml:"name"`
	Block      string      `yaml:"usid_block"`
	USIDs      []string    `yaml:"usids,flow,omitempty"`
	Mode       string      `yaml:"mode,omitempty"`
	Ports      []yamlPort  `yaml:"ports"`
	FIB        []yamlRoute `yaml:"fib,omitempty"`
	ECMPGroups []yamlGroup `yaml:"ecmp_groups,omitempty"`
	PinDir     string      `yaml:"pin_dir,omitempty"`
	Control    string      `yaml:"control_socket,omitempty"`
	Metrics    string      `yaml:"metrics,omitempty"`
}

type yamlPort struct {
	Name         string     `yaml:"name"`
	Interface    string     `yaml:"interface"`
	NeighbourMAC string     `yaml:"neighbour_mac"`
	Role         string     `yaml:"role"`
	Model        *yamlModel `yaml:"model,omitempty"`
}

type yamlModel struct {
	CapacityBps   uint64  `yaml:"capacity_bps"`
	ECNThreshold  uint32  `yaml:"ecn_threshold,omitempty"`
	ECNMax        uint32  `yaml:"ecn_max,omitempty"`
	ECNPMax       float64 `yaml:"ecn_pmax,omitempty"`
	TrimThreshold uint32  `yaml:"trim_threshold,omitempty"`
	Buffer        uint32  `yaml:"buffer"`
	HostECN       bool    `yaml:"host_ecn,omitempty"`
}

type yamlRoute struct {
	Prefix string `yaml:"prefix"`
	Port   string `yaml:"port,omitempty"`
	Group  string `yaml:"group,omitempty"`
}

type yamlGroup struct {
	Name  string   `yaml:"name"`
	Ports []string `yaml:"ports,flow"`
}

// Marshal returns c as YAML that Parse reads back into an equal Config.
// It does not validate; call Validate first if c was built in code.
func Marshal(c *Config) ([]byte, error) {
	y := yamlConfig{
		Name:    c.Name,
		Mode:    string(c.Mode),
		PinDir:  c.PinDir,
		Control: c.Control,
		Metrics: c.Metrics,
	}
	if c.Block.IsValid() {
		y.Block = c.Block.String()
	}
	for _, u := range c.USIDs {
		y.USIDs = append(y.USIDs, u.Hex())
	}
	for _, p := range c.Ports {
		yp := yamlPort{Name: p.Name, Interface: p.Interface, NeighbourMAC: p.NeighbourMAC.String(), Role: string(p.Role)}
		if m := p.Model; m != nil {
			yp.Model = &yamlModel{CapacityBps: m.CapacityBps, ECNThreshold: m.ECNThreshold, ECNMax: m.ECNMax, ECNPMax: m.ECNPMax,
				TrimThreshold: m.TrimThreshold, Buffer: m.Buffer, HostECN: m.HostECN}
		}
		y.Ports = append(y.Ports, yp)
	}
	for _, r := range c.FIB {
		yr := yamlRoute{Port: r.Port, Group: r.Group}
		if r.Prefix.IsValid() {
			yr.Prefix = r.Prefix.String()
		}
		y.FIB = append(y.FIB, yr)
	}
	for _, g := range c.ECMPGroups {
		y.ECMPGroups = append(y.ECMPGroups, yamlGroup(g))
	}
	out, err := yaml.Marshal(&y)
	if err != nil {
		return nil, fmt.Errorf("marshal config of switch %q: %w", c.Name, err)
	}
	return out, nil
}

// Write validates c and writes it as YAML to path (mode 0644), replacing the
// file atomically so a daemon never reads half a config.
func Write(path string, c *Config) error {
	if err := Validate(c); err != nil {
		return err
	}
	b, err := Marshal(c)
	if err != nil {
		return err
	}
	b = append([]byte("# mrc-switchd config (docs/switchd.md)\n"), b...)
	tmp, err := os.CreateTemp(filepath.Dir(path), ".switchd-*.yaml")
	if err != nil {
		return fmt.Errorf("write config %s: %w", path, err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return fmt.Errorf("write config %s: %w", path, err)
	}
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return fmt.Errorf("write config %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write config %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("write config %s: %w", path, err)
	}
	return nil
}
