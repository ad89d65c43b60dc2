package daemon

import (
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/softmrc/softmrc/internal/mrc"
	"github.com/softmrc/softmrc/internal/wire"
	"github.com/softmrc/softmrc/nic/oam"
	"github.com/softmrc/softmrc/nic/vproto"
)

// uSID OAM in mrc-nicd: probes along one exact path, sent through the
// AF_XDP ports and timestamped by the run loop's clock at queueing and at
// receipt (nic/oam has the frame; docs/operations.md the tools). OAM
// probes name their path explicitly and do not consult the denylist: they
// are how an operator checks a denied link before allowing it again.

type oamState struct {
	nextID  uint32
	pending map[uint32]chan oamAnswer
	// Counters (metrics.go exports them by their tags).
	sent      uint64 `metric:"oam_sent" help:"uSID OAM probes sent."`
	answered  uint64 `metric:"oam_answered" help:"uSID OAM probes answered."`
	echoed    uint64 `metric:"oam_echoed" help:"uSID OAM probes of other hosts echoed."`
	reflected uint64 `metric:"oam_reflected" help:"Reflect probes of other hosts sent back."`
	unknown   uint64 `metric:"oam_unknown" help:"OAM answers matching no probe in flight (late or not ours)."`
	bad       uint64 `metric:"oam_bad" help:"Malformed OAM frames."`
	pathSent  uint64 `metric:"path_probes_sent" help:"Path probes sent (path_probes)."`
	pathRecv  uint64 `metric:"path_probes_received" help:"Path probes received."`
}

type oamAnswer struct {
	rtt  mrc.Time
	kind oam.Kind
}

// oamTrace resolves req.Peer and req.EV into the hops of the path (loop).
func (d *Daemon) oamTrace(req vproto.CtlRequest) ([]vproto.OAMHop, int, error) {
	if d.tmpl == nil {
		return nil, 0, errors.New("uSID OAM needs srv6 mode and a path template")
	}
	peer, ok := d.tmpl.PeerIndex(req.Peer)
	if !ok {
		if a, err := netip.ParseAddr(req.Peer); err == nil {
			peer, ok = d.tmpl.PeerByAddr(wire.Addr128FromNetip(a))
		}
	}
	if !ok {
		names := make([]string, len(d.tmpl.Peers))
		for i, p := range d.tmpl.Peers {
			names[i] = p.Name
		}
		return nil, 0, fmt.Errorf("host %q is not in this NIC's path template; it knows %s", req.Peer, strings.Join(names, ", "))
	}
	ev := wire.EV(req.EV)
	pl := int(ev.Plane())
	if pl >= len(d.ports) {
		return nil, 0, fmt.Errorf("EV %v is on plane %d, this NIC has planes 0..%d", ev, pl, len(d.ports)-1)
	}
	if int(ev.T1()) >= d.tmpl.T1Count {
		return nil, 0, fmt.Errorf("EV %v has T1 index %d, the template has 0..%d", ev, ev.T1(), d.tmpl.T1Count-1)
	}
	self, err := d.selfUSID(pl)
	if err != nil {
		return nil, 0, err
	}
	hs, err := oam.Trace(d.tmpl, peer, ev, self)
	if err != nil {
		return nil, 0, err
	}
	var back []wire.USID
	if req.Reflect {
		if req.Back < 0 || req.Back >= d.tmpl.T1Count {
			return nil, 0, fmt.Errorf("return T1 index %d: the template has 0..%d", req.Back, d.tmpl.T1Count-1)
		}
		last := &hs[len(hs)-1]
		if last.Via, back, err = oam.RoundTrip(d.tmpl, peer, ev, uint8(req.Back), self); err != nil {
			return nil, 0, err
		}
		last.Kind = oam.Reflect
	}
	hex := func(us []wire.USID) []string {
		var s []string
		for _, u := range us {
			s = append(s, fmt.Sprintf("%04x", u))
		}
		return s
	}
	out := make([]vproto.OAMHop, len(hs))
	for i, h := range hs {
		out[i] = vproto.OAMHop{Hop: i + 1, Name: h.Name, USID: fmt.Sprintf("%04x", h.USID), Via: hex(h.Via), Kind: h.Kind.String(),
			Plane: pl, T1: int(ev.T1())}
	}
	if back != nil {
		out[len(out)-1].Back = hex(back)
	}
	return out, peer, nil
}

// selfUSID is this NIC's downlink uSID on plane pl: the uSID after the
// block in its port's locator.
func (d *Daemon) selfUSID(pl int) (wire.USID, error) {
	i := d.byPlane[pl]
	if i < 0 {
		return 0, fmt.Errorf("no port on plane %d", pl)
	}
	loc := d.cfg.Ports[i].Locator
	if !loc.IsValid() {
		return 0, fmt.Errorf("port %s has no locator", d.cfg.Ports[i].PortName())
	}
	return d.tmpl.Format().Active(wire.Addr128FromNetip(loc.Addr())), nil
}

// oamProbe sends one probe (req.Hop: a loop cut at that hop; 0: an echo
// of the peer) and waits for it at most req.TimeoutMS (default 1000).
func (d *Daemon) oamProbe(req vproto.CtlRequest) (any, error) {
	timeout := time.Duration(req.TimeoutMS) * time.Millisecond
	if timeout <= 0 {
		timeout = time.Second
	}
	if timeout > 10*time.Second {
		return nil, fmt.Errorf("oam-probe: timeout %v, at most 10 s", timeout)
	}
	var res vproto.OAMResult
	var ch chan oamAnswer
	var id uint32
	var err error
	if e := d.exec(func() { ch, id, res, err = d.oamSend(req) }); e != nil {
		return nil, e
	}
	if err != nil {
		return nil, err
	}
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case a := <-ch:
		res.OK, res.RTTus = true, float64(a.rtt)/1e3
	case <-t.C:
		_ = d.exec(func() { delete(d.oam.pending, id) })
	}
	return res, nil
}

// oamSend queues the probe on its plane's port (loop goroutine).
func (d *Daemon) oamSend(req vproto.CtlRequest) (chan oamAnswer, uint32, vproto.OAMResult, error) {
	hops, peer, err := d.oamTrace(req)
	if err != nil {
		return nil, 0, vproto.OAMResult{}, err
	}
	if req.Reflect && req.Hop != 0 {
		return nil, 0, vproto.OAMResult{}, errors.New("a reflected probe goes to the peer and back; it has no hop")
	}
	k := req.Hop
	if k == 0 {
		k = len(hops)
	}
	if k < 1 || k > len(hops) {
		return nil, 0, vproto.OAMResult{}, fmt.Errorf("hop %d: the path to %s has hops 1..%d", req.Hop, req.Peer, len(hops))
	}
	h := hops[k-1]
	ev := wire.EV(req.EV)
	pl := int(ev.Plane())
	i := d.byPlane[pl]
	kind := oam.Loop
	switch h.Kind {
	case oam.EchoRequest.String():
		kind = oam.EchoRequest
	case oam.Reflect.String():
		kind = oam.Reflect
	}
	dst, err := d.container(h.Via)
	if err != nil {
		return nil, 0, vproto.OAMResult{}, err
	}
	var ret wire.Addr128
	if kind == oam.Reflect {
		if ret, err = d.container(h.Back); err != nil {
			return nil, 0, vproto.OAMResult{}, err
		}
	}
	if d.oam.pending == nil {
		d.oam.pending = map[uint32]chan oamAnswer{}
	}
	d.oam.nextID = (d.oam.nextID + 1) &^ pathProbeID
	id := d.oam.nextID
	port := d.cfg.Ports[i]
	target := wire.Addr128FromNetip(port.Address)
	if kind == oam.EchoRequest || kind == oam.Reflect {
		if a, err := d.tmpl.PeerAddrs(peer); err == nil {
			target = a[pl]
		}
	}
	buf := d.txq[i].slot()
	if buf == nil {
		return nil, 0, vproto.OAMResult{}, fmt.Errorf("port %s's transmit queue is full; try again", port.PortName())
	}
	n, err := oam.Build(buf, oam.Net{SrcMAC: port.MAC, DstMAC: port.NeighborMAC,
		Src: wire.Addr128FromNetip(port.Address), Dst: dst, Target: target},
		oam.Probe{Kind: kind, ID: id, Seq: uint32(req.QPN), EV: ev, TxTime: int64(d.now()), Return: ret})
	if err != nil {
		return nil, 0, vproto.OAMResult{}, err
	}
	d.txq[i].push(n)
	ch := make(chan oamAnswer, 1)
	d.oam.pending[id] = ch
	d.oam.sent++
	return ch, id, vproto.OAMResult{Hop: h, Target: target.String()}, nil
}

// container builds the uSID container of hex uSIDs (as OAMHop lists them).
func (d *Daemon) container(hex []string) (wire.Addr128, error) {
	usids := make([]wire.USID, len(hex))
	for n, s := range hex {
		v, err := strconv.ParseUint(s, 16, 16)
		if err != nil {
			return wire.Addr128{}, fmt.Errorf("uSID %q: %w", s, err)
		}
		usids[n] = wire.USID(v)
	}
	return d.tmpl.Format().Build(d.tmpl.BlockAddr(), usids...)
}

// handleOAM takes an OAM frame off port i (loop goroutine): a loop or
// echo reply completes its pending probe; an echo request is answered
// along this NIC's own path to the sender (same plane and T1 index).
func (d *Daemon) handleOAM(i int, frame []byte) {
	p, src, err := oam.Parse(frame)
	if err != nil {
		d.oam.bad++
		return
	}
	if p.Kind == oam.Loop && p.ID&pathProbeID != 0 {
		if d.prober != nil {
			d.prober.Received(int(p.ID&^pathProbeID), p.Seq, time.Duration(d.rxNow))
			d.oam.pathRecv++
		}
		return
	}
	switch p.Kind {
	case oam.Loop, oam.EchoReply, oam.Reflected:
		ch, ok := d.oam.pending[p.ID]
		if !ok {
			d.oam.unknown++ // answered after its timeout, or not ours
			return
		}
		delete(d.oam.pending, p.ID)
		d.oam.answered++
		ch <- oamAnswer{rtt: d.rxNow - mrc.Time(p.TxTime), kind: p.Kind}
	case oam.EchoRequest:
		if d.tmpl == nil {
			d.oam.bad++
			return
		}
		peer, ok := d.tmpl.PeerByAddr(src)
		if !ok {
			d.oam.unknown++
			return
		}
		ps, err := d.tmpl.Compile(peer)
		if err != nil {
			d.oam.bad++
			return
		}
		dst, ok := ps.Dst(p.EV)
		if !ok {
			d.oam.bad++
			return
		}
		port := d.cfg.Ports[i]
		p.Kind = oam.EchoReply
		buf := d.txq[i].slot()
		if buf == nil {
			return // the port's queue is full: the echo is lost, as on any busy link
		}
		n, err := oam.Build(buf, oam.Net{SrcMAC: port.MAC, DstMAC: port.NeighborMAC,
			Src: wire.Addr128FromNetip(port.Address), Dst: dst, Target: src}, p)
		if err == nil {
			d.txq[i].push(n)
			d.oam.echoed++
		}
	case oam.Reflect:
		d.reflectOAM(i, p, src)
	}
}

// reflectOAM sends a Reflect probe back to its sender along the return
// container the sender chose, out of the port it came in on (the probe's
// plane), as Reflected: this NIC acts as the turning point of a path
// that its sender names whole. The container must lie in the fabric's
// uSID block, so a probe cannot make this NIC send anywhere else, and a
// probe is reflected once.
func (d *Daemon) reflectOAM(i int, p oam.Probe, src wire.Addr128) {
	if d.tmpl == nil || p.Return.IsZero() || !oam.InBlock(p.Return, d.tmpl.BlockAddr(), d.tmpl.BlockBits) {
		d.oam.bad++
		return
	}
	port := d.cfg.Ports[i]
	dst := p.Return
	p.Kind, p.Return = oam.Reflected, wire.Addr128{}
	buf := d.txq[i].slot()
	if buf == nil {
		return // the port's queue is full: the probe is lost, as on any busy link
	}
	n, err := oam.Build(buf, oam.Net{SrcMAC: port.MAC, DstMAC: port.NeighborMAC, Src: src, Dst: dst, Target: src}, p)
	if err == nil {
		d.txq[i].push(n)
		d.oam.reflected++
	}
}
