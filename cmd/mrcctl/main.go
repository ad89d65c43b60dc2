// Command mrcctl inspects and steers a running mrc-nicd through its device
// socket: ports and their state, QPs, each QP's EV table (state, plane,
// path, counters), the denylist, counters.
//
//	mrcctl [-d SOCKET] [-json] ports
//	mrcctl [-d SOCKET] [-json] qps
//	mrcctl [-d SOCKET] [-json] evs QPN
//	mrcctl [-d SOCKET] [-json] counters
//	mrcctl [-d SOCKET] [-json] sessions
//	mrcctl [-d SOCKET] [-json] deny list
//	mrcctl [-d SOCKET] deny|allow ev EV [QPN]
//	mrcctl [-d SOCKET] deny|allow path PLANE,T1
//	mrcctl [-d SOCKET] deny|allow link NAME
//	mrcctl [-d SOCKET] deny|allow plane P [QPN]
//	mrcctl [-d SOCKET] watch [--interval 10ms] [--count N] [--duration 10s]
//
// QPN and EV are hex with 0x, as printed (0x0101), or decimal. Without QPN, deny and
// allow edit the daemon's denylist, which holds for every QP, those created
// later too, for the daemon's life. With a QPN they act on that QP only.
//
// Run as root (or as mrc-nicd's user), mrcctl sees and steers every
// application's QPs; run as another user it is an application like any
// other: it sees only its own session, and deny/allow/evs of other
// applications' QPs (or of every QP) are refused. mrcctl links only the
// client library and the protocol (nic/verbs, nic/vproto), no daemon code.
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/softmrc/softmrc/nic/pathprobe"
	"github.com/softmrc/softmrc/nic/verbs"
	"github.com/softmrc/softmrc/nic/vproto"
)

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return // the usage was printed
		}
		fmt.Fprintln(os.Stderr, "mrcctl:", err)
		os.Exit(1)
	}
}

const usage = `usage: mrcctl [-d SOCKET] [-json] COMMAND
commands:
  ports                      NIC ports, carrier and counters
  qps                        QPs with state, RTT, window and counters
  evs QPN                    the EV table of a QP: plane, uSID path, the switches it crosses, state, counters
  counters                   engine, QP (summed over QPs), run-loop and port counters
  sessions                   applications with the device open
  paths                      the path-probe agent's loops (path_probes in the NIC config)
  deny list                  the daemon's denylist
  deny|allow ev EV [QPN]     take an EV out of (or back into) use
  deny|allow path PLANE,T1   every EV of a plane through one T1 (its T1 index)
  deny|allow link NAME       every path over a testbed link (h0--p0-t0-0, p0-t0-0--p0-t1-1)
  deny|allow plane P [QPN]   every EV of a plane
  watch [--interval 10ms] [--count N] [--duration 10s]
                             telemetry as JSON Lines: one sample per QP and per
                             port every interval (1ms..10s), until N samples or
                             the duration (default 10s; both 0: until Ctrl-C);
                             fields in docs/telemetry.md
Without QPN, deny and allow edit the daemon's denylist: every QP, now and
later, until allowed again. Nothing denied carries data or control packets.
With QPN, only that QP's EVs. Other applications' QPs, and deny/allow
without QPN, need root.
`

func run(args []string, out io.Writer) error {
	fs := flag.NewFlagSet("mrcctl", flag.ContinueOnError)
	dev := os.Getenv("MRC_DEVICE")
	if dev == "" {
		dev = "/run/mrc/nic.sock"
	}
	fs.StringVar(&dev, "d", dev, "mrc-nicd's device socket (env MRC_DEVICE)")
	asJSON := fs.Bool("json", false, "print the daemon's answer as JSON")
	fs.Usage = func() { fmt.Fprint(fs.Output(), usage); fs.PrintDefaults() }
	if err := fs.Parse(args); err != nil {
		return err
	}
	a := fs.Args()
	if len(a) == 0 {
		fs.Usage()
		return fmt.Errorf("no command")
	}
	if a[0] == "watch" {
		return watchCmd(dev, a[1:], out)
	}
	req := vproto.CtlRequest{Cmd: vproto.CtlCmd(a[0])}
	var res any
	switch req.Cmd {
	case vproto.CtlPorts:
		res = &[]vproto.PortStatus{}
	case vproto.CtlQPs:
		res = &[]vproto.QPRow{}
	case vproto.CtlEVs:
		if len(a) != 2 {
			return fmt.Errorf("usage: mrcctl evs QPN")
		}
		q, err := parseNum(a[1], "QPN")
		if err != nil {
			return err
		}
		req.QPN = q
		res = &[]vproto.EVRow{}
	case vproto.CtlCounters:
		res = &vproto.Counters{}
	case vproto.CtlSessions:
		res = &[]vproto.SessionInfo{}
	case vproto.CtlPaths:
		if len(a) != 1 {
			return fmt.Errorf("usage: mrcctl paths")
		}
		res = &[]pathprobe.Stats{}
	case vproto.CtlDeny, vproto.CtlAllow:
		if req.Cmd == vproto.CtlDeny && len(a) == 2 && a[1] == "list" {
			req.Cmd = vproto.CtlDenylist
			res = &[]vproto.DenyRow{}
			break
		}
		okScope := len(a) > 1 && (a[1] == "ev" || a[1] == "plane" || a[1] == "path" || a[1] == "link")
		if len(a) < 3 || len(a) > 4 || !okScope || (len(a) == 4 && (a[1] == "path" || a[1] == "link")) {
			return fmt.Errorf("usage: mrcctl %[1]s ev EV [QPN] | %[1]s path PLANE,T1 | %[1]s link NAME | %[1]s plane P [QPN] | deny list", a[0])
		}
		req.Scope = vproto.CtlScope(a[1])
		var err error
		switch req.Scope {
		case vproto.ScopeEV, vproto.ScopePlane:
			v, err := parseNum(a[2], a[1])
			if err != nil {
				return err
			}
			if req.Scope == vproto.ScopeEV {
				req.EV = v
			} else {
				req.Plane = int(v)
			}
		case vproto.ScopePath:
			p, t1, ok := strings.Cut(a[2], ",")
			pv, err1 := parseNum(p, "plane")
			tv, err2 := parseNum(t1, "T1")
			if !ok || err1 != nil || err2 != nil {
				return fmt.Errorf("path %q: want PLANE,T1 (e.g. 0,1)", a[2])
			}
			req.Plane, req.T1 = int(pv), int(tv)
		case vproto.ScopeLink:
			req.Link = a[2]
		}
		if len(a) == 4 {
			if req.QPN, err = parseNum(a[3], "QPN"); err != nil {
				return err
			}
		}
		res = &vproto.CtlResult{}
	default:
		fs.Usage()
		return fmt.Errorf("unknown command %q", a[0])
	}
	d, err := verbs.OpenControl(dev)
	if err != nil {
		return err
	}
	defer d.Close()
	var raw json.RawMessage
	if err := d.Ctl(req, &raw); err != nil {
		return err
	}
	if *asJSON {
		var v any
		_ = json.Unmarshal(raw, &v)
		b, _ := json.MarshalIndent(v, "", "  ")
		fmt.Fprintf(out, "%s\n", b)
		return nil
	}
	if err := json.Unmarshal(raw, res); err != nil {
		return fmt.Errorf("daemon answer: %w", err)
	}
	tw := tabwriter.NewWriter(out, 2, 4, 2, ' ', 0)
	defer tw.Flush()
	switch r := res.(type) {
	case *[]vproto.PortStatus:
		fmt.Fprintln(tw, "PORT\tINTERFACE\tPLANE\tADDRESS\tSTATE\tRX FRAMES\tRX BYTES\tTX FRAMES\tTX BYTES\tRX DROPPED\tTX FULL")
		for _, p := range *r {
			st := "down"
			if p.Up {
				st = "up"
			}
			s := p.Stats
			fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%d\t%d\t%d\t%d\t%d\t%d\n", p.Name, p.Interface, p.Plane, p.Address, st,
				s["RxFrames"], s["RxBytes"], s["TxFrames"], s["TxBytes"], s["RxDropped"]+s["RxRingFull"]+s["FillEmpty"], s["TxFull"])
		}
	case *[]vproto.QPRow:
		fmt.Fprintln(tw, "QPN\tSESSION\tSTATE\tSTATUS\tTRANSPORT\tREMOTE\tSRTT(us)\tCWND|RATE\tIN FLIGHT\tBACKLOG\tTX DATA\tTX RTX\tTX BYTES\tRX DATA\tRX BYTES\tTIMEOUTS\tLOSSES\tEVS GOOD/ALL")
		for _, q := range *r {
			// CWND for MRC (bytes), DCQCN's rate for RoCE.
			cc := fmt.Sprint(q.Cwnd)
			if q.Transport == "roce" {
				cc = fmt.Sprintf("%.3fG cnp %d/%d", q.RateGbps, q.CNPsRx, q.CNPsTx)
			}
			fmt.Fprintf(tw, "%#06x\t%d\t%s\t%s\t%s\t%#06x\t%.1f\t%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d/%d\n", q.QPN, q.Owner, q.State, q.Status,
				q.Transport, q.RemoteQPN, q.SRTTus, cc, q.InFlight, q.Backlog, q.TxData, q.TxRtx, q.TxBytes, q.RxData, q.RxBytes,
				q.Timeouts, q.Losses, q.GoodEVs, q.EVs)
		}
		for _, q := range *r {
			if q.FailCause != "" {
				fmt.Fprintf(tw, "%#06x failed (%s): %s\n", q.QPN, q.Status, q.FailCause)
			}
		}
	case *[]vproto.EVRow:
		fmt.Fprintln(tw, "EV\tPLANE\tT1\tPATH\tSWITCHES\tSTATE\tACTIVE\tSLOTS\tSENT\tACKED\tECN\tTRIMS\tLOSSES\tTIMEOUTS\tPROBES")
		for _, e := range *r {
			sw := e.Switches
			if sw == "" {
				sw = "-"
			}
			fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%s\t%s\t%v\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\n", e.EV, e.Plane, e.T1, e.Path, sw, e.State, e.Active,
				e.Slots, e.Sent, e.Acked, e.ECN, e.Trims, e.Losses, e.Timeouts, e.Probes)
		}
	case *vproto.Counters:
		fmt.Fprintln(tw, "COUNTER\tVALUE")
		for _, k := range sortedKeys(r.Engine) {
			fmt.Fprintf(tw, "engine.%s\t%d\n", k, r.Engine[k])
		}
		for _, k := range sortedKeys(r.QPs) {
			fmt.Fprintf(tw, "qp.%s\t%d\n", k, r.QPs[k])
		}
		for _, k := range sortedKeys(r.Daemon) {
			fmt.Fprintf(tw, "daemon.%s\t%d\n", k, r.Daemon[k])
		}
		fmt.Fprintf(tw, "regions\t%d\nregion_bytes\t%d\n", r.Regions, r.Bytes)
		for _, p := range r.Ports {
			for _, k := range sortedKeys(p.Stats) {
				fmt.Fprintf(tw, "port.%s.%s\t%d\n", p.Name, k, p.Stats[k])
			}
		}
	case *[]vproto.SessionInfo:
		fmt.Fprintln(tw, "SESSION\tCLIENT\tPID\tUID")
		for _, s := range *r {
			fmt.Fprintf(tw, "%d\t%s\t%d\t%d\n", s.ID, s.Client, s.PID, s.UID)
		}
	case *vproto.CtlResult:
		fmt.Fprintf(tw, "%s %s %s: %s\n", a[0], a[1], a[2], r.Result)
	case *[]pathprobe.Stats:
		fmt.Fprintln(tw, "LOOP\tUSIDS\tSENT\tRECEIVED\tWINDOW LOST\tLOSS\tRTT MIN/AVG/MAX (us)")
		for _, s := range *r {
			us := make([]string, len(s.USIDs))
			for i, u := range s.USIDs {
				us[i] = fmt.Sprintf("%04x", u)
			}
			fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d/%d\t%.1f%%\t%.1f/%.1f/%.1f\n", s.Name(), strings.Join(us, " "), s.Sent, s.Received,
				s.WinLost, s.WinSent, 100*s.Loss, s.RTTMin, s.RTTAvg, s.RTTMax)
		}
	case *[]vproto.DenyRow:
		fmt.Fprintln(tw, "ENTRY\tENGINE RULES")
		for _, d := range *r {
			fmt.Fprintf(tw, "%s\t%d\n", d.Entry, d.Rules)
		}
	}
	return nil
}

// parseNum reads a QPN or EV: hex with 0x, as mrcctl and the tools print them
// (0x0101, 0x0000002a), or decimal. A bare number is never guessed at: "102"
// is decimal, and "ff" is refused, since reading bare numbers as hex only
// when they hold a letter made "102" and "10a" different bases.
func parseNum(s, what string) (uint32, error) {
	if h, ok := strings.CutPrefix(strings.ToLower(s), "0x"); ok {
		v, err := strconv.ParseUint(h, 16, 32)
		if err != nil {
			return 0, fmt.Errorf("%s %q: want a 32-bit hex number after 0x, as printed (0x0101)", what, s)
		}
		return uint32(v), nil
	}
	v, err := strconv.ParseUint(s, 10, 32)
	if err != nil {
		if _, herr := strconv.ParseUint(s, 16, 32); herr == nil {
			return 0, fmt.Errorf("%s %q: hex needs its 0x (0x%s); a bare number is decimal", what, s, s)
		}
		return 0, fmt.Errorf("%s %q: want a number, hex with 0x as printed (0x0101) or decimal (257)", what, s)
	}
	return uint32(v), nil
}

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	for i := 1; i < len(ks); i++ {
		for j := i; j > 0 && ks[j] < ks[j-1]; j-- {
			ks[j], ks[j-1] = ks[j-1], ks[j]
		}
	}
	return ks
}
