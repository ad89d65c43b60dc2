package perf

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"time"

	"github.com/softmrc/softmrc/nic/verbs"
)

// protoVersion is exchanged first, like perftest's version string.
// Version 2: the key carries the QP's MTU, window and WriteImm cap.
// Version 3: a round's DONE is an object with the client's own BW
// measurement (the server prints the table too, as perftest's does).
const protoVersion = "MRCPERF 3"

// oobTimeout bounds every out-of-band read: a peer that vanishes fails the
// test rather than hanging it.
const oobTimeout = 60 * time.Second

// oob is the out-of-band TCP connection: one text line per message.
type oob struct {
	c net.Conn
	r *bufio.Reader
}

func newOOB(c net.Conn) *oob { return &oob{c: c, r: bufio.NewReader(c)} }

func (o *oob) send(format string, a ...any) error {
	_ = o.c.SetWriteDeadline(time.Now().Add(oobTimeout))
	if _, err := fmt.Fprintf(o.c, format+"\n", a...); err != nil {
		return fmt.Errorf("out-of-band send: %w", err)
	}
	return nil
}

func (o *oob) recv() (string, error) {
	return o.recvWithin(oobTimeout)
}

func (o *oob) recvWithin(d time.Duration) (string, error) {
	_ = o.c.SetReadDeadline(time.Now().Add(d))
	line, err := o.r.ReadString('\n')
	if err != nil {
		return "", fmt.Errorf("out-of-band receive: %w (did the peer exit?)", err)
	}
	return strings.TrimSuffix(line, "\n"), nil
}

func (o *oob) sendJSON(tag string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return o.send("%s %s", tag, b)
}

func (o *oob) recvJSON(tag string, v any) error { return o.recvJSONWithin(tag, v, oobTimeout) }

func (o *oob) recvJSONWithin(tag string, v any, d time.Duration) error {
	line, err := o.recvWithin(d)
	if err != nil {
		return err
	}
	return parseJSONLine(line, tag, v)
}

// roundEnd is the client's DONE: what it completed per QP and, in a BW
// round, its own measurement.
type roundEnd struct {
	Iters []uint64  `json:"iters"`
	Send  *sendStat `json:"send,omitempty"`
}

// recvRoundEnd reads the client's end of a round: DONE into done, or
// ABORT (the client failed during the round, not only between rounds),
// whose reason it returns with aborted set.
func (o *oob) recvRoundEnd(done *roundEnd, d time.Duration) (why string, aborted bool, err error) {
	line, err := o.recvWithin(d)
	if err != nil {
		return "", false, err
	}
	if why, ok := strings.CutPrefix(line, "ABORT"); ok {
		return why, true, nil
	}
	return "", false, parseJSONLine(line, "DONE", done)
}

// parseJSONLine parses "TAG {json}" into v.
func parseJSONLine(line, tag string, v any) error {
	rest, ok := strings.CutPrefix(line, tag+" ")
	if !ok {
		return fmt.Errorf("out-of-band: expected %s, got %q", tag, trunc(line))
	}
	if err := json.Unmarshal([]byte(rest), v); err != nil {
		return fmt.Errorf("out-of-band %s: %w", tag, err)
	}
	return nil
}

// expect reads a line and checks it equals want.
func (o *oob) expect(want string) error {
	line, err := o.recv()
	if err != nil {
		return err
	}
	if line != want {
		return fmt.Errorf("out-of-band: expected %q, got %q", want, trunc(line))
	}
	return nil
}

func trunc(s string) string {
	if len(s) > 80 {
		return s[:80] + "..."
	}
	return s
}

// key is one QP's connection data, perftest's KEY_PRINT_FMT
// (LID:OUT_READS:QPN:PSN:RKEY:VADDR:SRQN), then the QP's MTU, receive
// window and Write-with-Immediate cap (MTU:WINDOW:MAXWIMM, which the
// peer's Connect needs), then the NIC's address in every plane, comma
// separated.
type key struct {
	QPN     uint32
	PSN     uint32
	RKey    uint32
	VAddr   uint64
	MTU     int
	Window  int
	MaxWImm int
	Addrs   []netip.Addr
}

func (k key) String() string {
	as := make([]string, len(k.Addrs))
	for i, a := range k.Addrs {
		as[i] = a.String()
	}
	return fmt.Sprintf("%04x:%04x:%06x:%06x:%08x:%016x:%08x:%04x:%04x:%04x:%s", 0, 0, k.QPN, k.PSN, k.RKey, k.VAddr, 0,
		k.MTU, k.Window, k.MaxWImm, strings.Join(as, ","))
}

// remote is what the QP's Connect takes from the peer's key.
func (k key) remote() verbs.Remote {
	return verbs.Remote{RemoteQPN: k.QPN, RemotePSN: k.PSN, RemoteAddrs: k.Addrs, RemoteMTU: k.MTU,
		RemoteWindow: k.Window, RemoteMaxWImm: k.MaxWImm}
}

func parseKey(s string) (key, error) {
	var k key
	var lid, reads, srqn uint32
	const fields = 11
	f := strings.SplitN(s, ":", fields)
	if len(f) != fields {
		return k, fmt.Errorf("out-of-band key %q: want %d colon-separated fields (is the peer an older mrc-write-bw?)", trunc(s), fields)
	}
	if _, err := fmt.Sscanf(strings.Join(f[:fields-1], " "), "%x %x %x %x %x %x %x %x %x %x", &lid, &reads, &k.QPN, &k.PSN, &k.RKey, &k.VAddr, &srqn,
		&k.MTU, &k.Window, &k.MaxWImm); err != nil {
		return k, fmt.Errorf("out-of-band key %q: %w", trunc(s), err)
	}
	for _, a := range strings.Split(f[fields-1], ",") {
		ad, err := netip.ParseAddr(a)
		if err != nil {
			return k, fmt.Errorf("out-of-band key: address %q: %w", a, err)
		}
		k.Addrs = append(k.Addrs, ad)
	}
	return k, nil
}
