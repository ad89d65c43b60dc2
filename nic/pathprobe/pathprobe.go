// Package pathprobe is the path-probe agent's bookkeeping and the
// mapper's fault localisation, both pure (the caller's clock, no I/O):
// mrc-nicd sends one OAM loop probe (nic/oam) per target every interval
// through its AF_XDP ports and reports what came back; Stats summarise a
// sliding window per target; Localise turns every host's stats into the
// link map with the seed's rule (compare the probes to a T0 with the
// probes through that T0 to a T1, from several hosts).
package pathprobe

import (
	"fmt"
	"sort"
	"time"
)

// Target is one loop a host probes: to its T0 and back (T1 < 0), or
// through its T0 to T1 index T1 and back.
type Target struct {
	Host  string   `json:"host"`
	Plane int      `json:"plane"`
	T0    string   `json:"t0"` // switch name, e.g. p0-t0-0
	T1    int      `json:"t1"` // T1 index, -1 for the T0 loop
	T1Sw  string   `json:"t1_switch,omitempty"`
	USIDs []uint16 `json:"usids"`
}

// Name is the target's short name: p0/t0 or p0/t1-1.
func (t Target) Name() string {
	if t.T1 < 0 {
		return fmt.Sprintf("p%d/t0", t.Plane)
	}
	return fmt.Sprintf("p%d/t1-%d", t.Plane, t.T1)
}

// Window is how many of the latest probes of a target Stats cover: the
// loss, the RTTs and a dead link are judged on it.
const Window = 64

// LongWindow is the longer window (4 Windows) that keeps a lossy loop
// lossy. At a few % loss a Window of 64 holds a single loss (1.6 %, under
// LossyAt) often: at 5 % one time in six. Judged on it alone, a lossy
// link flickered back to good between maps, and 4 such links at once (or
// a lossy switch, whose every loop must be bad together) showed together
// only after up to 2 s even on an idle machine (TestDetectionRounds). A
// loop is lossy when its short window is at LossyAt, or when the long one
// is and the short one still holds a loss: the short window names a fault
// fast, the long one bridges the moments its single loss reads 1.6 % (at
// 5 % the long window holds ≤ 5 of 256 lost one time in 60). A repaired
// link is good again once its short window is clean (64 rounds), as
// before: a long window alone would keep it lossy for 256 rounds, which
// a starved VM stretched past 5 s.
const LongWindow = 4 * Window

type sample struct {
	seq  uint32
	sent time.Duration
	rtt  time.Duration // < 0: not (yet) answered
}

// Prober keeps the probes of a set of targets.
type Prober struct {
	Targets  []Target
	Interval time.Duration
	Timeout  time.Duration // a probe unanswered this long counts as lost
	next     time.Duration
	seq      uint32
	win      [][]sample // per target, ring of Window
	sent     []uint64
	recv     []uint64
}

// New makes a prober of targets, one probe per target per interval.
func New(targets []Target, interval, timeout time.Duration) *Prober {
	p := &Prober{Targets: targets, Interval: interval, Timeout: timeout,
		win: make([][]sample, len(targets)), sent: make([]uint64, len(targets)), recv: make([]uint64, len(targets))}
	return p
}

// Probe is one probe to send: target index and sequence number.
type Probe struct {
	Target int
	Seq    uint32
}

// Due returns the probes to send at now (one per target when the interval
// has passed; none otherwise) and records them as sent.
func (p *Prober) Due(now time.Duration, dst []Probe) []Probe {
	if now < p.next {
		return dst
	}
	p.next = now + p.Interval
	for i := range p.Targets {
		p.seq++
		w := append(p.win[i], sample{seq: p.seq, sent: now, rtt: -1})
		if len(w) > LongWindow {
			w = w[len(w)-LongWindow:]
		}
		p.win[i] = w
		p.sent[i]++
		dst = append(dst, Probe{Target: i, Seq: p.seq})
	}
	return dst
}

// Next is when the next probes are due.
func (p *Prober) Next() time.Duration { return p.next }

// Received records the answer of probe seq to target i at now.
func (p *Prober) Received(i int, seq uint32, now time.Duration) {
	if i < 0 || i >= len(p.win) {
		return
	}
	for k := len(p.win[i]) - 1; k >= 0; k-- { // answers come back in order: the newest first
		s := &p.win[i][k]
		if s.seq == seq && s.rtt < 0 {
			s.rtt = now - s.sent
			p.recv[i]++
			return
		}
	}
}

// Stats is one target's summary over the window.
type Stats struct {
	Target
	Sent, Received uint64  // since start
	WinSent        int     `json:"win_sent"` // probes in the window old enough to judge
	WinLost        int     `json:"win_lost"`
	Loss           float64 `json:"loss"`      // WinLost / WinSent
	LongSent       int     `json:"long_sent"` // the same over LongWindow
	LongLost       int     `json:"long_lost"`
	LongLoss       float64 `json:"long_loss"`
	RTTMin         float64 `json:"rtt_min_us"`
	RTTAvg         float64 `json:"rtt_avg_us"`
	RTTMax         float64 `json:"rtt_max_us"`
}

// Stats summarises every target at now: probes younger than Timeout and
// unanswered are not judged yet.
func (p *Prober) Stats(now time.Duration) []Stats {
	out := make([]Stats, len(p.Targets))
	for i, t := range p.Targets {
		s := Stats{Target: t, Sent: p.sent[i], Received: p.recv[i]}
		var sum time.Duration
		n := 0
		w := p.win[i]
		for k, x := range w {
			if x.rtt < 0 && now-x.sent < p.Timeout {
				continue
			}
			s.LongSent++
			if x.rtt < 0 {
				s.LongLost++
			}
			if k < len(w)-Window {
				continue
			}
			s.WinSent++
			if x.rtt < 0 {
				s.WinLost++
				continue
			}
			us := float64(x.rtt) / 1e3
			if n == 0 || us < s.RTTMin {
				s.RTTMin = us
			}
			s.RTTMax = max(s.RTTMax, us)
			sum += x.rtt
			n++
		}
		if s.WinSent > 0 {
			s.Loss = float64(s.WinLost) / float64(s.WinSent)
		}
		if s.LongSent > 0 {
			s.LongLoss = float64(s.LongLost) / float64(s.LongSent)
		}
		if n > 0 {
			s.RTTAvg = float64(sum) / float64(n) / 1e3
		}
		out[i] = s
	}
	return out
}

// Link states.
const (
	Good  = "good"
	Lossy = "lossy"
	Dead  = "dead"
)

// Thresholds of Localise: a window losing at least LossyAt of its probes
// is lossy, at least DeadAt dead; fewer than MinJudged judged probes say
// nothing yet.
const (
	LossyAt   = 0.02
	DeadAt    = 0.9
	MinJudged = 8
)

// judge is the state of a loop (or a pool of loops) from its short and
// long windows' losses, and the loss to report: dead on the short window
// alone; lossy when the short window is at LossyAt, or the long one is
// and the short one is not clean (see LongWindow).
func judge(short, long float64) (string, float64) {
	switch {
	case short >= DeadAt:
		return Dead, short
	case short >= LossyAt:
		return Lossy, short
	case short > 0 && long >= LossyAt:
		return Lossy, long
	}
	return Good, short
}

func (s Stats) state() (string, float64) { return judge(s.Loss, s.LongLoss) }

// Link is one row of the link map.
type Link struct {
	Name     string  `json:"name"`
	Kind     string  `json:"kind"` // nic-t0, t0-t1, or switch
	State    string  `json:"state"`
	Loss     float64 `json:"loss"`
	Evidence string  `json:"evidence"`
}

// Localise builds the link map from every host's stats with the seed's
// rule: a host's T0 loop bad → its NIC–T0 link (every host of that T0 bad
// → the T0 itself); T0 loop fine and the loop through T1 j bad → the link
// T0–T1 j, judged on the pooled windows of the hosts under that T0, most
// of which must see some loss (every T0 of the plane bad through T1 j →
// the T1 itself). Links with no bad evidence are
// good. Rows are sorted, bad first.
func Localise(all []Stats) []Link {
	type key struct {
		plane int
		t0    string
	}
	t0Loop := map[key]map[string]Stats{} // host → its T0 loop
	t1Loop := map[key]map[int][]Stats{}  // T1 index → the hosts' loops through it
	t1Name := map[int]map[int]string{}   // plane → T1 index → switch name
	for _, s := range all {
		if s.WinSent < MinJudged {
			continue
		}
		k := key{s.Plane, s.T0}
		if s.T1 < 0 {
			if t0Loop[k] == nil {
				t0Loop[k] = map[string]Stats{}
			}
			t0Loop[k][s.Host] = s
			continue
		}
		if t1Loop[k] == nil {
			t1Loop[k] = map[int][]Stats{}
		}
		t1Loop[k][s.T1] = append(t1Loop[k][s.T1], s)
		if t1Name[s.Plane] == nil {
			t1Name[s.Plane] = map[int]string{}
		}
		t1Name[s.Plane][s.T1] = s.T1Sw
	}
	var out []Link
	badT0 := map[key]bool{}
	for k, hosts := range t0Loop {
		nBad, worst, allDead := 0, 0.0, true
		for h, s := range hosts {
			st, loss := s.state()
			if st == Good {
				out = append(out, Link{Name: h + "--" + k.t0, Kind: "nic-t0", State: Good, Loss: loss,
					Evidence: fmt.Sprintf("%s loop to %s: %d/%d lost", h, k.t0, s.WinLost, s.WinSent)})
				continue
			}
			nBad++
			worst = max(worst, loss)
			allDead = allDead && st == Dead
		}
		if nBad == len(hosts) && len(hosts) > 1 {
			badT0[k] = true
			st := Lossy
			if allDead {
				st = Dead
			}
			out = append(out, Link{Name: k.t0, Kind: "switch", State: st, Loss: worst,
				Evidence: fmt.Sprintf("the T0 loops of all %d hosts under it lose probes", len(hosts))})
			continue
		}
		for h, s := range hosts {
			if st, loss := s.state(); st != Good {
				out = append(out, Link{Name: h + "--" + k.t0, Kind: "nic-t0", State: st, Loss: loss,
					Evidence: fmt.Sprintf("%s loop to %s: %d/%d lost (%d/%d over the long window); other hosts of %s fine",
						h, k.t0, s.WinLost, s.WinSent, s.LongLost, s.LongSent, k.t0)})
			}
		}
	}
	// T0–T1 links: judged by the hosts whose T0 loop is good.
	type linkKey struct {
		plane int
		t0    string
		t1    int
	}
	type verdict struct {
		state string
		loss  float64
	}
	linkLoss := map[linkKey]verdict{} // bad links only
	var linkKeys []linkKey
	for k, byT1 := range t1Loop {
		if badT0[k] {
			continue
		}
		for j, ss := range byT1 {
			nOK, nSome, lost, sent, longLost, longSent := 0, 0, 0, 0, 0, 0
			for _, s := range ss {
				if l, ok := t0Loop[k][s.Host]; ok {
					if st, _ := l.state(); st != Good {
						continue // its own NIC–T0 link explains it
					}
				}
				nOK++
				lost += s.WinLost
				sent += s.WinSent
				longLost += s.LongLost
				longSent += s.LongSent
				if s.LongLost > 0 {
					nSome++
				}
			}
			if nOK == 0 {
				continue
			}
			lk := linkKey{k.plane, k.t0, j}
			linkKeys = append(linkKeys, lk)
			// The hosts' windows are pooled: at a few % loss one
			// host's 64 probes often hold a single loss, under
			// LossyAt, so judging each host alone misses the link (or
			// half of a lossy T1). Most hosts must still see some
			// loss: one host's bad loop alone is its own problem.
			pooled, pooledLong := float64(lost)/float64(sent), 0.0
			if longSent > 0 {
				pooledLong = float64(longLost) / float64(longSent)
			}
			if st, loss := judge(pooled, pooledLong); st != Good && nSome*2 > nOK {
				linkLoss[lk] = verdict{st, loss}
			}
		}
	}
	// A T1 whose links from every T0 of the plane are bad is the switch.
	t0sPerT1 := map[[2]int][]linkKey{}
	for _, lk := range linkKeys {
		t0sPerT1[[2]int{lk.plane, lk.t1}] = append(t0sPerT1[[2]int{lk.plane, lk.t1}], lk)
	}
	for pj, lks := range t0sPerT1 {
		nBad, worst, allDead := 0, 0.0, true
		for _, lk := range lks {
			if v, ok := linkLoss[lk]; ok {
				nBad++
				worst = max(worst, v.loss)
				allDead = allDead && v.state == Dead
			}
		}
		name := t1Name[pj[0]][pj[1]]
		if nBad == len(lks) && len(lks) > 1 {
			st := Lossy
			if allDead {
				st = Dead
			}
			out = append(out, Link{Name: name, Kind: "switch", State: st, Loss: worst,
				Evidence: fmt.Sprintf("the loops through it from all %d T0s lose probes, their T0 loops do not", len(lks))})
			continue
		}
		for _, lk := range lks {
			l := Link{Name: lk.t0 + "--" + name, Kind: "t0-t1", State: Good}
			if v, ok := linkLoss[lk]; ok {
				l.State, l.Loss = v.state, v.loss
				l.Evidence = fmt.Sprintf("loops through %s to %s lose probes, loops to %s do not", lk.t0, name, lk.t0)
			}
			out = append(out, l)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if (out[i].State == Good) != (out[j].State == Good) {
			return out[i].State != Good
		}
		return out[i].Name < out[j].Name
	})
	return out
}
