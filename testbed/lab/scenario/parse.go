package scenario

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	nicconfig "github.com/softmrc/softmrc/nic/config"
	"github.com/softmrc/softmrc/nic/perf"
	"github.com/softmrc/softmrc/nic/verbs"
	"github.com/softmrc/softmrc/testbed/plan"
	"github.com/softmrc/softmrc/testbed/run"
	"github.com/softmrc/softmrc/testbed/topo"
	"github.com/softmrc/softmrc/testbed/yamlfields"
)

// Error is a problem in a scenario file: where, which field, what is wrong
// and what is allowed. It prints as "file:line: field: msg (allowed: ...)".
type Error = yamlfields.Error

// Load reads and validates a scenario file.
func Load(path string) (*Scenario, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read scenario: %w", err)
	}
	return Parse(path, b)
}

var (
	topFields     = []string{"name", "title", "why", "topology", "traffic", "faults", "random_faults", "sampling", "duration", "expect", "variants"}
	topoFields    = []string{"preset", "file", "links", "nic_pacing", "dcqcn_scale", "cc_scale", "roce_ack_timeout", "dcqcn_target"}
	linkFields    = []string{"capacity", "ecn_threshold", "trim_threshold", "buffer", "host_ecn", "delay"}
	flowFields    = []string{"name", "from", "to", "hosts", "qps", "size", "tool", "start", "duration", "verify", "tx_depth", "evs", "transport", "iters", "check", "timeout", "rate", "slots", "slot_bytes", "warmup"}
	variantFields = []string{"name", "topology", "transport", "qps", "traffic", "faults"}
	faultFields   = []string{"at", "before_traffic", "target", "op"}
	randomFields  = []string{"seed", "from", "until", "every", "hold", "targets", "ops", "keep_plane_path"}
	expectFields  = []string{"claim", "metric", "series", "window", "baseline", "at", "level", "want", "tolerance", "min", "max", "stat", "after_fault", "value", "of", "values", "variant", "report", "condition", "given", "given_not"}
	// Tools are the traffic generators a flow may name.
	Tools = append([]string{"mrc-write-bw"}, Collectives...)
	// TargetClasses are what random_faults.targets may name besides
	// target names.
	TargetClasses = []string{"host-links", "fabric-links", "nic-ports", "t1-switches"}
)

var nameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,39}$`)

// Parse decodes and validates a scenario; file names the source in errors
// and anchors a relative topology file, which is read from disk.
func Parse(file string, data []byte) (*Scenario, error) {
	return ParseWith(file, data, os.ReadFile)
}

// ParseWith is Parse reading a topology file with read (given the path
// joined to file's folder): shipped scenarios read theirs from the binary.
func ParseWith(file string, data []byte, read func(string) ([]byte, error)) (*Scenario, error) {
	root, err := yamlfields.Root(file, data, "scenario", topFields)
	if err != nil {
		return nil, err
	}
	p := &parser{Parser: yamlfields.Parser{File: file}, read: read}
	s := &Scenario{Source: file, Interval: 10 * time.Millisecond}
	if err := p.top(s, root); err != nil {
		return nil, err
	}
	if err := p.validate(s, root); err != nil {
		return nil, err
	}
	return s, nil
}

// parser reads a scenario file's fields (yamlfields.Parser: file:line:
// field errors); read reads a topology file it names.
type parser struct {
	yamlfields.Parser
	read func(string) ([]byte, error)
}

func (p *parser) top(s *Scenario, n *yaml.Node) error {
	return p.Mapping(n, "", topFields, func(k string, v *yaml.Node) error {
		var err error
		switch k {
		case "name":
			if s.Name, err = p.Str(v, k); err == nil && !nameRE.MatchString(s.Name) {
				err = p.Err(v, k, "1-40 characters [a-z0-9_-], starting with a letter or digit", "bad name %q", s.Name)
			}
		case "title":
			s.Title, err = p.Str(v, k)
		case "why":
			s.Why, err = p.Str(v, k)
		case "topology":
			err = p.topology(&s.Topology, v)
		case "traffic":
			err = p.List(v, k, func(i int, vv *yaml.Node) error {
				f, err := p.flow(vv, fmt.Sprintf("traffic[%d]", i))
				s.Traffic = append(s.Traffic, f)
				return err
			})
		case "faults":
			err = p.List(v, k, func(i int, vv *yaml.Node) error {
				f, err := p.fault(vv, fmt.Sprintf("faults[%d]", i))
				s.Faults = append(s.Faults, f)
				return err
			})
		case "random_faults":
			s.Random = &RandomFaults{Line: v.Line}
			err = p.random(s.Random, v)
		case "sampling":
			err = p.Mapping(v, k, []string{"interval"}, func(_ string, vv *yaml.Node) error {
				var err error
				s.Interval, err = p.Dur(vv, "sampling.interval", time.Millisecond, time.Second)
				return err
			})
		case "duration":
			s.Duration, err = p.Dur(v, k, time.Second, 10*time.Minute)
		case "expect":
			err = p.List(v, k, func(i int, vv *yaml.Node) error {
				e, err := p.expect(vv, fmt.Sprintf("expect[%d]", i))
				e.Index = i
				s.Expect = append(s.Expect, e)
				return err
			})
		case "variants":
			err = p.List(v, k, func(i int, vv *yaml.Node) error {
				x, err := p.variant(vv, fmt.Sprintf("variants[%d]", i))
				s.Variants = append(s.Variants, x)
				return err
			})
		}
		return err
	})
}

func (p *parser) variant(n *yaml.Node, field string) (Variant, error) {
	v := Variant{Line: n.Line}
	err := p.Mapping(n, field, variantFields, func(k string, vv *yaml.Node) error {
		path := field + "." + k
		var err error
		switch k {
		case "name":
			if v.Name, err = p.Str(vv, path); err == nil && !nameRE.MatchString(v.Name) {
				err = p.Err(vv, path, "1-40 characters [a-z0-9_-]", "bad variant name %q", v.Name)
			}
		case "topology":
			v.SetTopology = true
			err = p.topology(&v.Topology, vv)
		case "transport":
			v.Transport, err = p.Enum(vv, path, "mrc", "roce")
		case "qps":
			v.QPs, err = p.IntIn(vv, path, 1, 256)
		case "traffic":
			err = p.List(vv, path, func(i int, x *yaml.Node) error {
				s, err := p.Str(x, fmt.Sprintf("%s[%d]", path, i))
				v.Flows = append(v.Flows, s)
				return err
			})
		case "faults":
			v.SetFaults = true
			err = p.List(vv, path, func(i int, x *yaml.Node) error {
				f, err := p.fault(x, fmt.Sprintf("%s[%d]", path, i))
				v.Faults = append(v.Faults, f)
				return err
			})
		}
		return err
	})
	if err == nil && v.Name == "" {
		err = p.Err(n, field+".name", "1-40 characters [a-z0-9_-]", "missing (a variant needs a name: claims refer to VARIANT.FLOW.KEY)")
	}
	return v, err
}

func (p *parser) topology(t *Topology, n *yaml.Node) error {
	return p.Mapping(n, "topology", topoFields, func(k string, v *yaml.Node) error {
		var err error
		switch k {
		case "preset":
			t.Preset, err = p.Enum(v, "topology.preset", topo.Presets()...)
		case "file":
			t.File, err = p.Str(v, "topology.file")
			if err == nil && !filepath.IsAbs(t.File) {
				t.File = filepath.Join(filepath.Dir(p.File), t.File)
			}
			if err == nil {
				if t.FileData, err = p.read(t.File); err != nil {
					return p.Err(v, "topology.file", "a topology file (docs/testbed.md), relative to the scenario file", "%v", err)
				}
			}
		case "dcqcn_scale":
			var x float64
			x, err = p.Float(v, "topology.dcqcn_scale", 1, 1e6)
			t.DCQCNScale = x
		case "cc_scale":
			var x float64
			x, err = p.Float(v, "topology.cc_scale", 1, 1e6)
			t.CCScale = x
		case "roce_ack_timeout":
			var d string
			if d, err = p.Str(v, "topology.roce_ack_timeout"); err != nil {
				return err
			}
			if t.RoCEAckTimeout, err = time.ParseDuration(d); err != nil || t.RoCEAckTimeout <= 0 || t.RoCEAckTimeout > time.Hour {
				return p.Err(v, "topology.roce_ack_timeout", "a duration above 0 up to 1h, e.g. 4.295s (IBTA timeout 20: 4.096us·2^20, NCCL's default)", "bad roce_ack_timeout %q", d)
			}
		case "dcqcn_target":
			t.DCQCNTarget, err = p.Enum(v, "topology.dcqcn_target", nicconfig.DCQCNTargetPaper, nicconfig.DCQCNTargetMLX5)
		case "nic_pacing":
			var r string
			if r, err = p.Str(v, "topology.nic_pacing"); err != nil {
				return err
			}
			if t.NICPacingBps, err = topo.ParseRate(r); err != nil || t.NICPacingBps == 0 {
				if err == nil {
					err = errors.New("0 would leave the NICs unpaced")
				}
				return p.Err(v, "topology.nic_pacing", "a rate above 0 such as 53Mbit or 53000000 (bit/s)", "%v", err)
			}
		case "links":
			err = p.Mapping(v, "topology.links", []string{"fabric", "host"}, func(kk string, vv *yaml.Node) error {
				if kk == "fabric" {
					t.SetFabric = true
					return p.link(&t.Fabric, vv, "topology.links.fabric")
				}
				t.SetHost = true
				return p.link(&t.Host, vv, "topology.links.host")
			})
		}
		return err
	})
}

func (p *parser) link(l *topo.LinkSpec, n *yaml.Node, field string) error {
	return p.Mapping(n, field, linkFields, func(k string, v *yaml.Node) error {
		path := field + "." + k
		s, err := p.Str(v, path)
		if err != nil {
			return err
		}
		switch k {
		case "host_ecn":
			if l.HostECN, err = p.Bool(v, path); err != nil {
				return err
			}
			return nil
		case "delay":
			if l.Delay, err = time.ParseDuration(s); err != nil || l.Delay < 0 || l.Delay > 10*time.Second {
				return p.Err(v, path, "a one-way delay from 0 to 10s, e.g. 2ms (host links: mrc-nicd's delay line; fabric links: netem, docs/testbed.md)", "bad delay %q", s)
			}
			return nil
		}
		if k == "capacity" {
			if l.CapacityBps, err = topo.ParseRate(s); err != nil {
				return p.Err(v, path, "a rate such as 400Mbit, 100Mbit, 25000000 (bit/s) or 0 for unlimited", "%v", err)
			}
			return nil
		}
		x, err := topo.ParseBytes(s)
		if err != nil {
			return p.Err(v, path, "a size such as 64KiB, 1MiB, 9000 (bytes) or 0 for off", "%v", err)
		}
		switch k {
		case "ecn_threshold":
			l.ECNThreshold = x
		case "trim_threshold":
			l.TrimThreshold = x
		case "buffer":
			l.Buffer = x
		}
		return nil
	})
}

func (p *parser) flow(n *yaml.Node, field string) (Flow, error) {
	f := Flow{QPs: 1, Size: 32 << 10, Tool: "mrc-write-bw", TxDepth: 16, Line: n.Line}
	err := p.Mapping(n, field, flowFields, func(k string, v *yaml.Node) error {
		path := field + "." + k
		var err error
		switch k {
		case "name":
			if f.Name, err = p.Str(v, path); err == nil && !nameRE.MatchString(f.Name) {
				err = p.Err(v, path, "1-40 characters [a-z0-9_-]", "bad flow name %q", f.Name)
			}
		case "from":
			f.From, err = p.host(v, path)
		case "to":
			f.To, err = p.host(v, path)
		case "hosts":
			err = p.List(v, path, func(i int, x *yaml.Node) error {
				h, err := p.host(x, fmt.Sprintf("%s[%d]", path, i))
				if err == nil && slices.Contains(f.Hosts, h) {
					err = p.Err(x, fmt.Sprintf("%s[%d]", path, i), "each host once", "host %s twice in the group", h)
				}
				f.Hosts = append(f.Hosts, h)
				return err
			})
		case "iters":
			f.Iters, err = p.IntIn(v, path, 1, 10000)
		case "check":
			f.Check, err = p.Bool(v, path)
		case "warmup":
			f.Warmup, err = p.IntIn(v, path, 1, 1000)
		case "slots":
			f.Slots, err = p.IntIn(v, path, 1, verbs.MaxCreditSlots)
		case "slot_bytes":
			var s string
			if s, err = p.Str(v, path); err == nil {
				x, perr := topo.ParseBytes(s)
				if perr != nil || x < 4 || x%4 != 0 || x > 16<<20 {
					err = p.Err(v, path, "a multiple of 4 bytes up to 16MiB, e.g. 32KiB", "bad slot size %q", s)
				}
				f.SlotBytes = int(x)
			}
		case "timeout":
			f.Timeout, err = p.Dur(v, path, time.Second, 10*time.Minute)
		case "qps":
			f.QPs, err = p.IntIn(v, path, 1, 256)
		case "size":
			var s string
			if s, err = p.Str(v, path); err == nil {
				x, perr := topo.ParseBytes(s)
				if perr != nil || x < 1 || x > 1<<30 {
					err = p.Err(v, path, "a message size from 1 B to 1GiB, e.g. 32KiB", "bad size %q", s)
				}
				f.Size = int(x)
			}
		case "tool":
			f.Tool, err = p.Enum(v, path, Tools...)
		case "start":
			f.Start, err = p.Dur(v, path, 0, 10*time.Minute)
		case "duration":
			if f.Duration, err = p.Dur(v, path, time.Second, 10*time.Minute); err == nil && f.Duration%time.Second != 0 {
				err = p.Err(v, path, "whole seconds (mrc-write-bw -D takes seconds), e.g. 3s", "%v is not a whole number of seconds", f.Duration)
			}
		case "verify":
			f.Verify, err = p.Bool(v, path)
		case "tx_depth":
			f.TxDepth, err = p.IntIn(v, path, 1, 8192)
		case "transport":
			f.Transport, err = p.Enum(v, path, "mrc", "roce")
		case "rate":
			var s string
			if s, err = p.Str(v, path); err == nil {
				if f.RateBps, err = topo.ParseRate(s); err != nil || f.RateBps == 0 {
					err = p.Err(v, path, "mrc-write-bw --rate_limit: a rate above 0 such as 14Mbit or 14000000 (bit/s)", "bad rate %q", s)
				}
			}
		case "evs":
			if f.EVs, err = p.Str(v, path); err == nil {
				if _, perr := perf.ParseEVs(f.EVs); perr != nil {
					err = p.Err(v, path, "mrc-write-bw --evs: comma-separated numbers (0x10000000) or PLANE.T1 (0.1)", "%v", perr)
				}
			}
		}
		return err
	})
	if err == nil && f.IsCollective() {
		switch {
		case f.Name == "":
			return f, p.Err(n, field+".name", "", "missing (a collective needs name, tool and hosts)")
		case len(f.Hosts) < 2:
			return f, p.Err(n, field+".hosts", "a list of 2 or more hosts in rank order, e.g. [h0, h2, h1, h3]", "a collective needs a group of at least 2 hosts")
		case f.From != "" || f.To != "" || f.Duration > 0 || f.Start > 0 || f.Verify || f.EVs != "" || f.RateBps > 0:
			return f, p.Err(n, field, "hosts, qps, size, iters, warmup, check, slots, slot_bytes, transport, timeout", "%s runs on a group: from, to, duration, start, verify, evs and rate are mrc-write-bw's", f.Tool)
		}
		if f.Iters == 0 {
			f.Iters = 5
		}
		if f.Warmup == 0 {
			f.Warmup = 1
		}
		if f.Timeout == 0 {
			f.Timeout = 2 * time.Minute
		}
		return f, nil
	}
	if err == nil && (len(f.Hosts) > 0 || f.Iters > 0 || f.Warmup > 0 || f.Check || f.Timeout > 0 || f.Slots > 0 || f.SlotBytes > 0) {
		return f, p.Err(n, field+".tool", strings.Join(Collectives, " | "), "hosts, iters, warmup, check, slots, slot_bytes and timeout are for collective tools, not %s", f.Tool)
	}
	if err == nil {
		for _, req := range []struct {
			set  bool
			name string
		}{{f.Name != "", "name"}, {f.From != "", "from"}, {f.To != "", "to"}, {f.Duration > 0, "duration"}} {
			if !req.set {
				return f, p.Err(n, field+"."+req.name, "", "missing (a flow needs name, from, to and duration)")
			}
		}
		if f.From == f.To {
			return f, p.Err(n, field+".to", "a host other than from", "flow %s goes from %s to itself", f.Name, f.From)
		}
	}
	return f, err
}

var hostRE = regexp.MustCompile(`^h[0-9]{1,4}$`)

func (p *parser) host(n *yaml.Node, field string) (string, error) {
	s, err := p.Str(n, field)
	if err == nil && !hostRE.MatchString(s) {
		err = p.Err(n, field, "a host name h0, h1, ...", "bad host %q", s)
	}
	return s, err
}

func (p *parser) fault(n *yaml.Node, field string) (Fault, error) {
	f := Fault{At: -1, Line: n.Line}
	var atGiven bool
	err := p.Mapping(n, field, faultFields, func(k string, v *yaml.Node) error {
		path := field + "." + k
		var err error
		switch k {
		case "at":
			f.At, err = p.Dur(v, path, 0, 10*time.Minute)
			atGiven = true
		case "before_traffic":
			f.BeforeTraffic, err = p.Bool(v, path)
		case "target":
			f.Target, err = p.Str(v, path)
		case "op":
			f.Op, err = p.op(v, path)
		}
		return err
	})
	if err == nil && f.BeforeTraffic {
		if atGiven {
			return f, p.Err(n, field+".at", "at or before_traffic: true, not both", "a fault before the traffic has no time")
		}
		f.At = 0
	}
	if err == nil {
		switch {
		case f.At < 0:
			err = p.Err(n, field+".at", "a duration from the traffic start, e.g. 2.5s, or before_traffic: true", "missing")
		case f.Target == "":
			err = p.Err(n, field+".target", "a link (h0--p0-t0-0), NIC port (h0:p1), switch port (p0-t0-0:u1) or switch (p0-t1-1)", "missing")
		case f.Op.Kind == "":
			err = p.Err(n, field+".op", run.OpsHelp, "missing")
		}
	}
	return f, err
}

func (p *parser) op(n *yaml.Node, field string) (run.Op, error) {
	s, err := p.Str(n, field)
	if err != nil {
		return run.Op{}, err
	}
	o, err := run.ParseOp(s)
	if err != nil {
		return o, p.Err(n, field, run.OpsHelp, "bad op %q", s)
	}
	return o, nil
}

func (p *parser) random(r *RandomFaults, n *yaml.Node) error {
	err := p.Mapping(n, "random_faults", randomFields, func(k string, v *yaml.Node) error {
		path := "random_faults." + k
		var err error
		switch k {
		case "seed":
			var x int
			x, err = p.IntIn(v, path, 0, math.MaxInt32)
			r.Seed = int64(x)
		case "from":
			r.From, err = p.Dur(v, path, 0, 10*time.Minute)
		case "until":
			r.Until, err = p.Dur(v, path, 0, 10*time.Minute)
		case "every":
			var w Window
			if w, err = p.window(v, path); err == nil {
				r.MinGap, r.MaxGap = w.From, w.To
				if r.MinGap < 10*time.Millisecond {
					err = p.Err(v, path, "MIN..MAX with MIN ≥ 10ms, e.g. 100ms..500ms", "gap %v is too short", r.MinGap)
				}
			}
		case "hold":
			r.Hold, err = p.Dur(v, path, 10*time.Millisecond, time.Minute)
		case "targets":
			err = p.List(v, path, func(i int, vv *yaml.Node) error {
				s, err := p.Str(vv, fmt.Sprintf("%s[%d]", path, i))
				r.Targets = append(r.Targets, s)
				return err
			})
		case "ops":
			err = p.List(v, path, func(i int, vv *yaml.Node) error {
				o, err := p.op(vv, fmt.Sprintf("%s[%d]", path, i))
				if err == nil && (o.Kind == "up" || o.Kind == "clear") {
					err = p.Err(vv, fmt.Sprintf("%s[%d]", path, i), "down | blackhole | loss=P | flap=ON/OFF | hang", "%q repairs; random faults are cleared after hold by themselves", o.Kind)
				}
				r.Ops = append(r.Ops, o)
				return err
			})
		case "keep_plane_path":
			r.KeepPlanePath, err = p.Bool(v, path)
		}
		return err
	})
	if err != nil {
		return err
	}
	switch {
	case r.MaxGap == 0:
		return p.Err(n, "random_faults.every", "MIN..MAX, e.g. 100ms..500ms", "missing")
	case r.Until <= r.From:
		return p.Err(n, "random_faults.until", "a time after random_faults.from", "until %v is not after from %v", r.Until, r.From)
	case len(r.Targets) == 0:
		return p.Err(n, "random_faults.targets", strings.Join(TargetClasses, ", ")+" or target names", "missing")
	case len(r.Ops) == 0:
		return p.Err(n, "random_faults.ops", "a list of ops, e.g. [down, blackhole]", "missing")
	case r.Hold == 0:
		return p.Err(n, "random_faults.hold", "a duration, e.g. 200ms", "missing")
	}
	return nil
}

func (p *parser) expect(n *yaml.Node, field string) (Expect, error) {
	e := Expect{Line: n.Line, Level: 0.9, At: -1}
	var setWindow bool
	err := p.Mapping(n, field, expectFields, func(k string, v *yaml.Node) error {
		path := field + "." + k
		var err error
		switch k {
		case "claim":
			e.Claim, err = p.Str(v, path)
		case "metric":
			e.Metric, err = p.Enum(v, path, Metrics...)
		case "series":
			if v.Kind == yaml.SequenceNode {
				err = p.List(v, path, func(i int, x *yaml.Node) error {
					name, err := p.Str(x, fmt.Sprintf("%s[%d]", path, i))
					e.SeriesList = append(e.SeriesList, name)
					return err
				})
				return err
			}
			e.Series, err = p.Str(v, path)
		case "window":
			e.Window, err = p.window(v, path)
			setWindow = true
		case "baseline":
			if v.Kind == yaml.ScalarNode && v.Value == "capacity" {
				e.BaselineCapacity = true
				return nil
			}
			if of, ok := strings.CutPrefix(v.Value, "capacity of "); ok && v.Kind == yaml.ScalarNode {
				e.BaselineCapacity, e.CapacityOf = true, strings.TrimSpace(of)
				return nil
			}
			if v.Kind == yaml.SequenceNode {
				err = p.List(v, path, func(i int, x *yaml.Node) error {
					w, err := p.window(x, fmt.Sprintf("%s[%d]", path, i))
					e.Baselines = append(e.Baselines, w)
					return err
				})
				if err == nil && len(e.Baselines) == 0 {
					err = p.Err(v, path, "FROM..TO, a list of them, capacity, or capacity of SERIES", "an empty list")
				}
				if err == nil {
					e.Baseline = e.Baselines[0]
				}
				return err
			}
			e.Baseline, err = p.window(v, path)
		case "at":
			e.At, err = p.Dur(v, path, 0, 10*time.Minute)
		case "level":
			e.Level, err = p.Float(v, path, 0.01, 1)
		case "after_fault":
			var i int
			i, err = p.IntIn(v, path, 0, 1000)
			e.AfterFault = &i
		case "stat":
			var st string
			st, err = p.Enum(v, path, "mean", "median")
			e.Median = st == "median"
		case "want":
			e.Want, err = p.Num(v, path, "a number, e.g. 0.96 (ratios) or 300 (ms)")
		case "tolerance":
			e.Tolerance, err = p.Num(v, path, "a number, e.g. 0.96 (ratios) or 300 (ms)")
		case "min":
			e.Min, err = p.Num(v, path, "a number, e.g. 0.96 (ratios) or 300 (ms)")
		case "max":
			e.Max, err = p.Num(v, path, "a number, e.g. 0.96 (ratios) or 300 (ms)")
		case "value":
			e.Value, err = p.Str(v, path)
		case "of":
			e.Of, err = p.Str(v, path)
		case "values":
			err = p.List(v, path, func(i int, x *yaml.Node) error {
				s, err := p.Str(x, fmt.Sprintf("%s[%d]", path, i))
				e.Values = append(e.Values, s)
				return err
			})
		case "variant":
			e.Variant, err = p.Str(v, path)
		case "report":
			e.Report, err = p.Bool(v, path)
		case "condition":
			e.Condition, err = p.Bool(v, path)
		case "given", "given_not":
			if e.Given != "" {
				return p.Err(v, path, "one of given and given_not", "a claim has one condition")
			}
			e.Given, err = p.Str(v, path)
			e.GivenNot = k == "given_not"
		}
		return err
	})
	if err != nil {
		return e, err
	}
	if err := p.bounds(n, field, e); err != nil {
		return e, err
	}
	switch {
	case e.Metric == MetricValue && e.Value == "":
		return e, p.Err(n, field+".value", "[VARIANT.]FLOW.KEY, KEY one of "+strings.Join(Keys, ", "), "missing for metric value")
	case e.Metric != MetricJain && len(e.SeriesList) > 0:
		return e, p.Err(n, field+".series", "one series name; a list only with metric jain", "a list of series given for metric %s", e.Metric)
	case e.Metric == MetricJain && len(e.SeriesList) > 0 && len(e.Values) > 0:
		return e, p.Err(n, field+".values", "values or a list of series, not both", "metric jain given both")
	case e.Metric == MetricJain && len(e.SeriesList) > 0:
		switch {
		case len(e.SeriesList) < 2:
			return e, p.Err(n, field+".series", "a list of 2 or more rate series, e.g. [goodput:h0, goodput:h1]", "metric jain needs at least 2 series")
		case !setWindow:
			return e, p.Err(n, field+".window", "FROM..TO, e.g. 9.5s..12.5s", "missing for metric jain over series")
		case e.Claim == "":
			return e, p.Err(n, field+".claim", "the sentence the expectation checks", "missing")
		}
		for i, name := range e.SeriesList {
			if strings.HasPrefix(name, "uplinks:") || strings.HasPrefix(name, "qp:") {
				return e, p.Err(n, fmt.Sprintf("%s.series[%d]", field, i), "a rate series ("+SeriesHelp+")", "%q is not a rate series", name)
			}
		}
		return e, nil
	case e.Metric == MetricJain && len(e.Values) < 2:
		return e, p.Err(n, field+".values", "a list of 2 or more [VARIANT.]FLOW.KEY, e.g. [incast.i0.rate, incast.i1.rate], or series: [A, B] with a window", "metric jain needs at least 2 values")
	case e.Metric != MetricValue && (e.Value != "" || e.Of != ""):
		return e, p.Err(n, field+".value", "value and of with metric value", "value/of given for metric %s", e.Metric)
	case e.Metric != MetricJain && len(e.Values) > 0:
		return e, p.Err(n, field+".values", "values with metric jain", "values given for metric %s", e.Metric)
	case e.CrossRun() && e.Claim != "":
		return e, nil
	}
	miss := func(f, allowed string) error {
		return p.Err(n, field+"."+f, allowed, "missing for metric %s", e.Metric)
	}
	switch {
	case e.Claim == "":
		return e, p.Err(n, field+".claim", "the sentence the expectation checks", "missing")
	case e.Metric == "":
		return e, p.Err(n, field+".metric", strings.Join(Metrics, " | "), "missing")
	case e.Metric != MetricToolErrors && e.Series == "":
		return e, miss("series", "a series name, e.g. rx:h3 (docs/lab.md)")
	case e.Metric == MetricImbalance && !strings.HasPrefix(e.Series, "uplinks:"):
		return e, p.Err(n, field+".series", "uplinks:SWITCH (a T0's fabric ports), e.g. uplinks:p0-t0-0", "metric imbalance compares a switch's uplinks, not series %q", e.Series)
	case e.Metric != MetricImbalance && strings.HasPrefix(e.Series, "uplinks:"):
		return e, p.Err(n, field+".series", "a rate series ("+SeriesHelp+")", "%q is only for metric %s", e.Series, MetricImbalance)
	case e.Metric != MetricToolErrors && e.Metric != MetricImbalance && !setWindow:
		return e, miss("window", "FROM..TO, e.g. 1s..2.5s")
	case (e.Metric == MetricRatio || e.Metric == MetricDip) && !e.BaselineCapacity && e.Baseline.To == 0:
		return e, miss("baseline", "FROM..TO (a reference window of the same series), capacity, or capacity of SERIES")
	case e.Metric == MetricRecovery && e.At < 0 && e.AfterFault == nil:
		return e, miss("at", "the fault time recovery is measured from, e.g. 2s, or after_fault: N")
	case e.Metric == MetricQPLossBound && !strings.HasPrefix(e.Series, "qp:"):
		return e, p.Err(n, field+".series", "qp:HOST (the QPs of a sending host)", "metric %s counts per QP, not series %q", e.Metric, e.Series)
	case e.Metric != MetricQPLossBound && strings.HasPrefix(e.Series, "qp:"):
		return e, p.Err(n, field+".series", "a rate series ("+SeriesHelp+")", "%q is only for metric %s", e.Series, MetricQPLossBound)
	}
	if e.At < 0 {
		e.At = 0 // with after_fault: from the moment the fault took effect
	}
	return e, nil
}

// bounds checks what passes: want (+ tolerance), min or max, or none with
// report: true (a report-only claim is never judged, so a bound would be a
// verdict nobody computes).
func (p *parser) bounds(n *yaml.Node, field string, e Expect) error {
	bounded := e.Want != nil || e.Tolerance != nil || e.Min != nil || e.Max != nil
	switch {
	case e.Report && bounded:
		return p.Err(n, field+".report", "report: true with no want, tolerance, min or max (put a reference such as the seed's number in the claim)", "a report-only claim takes no bound")
	case e.Report:
		return nil
	case e.Tolerance != nil && e.Want == nil:
		return p.Err(n, field+".tolerance", "tolerance together with want", "tolerance without want")
	case !bounded:
		return p.Err(n, field, "want (+ tolerance), min or max; or report: true to show the value without a verdict", "no bound: say what passes")
	}
	return nil
}

// validate checks what spans fields: hosts and targets exist in the
// topology, faults fall inside the run, windows inside the run.
func (p *parser) validate(s *Scenario, root *yaml.Node) error {
	line := func(key string) int {
		for i := 0; i+1 < len(root.Content); i += 2 {
			if root.Content[i].Value == key {
				return root.Content[i].Line
			}
		}
		return root.Line
	}
	bad := func(l int, field, allowed, format string, args ...any) error {
		return &Error{File: p.File, Line: l, Field: field, Msg: fmt.Sprintf(format, args...), Allowed: allowed}
	}
	if s.Name == "" {
		return bad(root.Line, "name", "1-40 characters [a-z0-9_-]", "missing")
	}
	if len(s.Variants) == 0 {
		for i, e := range s.Expect {
			if e.Variant != "" {
				return bad(e.Line, fmt.Sprintf("expect[%d].variant", i), "variant only in a scenario with variants", "this scenario has no variants")
			}
		}
		if err := p.validateRun(s, line); err != nil {
			return err
		}
	}
	seen := map[string]bool{}
	for i, v := range s.Variants {
		if seen[v.Name] {
			return bad(v.Line, fmt.Sprintf("variants[%d].name", i), "unique variant names", "variant %q given twice", v.Name)
		}
		seen[v.Name] = true
		for j, fl := range v.Flows {
			if !slices.ContainsFunc(s.Traffic, func(f Flow) bool { return f.Name == fl }) {
				return bad(v.Line, fmt.Sprintf("variants[%d].traffic[%d]", i, j), "names of flows in traffic", "no flow %q", fl)
			}
		}
		vline := func(key string) int {
			if (key == "topology" && v.SetTopology) || (key == "faults" && v.SetFaults) || key == "traffic" {
				return v.Line
			}
			return line(key)
		}
		if err := p.validateRun(s.Apply(v), vline); err != nil {
			var e *Error
			if errors.As(err, &e) {
				e.Msg = fmt.Sprintf("variant %s: %s", v.Name, e.Msg)
			}
			return err
		}
	}
	for i, e := range s.Expect {
		field := fmt.Sprintf("expect[%d]", i)
		if len(s.Variants) > 0 && !e.CrossRun() && s.Variant(e.Variant) == nil {
			return bad(e.Line, field+".variant", "the name of a variant: "+variantNames(s), "metric %s checks one run: say which variant (%q is none)", e.Metric, e.Variant)
		}
		if e.Variant != "" && s.Variant(e.Variant) == nil {
			return bad(e.Line, field+".variant", "the name of a variant: "+variantNames(s), "no variant %q", e.Variant)
		}
		if err := givenValid(s, e); err != "" {
			return bad(e.Line, field, "given or given_not: the claim text of a condition (condition: true) of a run, on a claim comparing values (metric value or jain)", "%s", err)
		}
		names := e.Values
		if e.Metric == MetricValue {
			names = []string{e.Value}
			if e.Of != "" {
				names = append(names, e.Of)
			}
		}
		for _, n := range names {
			if _, _, _, err := s.ResolveValue(e.Variant, n); err != nil {
				return bad(e.Line, field, "[VARIANT.]FLOW.KEY with KEY "+strings.Join(Keys, ", ")+" (rate for mrc-write-bw; busbw, job_busbw, algbw, wrong for collectives)", "%v", err)
			}
		}
	}
	return nil
}

func variantNames(s *Scenario) string {
	var n []string
	for _, v := range s.Variants {
		n = append(n, v.Name)
	}
	return strings.Join(n, ", ")
}

// ResolveValue splits a value name ([VARIANT.]FLOW.KEY; VARIANT defaults to
// variant) and checks that the variant runs that flow and the flow has
// that key. It returns the full name VARIANT.FLOW.KEY (FLOW.KEY without
// variants).
func (s *Scenario) ResolveValue(variant, name string) (full, flow, key string, err error) {
	parts := strings.Split(name, ".")
	if len(parts) == 2 && variant != "" {
		parts = append([]string{variant}, parts...)
	}
	run := s
	switch {
	case len(s.Variants) == 0 && len(parts) == 2:
	case len(s.Variants) > 0 && len(parts) == 3:
		v := s.Variant(parts[0])
		if v == nil {
			return "", "", "", fmt.Errorf("value %q: no variant %q (%s)", name, parts[0], variantNames(s))
		}
		run = s.Apply(*v)
	case len(s.Variants) > 0:
		return "", "", "", fmt.Errorf("value %q: want VARIANT.FLOW.KEY (or FLOW.KEY with variant: set)", name)
	default:
		return "", "", "", fmt.Errorf("value %q: want FLOW.KEY (this scenario has no variants)", name)
	}
	flow, key = parts[len(parts)-2], parts[len(parts)-1]
	i := slices.IndexFunc(run.Traffic, func(f Flow) bool { return f.Name == flow })
	if i < 0 {
		return "", "", "", fmt.Errorf("value %q: the run has no flow %q", name, flow)
	}
	want := []string{"rate"}
	if run.Traffic[i].IsCollective() {
		want = []string{"busbw", "job_busbw", "algbw", "wrong"}
	}
	if !slices.Contains(want, key) {
		return "", "", "", fmt.Errorf("value %q: flow %s (%s) has %s, not %q", name, flow, run.Traffic[i].Tool, strings.Join(want, ", "), key)
	}
	return strings.Join(parts, "."), flow, key, nil
}

// validateRun checks one run's scenario (the scenario itself, or one of
// its variants): hosts and targets exist in its topology, faults and
// windows fall inside the run.
func (p *parser) validateRun(s *Scenario, line func(string) int) error {
	bad := func(l int, field, allowed, format string, args ...any) error {
		return &Error{File: p.File, Line: l, Field: field, Msg: fmt.Sprintf(format, args...), Allowed: allowed}
	}
	t := s.Topology
	switch {
	case t.Preset == "" && t.File == "":
		return bad(line("topology"), "topology", "preset: NAME ("+strings.Join(topo.Presets(), ", ")+") or file: PATH", "missing: name a preset or a topology file")
	case t.Preset != "" && t.File != "":
		return bad(line("topology"), "topology", "preset or file, not both", "both preset and file given")
	}
	if len(s.Traffic) == 0 {
		return bad(line("traffic"), "traffic", "a list of flows (name, from, to, duration, ...)", "missing: a scenario drives traffic")
	}
	tp, err := s.Topology.Resolve()
	if err != nil {
		return bad(line("topology"), "topology", "", "%v", err)
	}
	pl, err := plan.Build(tp, plan.Options{RunDir: "/run/softmrc/check"})
	if err != nil {
		return bad(line("topology"), "topology", "", "%v", err)
	}
	names := map[string]bool{}
	for i, f := range s.Traffic {
		for _, h := range append([]string{f.From, f.To}, f.Hosts...) {
			if h == "" {
				continue
			}
			if pl.Host(h) == nil {
				return bad(f.Line, fmt.Sprintf("traffic[%d]", i), fmt.Sprintf("h0 .. h%d", len(pl.Hosts)-1), "host %s is not in the topology", h)
			}
		}
		if names[f.Name] {
			return bad(f.Line, fmt.Sprintf("traffic[%d].name", i), "unique flow names", "flow %q given twice", f.Name)
		}
		names[f.Name] = true
	}
	end := s.End()
	for i, f := range s.Faults {
		if !TargetExists(pl, f.Target) {
			return bad(f.Line, fmt.Sprintf("faults[%d].target", i), targetHelp(pl), "unknown target %q", f.Target)
		}
		if err := run.ValidateFault(pl, f.Target, f.Op); err != nil {
			return bad(f.Line, fmt.Sprintf("faults[%d].op", i), faultOpsHelp, "%v", err)
		}
		if f.At >= end && !f.BeforeTraffic {
			if end == 0 {
				return bad(f.Line, fmt.Sprintf("faults[%d].at", i), "before_traffic: true, or a scenario duration", "collectives alone have no planned end, so a timed fault may never apply")
			}
			return bad(f.Line, fmt.Sprintf("faults[%d].at", i), fmt.Sprintf("a time before the end of the traffic (%v)", end), "%v is after the run", f.At)
		}
	}
	if r := s.Random; r != nil {
		for i, tg := range r.Targets {
			if !slices.Contains(TargetClasses, tg) && !TargetExists(pl, tg) {
				return bad(r.Line, fmt.Sprintf("random_faults.targets[%d]", i), strings.Join(TargetClasses, ", ")+" or "+targetHelp(pl), "unknown target %q", tg)
			}
			// Every fault the draw can make from this target: each of its
			// candidates with each op (a class's candidates are alike, but
			// a kernel dataplane refuses on links what it takes on ports).
			one := *r
			one.Targets = []string{tg}
			cands, _ := one.candidates(pl) // none qualifying: reported below
			for _, c := range cands {
				for _, op := range r.Ops {
					op = drawnOp(pl, c.target, op)
					if err := run.ValidateFault(pl, c.target, op); err != nil {
						return bad(r.Line, fmt.Sprintf("random_faults.targets[%d]", i), faultOpsHelp, "target %s with op %s: %v", tg, op, err)
					}
				}
			}
		}
		if r.Until > end {
			return bad(r.Line, "random_faults.until", fmt.Sprintf("at most the end of the traffic (%v)", end), "%v is after the run", r.Until)
		}
	}
	for _, e := range s.Expect {
		i := e.Index
		win := e.Window
		if e.AfterFault != nil {
			if *e.AfterFault >= len(s.Faults) {
				return bad(e.Line, fmt.Sprintf("expect[%d].after_fault", i), fmt.Sprintf("an index into faults, 0 .. %d", len(s.Faults)-1), "there is no faults[%d]", *e.AfterFault)
			}
			at := s.Faults[*e.AfterFault].At
			win = Window{From: at + win.From, To: at + win.To}
		}
		type named struct {
			name string
			w    Window
		}
		wins := []named{{"window", win}}
		for j, b := range e.BaselineWindows() {
			n := "baseline"
			if len(e.Baselines) > 0 {
				n = fmt.Sprintf("baseline[%d]", j)
			}
			wins = append(wins, named{n, b})
		}
		for _, w := range wins {
			if w.w.To > end {
				return bad(e.Line, fmt.Sprintf("expect[%d].%s", i, w.name), fmt.Sprintf("a window inside 0..%v", end), "%v ends after the run", w.w)
			}
		}
		if e.Series != "" {
			if err := CheckSeries(pl, e.Series); err != nil {
				return bad(e.Line, fmt.Sprintf("expect[%d].series", i), SeriesHelp, "%v", err)
			}
		}
		for j, name := range e.SeriesList {
			if err := CheckSeries(pl, name); err != nil {
				return bad(e.Line, fmt.Sprintf("expect[%d].series[%d]", i, j), SeriesHelp, "%v", err)
			}
		}
		if h, ok := strings.CutPrefix(e.Series, "qp:"); ok && !slices.ContainsFunc(s.Traffic, func(f Flow) bool { return f.From == h }) {
			return bad(e.Line, fmt.Sprintf("expect[%d].series", i), "qp:HOST of a host that sends a flow", "%s sends no flow: its QPs lose nothing", h)
		}
		if e.CapacityOf != "" {
			if err := CheckSeries(pl, e.CapacityOf); err != nil {
				return bad(e.Line, fmt.Sprintf("expect[%d].baseline", i), "capacity of "+SeriesHelp, "%v", err)
			}
		}
	}
	return nil
}

// SeriesHelp says which series names exist.
const SeriesHelp = "rx:HOST (bit/s arriving at a host, all planes), rx:HOST:pP (one plane), fabric:HOST and fabric:HOST:pP (bit/s the T1s deliver to the host's T0s), tx:SWITCH:PORT (a switch port's egress), goodput:HOST (payload bit/s acknowledged to a sending host's QPs), qp:HOST (the per-QP counters of a sending host, metric qp_loss_bound), uplinks:T0 or uplinks:t0 (a T0's fabric ports, or every T0's; metric imbalance)"

// CheckSeries checks a series name against a plan.
func CheckSeries(pl *plan.Plan, name string) error {
	parts := strings.Split(name, ":")
	switch {
	case len(parts) >= 2 && len(parts) <= 3 && (parts[0] == "rx" || parts[0] == "fabric"):
		h := pl.Host(parts[1])
		if h == nil {
			return fmt.Errorf("series %q: no host %s", name, parts[1])
		}
		if len(parts) == 3 {
			p, err := strconv.Atoi(strings.TrimPrefix(parts[2], "p"))
			if err != nil || !strings.HasPrefix(parts[2], "p") || p < 0 || p >= pl.Planes {
				return fmt.Errorf("series %q: no plane %s (p0 .. p%d)", name, parts[2], pl.Planes-1)
			}
		}
		return nil
	case len(parts) == 2 && (parts[0] == "goodput" || parts[0] == "qp"):
		if pl.Host(parts[1]) == nil {
			return fmt.Errorf("series %q: no host %s", name, parts[1])
		}
		return nil
	case len(parts) == 2 && parts[0] == "uplinks":
		_, err := UplinkSets(pl, parts[1])
		if err != nil {
			return fmt.Errorf("series %q: %v", name, err)
		}
		return nil
	case len(parts) == 3 && parts[0] == "tx":
		sw := pl.Switch(parts[1])
		if sw == nil || sw.Port(parts[2]) == nil {
			return fmt.Errorf("series %q: no switch port %s:%s", name, parts[1], parts[2])
		}
		return nil
	}
	return fmt.Errorf("unknown series %q", name)
}

// Uplinks are the tx series of a switch's fabric ports.
func Uplinks(sw *plan.Switch) []string {
	var out []string
	for _, pt := range sw.Ports {
		if pt.Role == "fabric" {
			out = append(out, "tx:"+sw.Name+":"+pt.Ifname)
		}
	}
	return out
}

// UplinkSets resolves the group of series uplinks:WHICH: WHICH a T0's
// name (one set: its uplinks) or "t0" (one set per T0 of the plan).
func UplinkSets(pl *plan.Plan, which string) ([][]string, error) {
	var sws []*plan.Switch
	for i := range pl.Switches {
		sw := &pl.Switches[i]
		if sw.Role == plan.KindT0 && (which == "t0" || which == sw.Name) {
			sws = append(sws, sw)
		}
	}
	if len(sws) == 0 {
		return nil, fmt.Errorf("no T0 switch %s (uplinks:t0 or uplinks:T0, e.g. uplinks:%s)", which, pl.Switches[0].Name)
	}
	var out [][]string
	for _, sw := range sws {
		u := Uplinks(sw)
		if len(u) < 2 {
			return nil, fmt.Errorf("%s has %d fabric port(s); imbalance needs 2 or more", sw.Name, len(u))
		}
		out = append(out, u)
	}
	return out, nil
}

// TargetExists says whether a fault target names something in the plan.
func TargetExists(pl *plan.Plan, target string) bool {
	if l := pl.Link(target); l != nil {
		return l.Kind != plan.LinkMgmt
	}
	if pl.Switch(target) != nil {
		return true
	}
	node, ifname, ok := strings.Cut(target, ":")
	if !ok {
		return false
	}
	for _, l := range pl.Links {
		for _, e := range []plan.End{l.A, l.B} {
			if e.Node == node && e.Ifname == ifname && l.Kind != plan.LinkMgmt {
				return true
			}
		}
	}
	return false
}

// faultOpsHelp is what a fault's op may be, by target (docs/testbed.md).
const faultOpsHelp = "a switch takes every op (hang and restart only on the xdp dataplane); a link or switch port every op but hang and restart; a NIC port down, up or clear; kernel switches down, up or clear"

func targetHelp(pl *plan.Plan) string {
	return fmt.Sprintf("a link (e.g. %s), a NIC port (e.g. %s:%s), a switch port (e.g. %s:%s) or a switch (e.g. %s)",
		pl.Links[0].Name, pl.Hosts[0].Name, pl.Hosts[0].Ports[0].Ifname, pl.Switches[0].Name, pl.Switches[0].Ports[0].Ifname, pl.Switches[0].Name)
}

// Resolve returns the topology the scenario runs on (preset or file with
// the scenario's link models and nics: true).
func (t Topology) Resolve() (*topo.Topology, error) {
	var tp *topo.Topology
	var err error
	switch {
	case t.Preset != "":
		tp, err = topo.Preset(t.Preset)
	case t.FileData != nil:
		tp, err = topo.Parse(t.File, t.FileData)
	default:
		tp, err = topo.Load(t.File)
	}
	if err != nil {
		return nil, err
	}
	if t.SetFabric {
		tp.Fabric = t.Fabric
	}
	if t.SetHost {
		tp.Host = t.Host
	}
	tp.NICs = true
	return tp, tp.Validate()
}

func (p *parser) window(n *yaml.Node, field string) (Window, error) {
	const allowed = "FROM..TO with durations, FROM < TO, e.g. 1s..2.5s"
	s, err := p.Str(n, field)
	if err != nil {
		return Window{}, err
	}
	a, b, ok := strings.Cut(s, "..")
	from, err1 := time.ParseDuration(strings.TrimSpace(a))
	to, err2 := time.ParseDuration(strings.TrimSpace(b))
	if !ok || err1 != nil || err2 != nil || from < 0 || to <= from {
		return Window{}, p.Err(n, field, allowed, "bad window %q", s)
	}
	return Window{From: from, To: to}, nil
}

// givenValid checks a claim's condition fields: a condition is a bounded
// claim of one run, and given names one from a cross-run claim. It
// returns what is wrong, or "".
func givenValid(s *Scenario, e Expect) string {
	switch {
	case e.Condition && e.Report:
		return "a condition needs a bound, not report: true"
	case e.Condition && e.CrossRun():
		return "a condition is a claim of one run (a series metric or tool_errors), not metric " + e.Metric
	case e.Condition && e.Given != "":
		return "a condition has no condition of its own"
	case e.Given == "":
		return ""
	case !e.CrossRun():
		return "given on metric " + e.Metric + ": only claims comparing values take a condition"
	case e.Report:
		return "a report-only claim is never judged, so it takes no condition"
	}
	for _, c := range s.Expect {
		if c.Claim == e.Given {
			if !c.Condition {
				return fmt.Sprintf("claim %q is not a condition (condition: true)", e.Given)
			}
			return ""
		}
	}
	return fmt.Sprintf("no claim %q", e.Given)
}
