// Package oamflag holds what mrc-ping and mrc-traceroute share up to
// their first probe: the command-line arguments (mrc-nicd's device socket,
// the path to follow, --ev N or --path PLANE,T1, the time to wait for each
// probe and the one HOST operand, with the same bounds and error messages
// in both) and opening the device with the path's hops (Flags.Open).
package oamflag

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/softmrc/softmrc/internal/cliargs"
	"github.com/softmrc/softmrc/internal/wire"
	"github.com/softmrc/softmrc/nic/verbs"
	"github.com/softmrc/softmrc/nic/vproto"
)

// MaxWait bounds the time a tool waits for one probe.
const MaxWait = 10 * time.Second

// Flags are the shared flags after parsing.
type Flags struct {
	Dev        string        // -d, default $MRC_DEVICE or /run/mrc/nic.sock
	EV, Path   string        // --ev, --path
	Wait       time.Duration // -W
	pathNeeded bool
}

// Register adds -d, --ev, --path and -W to fs. With pathNeeded, one of
// --ev and --path must be given; otherwise the path defaults to plane 0,
// T1 0.
func Register(fs *flag.FlagSet, pathNeeded bool, wait time.Duration) *Flags {
	f := &Flags{pathNeeded: pathNeeded}
	dev := os.Getenv("MRC_DEVICE")
	if dev == "" {
		dev = "/run/mrc/nic.sock"
	}
	fs.StringVar(&f.Dev, "d", dev, "mrc-nicd's device socket (env MRC_DEVICE)")
	evHelp := "the EV whose path to follow (its plane and T1 index); default plane 0, T1 0"
	if pathNeeded {
		evHelp = "the EV whose path to follow (its plane and T1 index; required unless --path)"
	}
	fs.StringVar(&f.EV, "ev", "", evHelp)
	fs.StringVar(&f.Path, "path", "", "PLANE,T1: the path of plane PLANE through T1 index T1")
	fs.DurationVar(&f.Wait, "W", wait, "time to wait for each probe's answer (at most 10s)")
	return f
}

// Parse parses args into fs (whose usage text is usage, followed by
// the flags' defaults) and checks them as Check does.
func (f *Flags) Parse(fs *flag.FlagSet, usage string, args []string) (wire.EV, string, error) {
	fs.Usage = func() { fmt.Fprint(fs.Output(), usage); fs.PrintDefaults() }
	ops, err := cliargs.Parse(fs, args) // `mrc-ping h3 --path 0,1`, as ping takes it
	if err != nil {
		return 0, "", err
	}
	return f.Check(fs, ops)
}

// Check validates the parsed flags and the operands: it returns the EV
// the path names and the one HOST.
func (f *Flags) Check(fs *flag.FlagSet, ops []string) (wire.EV, string, error) {
	if len(ops) != 1 {
		fs.Usage()
		return 0, "", fmt.Errorf("want exactly one HOST, got %q", ops)
	}
	if f.Wait <= 0 || f.Wait > MaxWait {
		return 0, "", fmt.Errorf("-W %v: want (0, 10s]", f.Wait)
	}
	if f.pathNeeded && f.EV == "" && f.Path == "" {
		return 0, "", errors.New("give --ev N or --path PLANE,T1")
	}
	ev, err := ParseEV(f.EV, f.Path)
	return ev, ops[0], err
}

// ParseEV reads --ev or --path into an EV (a --path EV has entropy 0);
// neither is plane 0, T1 0.
func ParseEV(ev, path string) (wire.EV, error) {
	switch {
	case ev != "" && path != "":
		return 0, errors.New("give --ev N or --path PLANE,T1, not both")
	case ev != "":
		v, err := strconv.ParseUint(ev, 0, 32)
		if err != nil {
			return 0, fmt.Errorf("--ev %q: want an EV number (hex with 0x)", ev)
		}
		return wire.EV(v), nil
	case path != "":
		p, t, ok := strings.Cut(path, ",")
		pl, err1 := strconv.ParseUint(p, 0, 4)
		t1, err2 := strconv.ParseUint(t, 0, 8)
		if !ok || err1 != nil || err2 != nil {
			return 0, fmt.Errorf("--path %q: want PLANE,T1 (e.g. 0,1)", path)
		}
		return wire.MakeEV(wire.Plane(pl), uint8(t1), 0), nil
	}
	return wire.MakeEV(0, 0, 0), nil
}

// Open connects to mrc-nicd's device socket (-d) and asks it for the hops
// of the uSID path to host along ev (with reflect, the path there and back
// through T1 index back): the first step of every OAM tool. The caller
// closes the device.
func (f *Flags) Open(host string, ev wire.EV, reflect bool, back int) (*verbs.Device, []vproto.OAMHop, error) {
	d, err := verbs.OpenControl(f.Dev)
	if err != nil {
		return nil, nil, err
	}
	var hops []vproto.OAMHop
	if err := d.Ctl(vproto.CtlRequest{Cmd: vproto.CtlOAMTrace, Peer: host, EV: uint32(ev), Reflect: reflect, Back: back}, &hops); err != nil {
		d.Close()
		return nil, nil, err
	}
	if len(hops) == 0 {
		d.Close()
		return nil, nil, fmt.Errorf("mrc-nicd names no hop on the path to %s along EV %v: check its path template (mrcctl paths)", host, ev)
	}
	return d, hops, nil
}
