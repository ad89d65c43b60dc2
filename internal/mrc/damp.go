package mrc

import (
	"math/bits"

	"github.com/softmrc/softmrc/internal/wire"
)

// flapDamp is the flap damping of one plane as seen by one side: the local
// port (carrier) or a peer's port (its port-status mask). A plane that went
// down once and came back (a single failure, a maintenance bounce) is usable
// again at once; a plane that went down flapMinDowns times in a row, each
// within FlapWindow of the previous down, is held out of use after it comes
// up, for FlapHold doubled per further down, capped at FlapHoldMax. The
// count restarts when a down comes more than FlapWindow after the previous
// one, so the hold decays once the plane stays up.
//
// Why: a port that flaps (S3 of mrc-lab: 100 ms up, 100 ms down) used to be
// used again in every up phase, since losses on a down plane say nothing
// about EVs and the port coming up re-admits every EV of it: the flapping
// planes carried about the duty cycle of their capacity (0.41–0.57), with a
// burst of losses at every down. The seed keeps flappy paths out until they
// prove themselves over time.
type flapDamp struct {
	downs    int  // downs in a row, each within FlapWindow of the previous
	lastDown Time // time of the latest down
	until    Time // held out of use until then (0: not held)
}

// flapMinDowns is the number of downs in a row (within FlapWindow of each
// other) from which an up is held: one down is a failure, not a flap.
const flapMinDowns = 2

// flapDefaults: FlapWindow, FlapHold and FlapHoldMax when zero.
const (
	defaultFlapWindow  = 1 * Second
	defaultFlapHold    = 100 * Millisecond
	defaultFlapHoldMax = 500 * Millisecond
)

func (c *Config) flapWindow() Time {
	if c.FlapWindow > 0 {
		return c.FlapWindow
	}
	return defaultFlapWindow
}

func (c *Config) flapHold() Time {
	if c.FlapHold != 0 {
		return c.FlapHold
	}
	return defaultFlapHold
}

func (c *Config) flapHoldMax() Time {
	if c.FlapHoldMax > 0 {
		return c.FlapHoldMax
	}
	return defaultFlapHoldMax
}

// down records the plane going down at now.
func (d *flapDamp) down(now Time, cfg *Config) {
	if d.downs > 0 && now-d.lastDown > cfg.flapWindow() {
		d.downs = 0
	}
	d.downs++
	d.lastDown = now
}

// up records the plane coming up at now and returns whether it is held.
func (d *flapDamp) up(now Time, cfg *Config) bool { return d.upHold(now, cfg, cfg.flapHold()) }

// upHold is up with hold as the first hold (doubled per further down).
func (d *flapDamp) upHold(now Time, cfg *Config, hold Time) bool {
	if hold < 0 || d.downs < flapMinDowns || now-d.lastDown > cfg.flapWindow() {
		return false
	}
	maxHold := cfg.flapHoldMax()
	for i := flapMinDowns; i < d.downs && hold < maxHold; i++ {
		hold *= 2
	}
	hold = min(hold, maxHold)
	d.until = max(d.until, now+hold)
	return true
}

// holding reports whether the plane is held out of use at now.
func (d *flapDamp) holding(now Time) bool { return now < d.until }

// nextRelease is the earliest end of a hold of ds after now (Never: none).
func nextRelease(ds *[wire.MaxPlanes]flapDamp, now Time) Time {
	t := Never
	for p := range ds {
		if u := ds[p].until; u > now && u < t {
			t = u
		}
	}
	return t
}

// dampMask applies damping to a port mask change from old to cur at now:
// each plane that went down counts a down, each that came up may be held.
// It returns the number of planes held.
func dampMask(ds *[wire.MaxPlanes]flapDamp, old, cur uint32, now Time, cfg *Config) (held uint64) {
	for p := 0; p < cfg.Planes; p++ {
		bit := uint32(1) << p
		switch {
		case old&bit != 0 && cur&bit == 0:
			ds[p].down(now, cfg)
		case old&bit == 0 && cur&bit != 0:
			if ds[p].up(now, cfg) {
				held++
			}
		}
	}
	return held
}

// Path damping: the same counting (flapDamp) applied to a path toward a
// peer, an EV group (plane and T1), on outages seen through the EVs
// themselves: the group condemned (pathFailedAt: groupFails EVs lost
// packets with nothing through it acknowledged after) and then probed
// back. An outage counts only when at least pathMinLost of the group's
// probes were lost while it was condemned and it lasted pathMinOutageRTTs
// (the path was dead for a while, not hit by a random loss or a stall).
// The count is shared by the peer's QPs (sharedDamp). From the second
// counted outage within FlapWindow the group is held when it answers
// again, for pathHoldBase doubled per further outage up to FlapHoldMax
// (flapDamp.upHold); once the path is known to flap, a QP holds its group
// at the first EV failure (pathKnownFlapping). While held its EVs stay
// ASSUMED_BAD and it is probed as one path (heldProbeGap); a lost probe is
// a new outage (the hold is extended at the next answer), and the group is
// released (its EVs probed back one by one) only on an answer to a probe
// sent after the hold ended (releasePaths). A hold never takes a QP's
// last usable path (pathAnswered, pathKnownFlapping, releasePaths).
//
// Why: mrc-switchd's flap (mrc-lab S3, S11) drops frames in the data
// plane and leaves the carrier up, so port damping never saw it, and each
// up phase re-admitted the group on its first answered probe: the flapping
// planes carried about the 100/100 ms duty cycle of their rate (0.41–0.57)
// and the total came out at 0.58–0.75 of full instead of 0.50. Why lost
// probes and not condemnations alone: under random loss groups are
// condemned too, and damping every condemnation cut the fabric
// simulator's 5 % random-loss goodput below its bar (docs/engine.md); a
// condemned group whose probes are lost is rarer there, and an outage of
// 8 srtt rarer still (the 5 % scenario's goodput is unchanged).
const pathMinLost = 1

// pathMinOutageRTTs is the shortest outage that counts, in smoothed RTTs,
// from the condemnation to the sending of the first probe answered. Why:
// on a loaded machine a stall of mrc-nicd (or of the peer) condemns every
// group it had packets in flight on and times their probes out, and an
// outage right after it ends within an RTT or two; counting those held
// steady paths (mrc-lab S3: groups of the two steady planes held at load
// 15). A flap's down phase (100 ms in S3, srtt 0.3–1.5 ms) is far longer;
// under random loss (probes every srtt, a lost one retried after 3·srtt)
// a condemned group answers well within it. At most FlapHold/2: srtt
// itself grows tenfold in a stall (20 ms seen in S3 at load 12). A held
// path (known to flap) counts every outage: one missed there let the hold
// end and the path back in between two down phases.
const pathMinOutageRTTs = 8

// pathAnswered is called when a probe pr of group gi is answered, before
// the group's condemnation is cleared: it ends an outage, counts it and
// may hold the group.
func (q *qp) pathAnswered(gi int32, pr *probeRec) {
	g := &q.grps[gi]
	g.okSent = max(g.okSent, pr.sentAt)
	g.missed = 0
	if g.held && !g.dead && pr.sentAt >= g.until {
		q.nextProbeScan = q.e.now // the hold is over and the path answers: release (releasePaths)
	}
	if !g.dead {
		return
	}
	lost := g.lost
	// Probes of the group sent before pr (and after it was condemned) and
	// not answered yet were lost: their timeouts, later, are stale.
	for i := range q.activeProbes() {
		o := &q.probes[i]
		if o != pr && o.used && o.ev >= 0 && q.evs[o.ev].grp == gi && o.sentAt < pr.sentAt && o.sentAt >= g.deadAt {
			lost++
		}
	}
	if lost < pathMinLost || !g.held && pr.sentAt-g.deadAt < min(pathMinOutageRTTs*q.srtt, q.e.cfg.flapHold()/2) {
		return
	}
	if q.peer == nil {
		return
	}
	sd := q.peer.pathDampOf(g.plane, g.t1)
	pf := &q.peer.planeFlap[g.plane]
	pathHeld := sd.outage(g.deadAt, q.e.now, &q.e.cfg)
	planeHeld := pf.outage(g.t1, g.deadAt, q.e.now, &q.e.cfg)
	if !pathHeld && !planeHeld {
		return // not flapping
	}
	g.until = max(g.until, q.flapUntil(g))
	if g.held {
		return // held already: the hold now ends later
	}
	if !q.otherPathUsable(gi) {
		return // the QP's last path: never held
	}
	q.holdPath(gi, g.until)
}

// holdPath holds group gi (its EVs ASSUMED_BAD already) until until.
func (q *qp) holdPath(gi int32, until Time) {
	g := &q.grps[gi]
	g.until = max(g.until, until)
	if g.held {
		return
	}
	g.held = true
	q.nPathHeld++
	q.stats.PathFlapHolds++
	q.nextProbeScan = min(q.nextProbeScan, g.until)
}

// pathKnownFlapping reports whether group gi's path is held as flapping
// by the peer's shared count (another QP, or this one, saw it flap) and
// may be held here: an EV of it just failed, and the QP has another
// usable path. Then the whole group is held at once (pathFailedAt), not
// after this QP has seen it flap twice itself: in mrc-lab S3 QPs sending
// a few packets per path and down phase often lost packets on one EV of
// a group only (no condemnation, no counted outage) and probed it back
// in the next up phase.
func (q *qp) pathKnownFlapping(gi int32) bool {
	g := &q.grps[gi]
	if g.held || q.peer == nil {
		return false
	}
	sd := q.peer.pathDamp[pathKey(g.plane, g.t1)] // nil map: nil
	flapping := sd != nil && sd.holding(q.e.now) || q.peer.planeFlap[g.plane].holding(q.e.now)
	return flapping && q.otherPathUsable(gi)
}

// flapUntil is the end of the hold that the shared counts (the path's,
// and its plane's first hops') put on group g's path.
func (q *qp) flapUntil(g *evGroup) Time {
	until := q.peer.planeFlap[g.plane].until
	if sd := q.peer.pathDamp[pathKey(g.plane, g.t1)]; sd != nil {
		until = max(until, sd.until)
	}
	return until
}

// planeFlap is the outage count of a plane's first hops toward a peer (the
// NIC–T0 links at either end, the T0s): an outage counts when paths
// through two or more T1s of the plane report one in the same down phase
// (phaseT1 collects their T1s; phaseEnd is the latest end reported, and
// an outage that began after it opens a new phase). From the second such
// outage within FlapWindow every path of the plane is known to flap, and a
// QP holds each at its first EV failure (pathKnownFlapping), as it does a
// path that flapped twice itself.
//
// Why: a flapping NIC–T0 link takes every path of its plane down, but each
// path (plane, T1) counted its own outages, and one is counted only where a
// QP's group through it was condemned and probed back: in mrc-lab S3 (4 QPs,
// 4 T1s per plane, a few packets per path and 100 ms down phase) the
// plane's paths were held one by one 0.2–1 s after the flapping began, and
// the flapping planes carried 0.17–0.22 of the full rate (0.67–0.72 in all,
// want 0.5) in the first half second of the claim's window. Two T1s: a
// T0–T1 link or a T1 that flaps takes down the paths through one T1 only,
// and holding its whole plane for it would cost P times more.
type planeFlap struct {
	flapDamp
	phaseT1  uint64
	phaseEnd Time
	counted  bool
}

// planeFlapT1s is how many T1s' paths of a plane must report an outage in
// one down phase for it to count as the plane's.
const planeFlapT1s = 2

// outage records an outage of the path through T1 t1 from deadAt to now,
// as one QP saw it, and reports whether the plane is to be held.
func (d *planeFlap) outage(t1 uint8, deadAt, now Time, cfg *Config) bool {
	if deadAt >= d.phaseEnd {
		d.phaseT1, d.counted = 0, false // a new down phase
	}
	d.phaseT1 |= 1 << (t1 % 64)
	d.phaseEnd = max(d.phaseEnd, now)
	if d.counted || bits.OnesCount64(d.phaseT1) < planeFlapT1s {
		return d.holding(now)
	}
	d.counted = true
	d.down(deadAt, cfg)
	return d.upHold(now, cfg, pathHoldBase(cfg))
}

func pathKey(plane wire.Plane, t1 uint8) uint16 { return uint16(plane)<<8 | uint16(t1) }

// sharedDamp is the outage count of one path toward a peer, shared by the
// peer's QPs: a flap seen by one QP counts for all, so that each QP holds
// the path from its own first outage once the path has flapped (4 QPs to
// one peer in mrc-lab S3 took up to 2.5 s to hold every flapping path
// each on its own count, the QPs sending only a few packets per path
// per down phase). lastUp is the end of the latest outage counted: an
// outage that began before it is one another QP already counted.
type sharedDamp struct {
	flapDamp
	lastUp Time
}

// outage records an outage of the path from deadAt to now, as one QP saw
// it, and reports whether the path is to be held (until d.until).
func (d *sharedDamp) outage(deadAt, now Time, cfg *Config) bool {
	if deadAt >= d.lastUp {
		d.down(deadAt, cfg) // a new outage, not one another QP saw end already
	}
	d.lastUp = max(d.lastUp, now)
	return d.upHold(now, cfg, pathHoldBase(cfg))
}

// pathDampOf is the shared damping of path (plane, t1) toward p.
func (p *peer) pathDampOf(plane wire.Plane, t1 uint8) *sharedDamp {
	k := pathKey(plane, t1)
	if d := p.pathDamp[k]; d != nil {
		return d
	}
	if p.pathDamp == nil {
		p.pathDamp = map[uint16]*sharedDamp{}
	}
	d := &sharedDamp{}
	p.pathDamp[k] = d
	return d
}

// pathProbeLost is called when a probe pr of group gi timed out.
func (q *qp) pathProbeLost(gi int32, pr *probeRec) {
	g := &q.grps[gi]
	switch {
	case pr.sentAt < g.okSent:
		// A later probe was answered: this one says nothing new.
	case g.dead:
		if pr.sentAt >= g.deadAt {
			g.lost++
		}
	case g.held:
		// heldDownMisses lost in a row: the held path went down again, a
		// new outage from the first of them. A held group's probe waits
		// half the gap for its answer (probeBad), not 3·srtt: on a loaded
		// machine answers later than that were taken as losses and kept
		// paths that worked held after the flapping stopped.
		if g.missed == 0 {
			g.missAt = pr.sentAt
		}
		g.missed++
		if g.missed >= heldDownMisses {
			g.dead, g.deadAt, g.probeMiss, g.lost, g.missed = true, g.missAt, 0, g.missed, 0
		}
	}
}

// releasePaths releases the held groups whose hold is over and that
// answer (not condemned), and every held group that answers when the QP
// has no usable EV left; it returns the next end of a hold (Never: none).
func (q *qp) releasePaths(now Time) Time {
	stuck := !q.anyUsableEV()
	next := Never
	for gi := range q.grps {
		g := &q.grps[gi]
		if !g.held {
			continue
		}
		if !g.dead && (stuck || now >= g.until) {
			if !stuck && g.okSent < g.until {
				// Released only on an answer to a probe sent after the
				// hold ended: in mrc-lab S3 a hold ended as the next down
				// phase began, on the strength of an answer from before,
				// and the path was let back in. Probe it now.
				if !q.groupProbeOut(int32(gi)) {
					g.probeAt = now
				}
				next = min(next, now+q.probeInterval())
				continue
			}
			g.held = false
			q.nPathHeld--
			for j := range q.evs {
				if y := &q.evs[j]; y.grp == int32(gi) && y.state == EVAssumedBad {
					y.nextProbe = now
				}
			}
			continue
		}
		if g.until > now {
			next = min(next, g.until)
		}
	}
	return next
}

// heldProbesPerHold is how many probes a held group gets per first hold
// (pathHoldBase, 2·FlapHold; heldProbeGap), whether it answers or not:
// three, so that a down phase as long as FlapHold loses at least one
// (heldDownMisses). Why not one per probe
// interval, as a condemned group: a held path answers, so nothing
// stretches the gap, and on the testbed (mrc-lab S3: srtt 0.1–1 ms, 4 QPs
// with 4 held groups each per flapping plane) that was thousands of
// probes per second per plane: 3.3 Mbit/s of the flapping 12.5 Mbit/s
// links at FlapHold/16, and at one per probe interval enough to fill them,
// be lost in their queues and keep the groups held after the flapping
// stopped. At 2·FlapHold/3 it is 15 probes per second per group, and
// in S3 the held planes still received 0.4–0.5 Mbit/s (3–4 % of their
// rate) of probes and answers: more would break S3's 5 % claim.
const heldProbesPerHold = 3

// heldDownMisses is the number of a held group's probes lost in a row
// that count as the path going down again (pathProbeLost). One: with two
// probes per FlapHold a down phase as long as FlapHold loses only two, and
// in mrc-lab S3 requiring both let about half of the down phases through
// unseen, releasing held paths in the middle of the flapping.
const heldDownMisses = 1

// heldProbeGap is the time between probes of a held group that answers.
func (q *qp) heldProbeGap(iv Time) Time {
	return max(iv, pathHoldBase(&q.e.cfg)/heldProbesPerHold)
}

// pathHoldBase is a path's first hold: twice FlapHold, since a path's
// outage is seen later than a port's (losses, then a probe timeout) and a
// hold as long as the down phase of the flap ended with the next one.
func pathHoldBase(cfg *Config) Time { return 2 * cfg.flapHold() }

// groupProbeOut reports whether a probe of group gi is outstanding.
func (q *qp) groupProbeOut(gi int32) bool {
	for i := range q.activeProbes() {
		if pr := &q.probes[i]; pr.used && pr.ev >= 0 && q.evs[pr.ev].grp == gi {
			return true
		}
	}
	return false
}

// otherPathUsable reports whether the QP has a usable EV (GOOD or SKIP, on
// a usable plane) outside group gi.
func (q *qp) otherPathUsable(gi int32) bool {
	for _, idx := range q.order {
		x := &q.evs[idx]
		if x.grp != gi && (x.state == EVGood || x.state == EVSkip) && q.planeOK(x.plane) {
			return true
		}
	}
	return false
}
