// Package series turns sampled cumulative counters into time series on a
// common time grid and computes window statistics on them. It is pure: the
// samples come from telemetry, the times are CLOCK_MONOTONIC nanoseconds
// the caller measured.
package series

import (
	"fmt"
	"io"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/softmrc/softmrc/internal/telemetry"
)

// Sample is one telemetry record (internal/telemetry): the counters of
// one object (a QP, a NIC port, a switch port) of one source at one instant
// of CLOCK_MONOTONIC. Counters are cumulative.
type Sample = telemetry.Sample

// Point is one value of a series at a time relative to the run's zero.
type Point struct {
	T time.Duration
	V float64
}

// Series is a named sequence of points in time order.
type Series struct {
	Name   string
	Unit   string
	Points []Point
}

// Counters keeps every sampled cumulative counter by key ID/value name.
type Counters struct {
	m map[string][]obs
}

type obs struct {
	t int64
	v float64
}

// Key names one counter of one object of a source, e.g.
// Key("p0-t0-1", "d1", "tx_bytes") = "p0-t0-1:d1/tx_bytes".
func Key(source, id, value string) string { return source + ":" + id + "/" + value }

// Add records a sample. Samples of one object must arrive in time order.
func (c *Counters) Add(s Sample) {
	if c.m == nil {
		c.m = map[string][]obs{}
	}
	for k, v := range s.Values {
		key := Key(s.Source, s.ID, k)
		c.m[key] = append(c.m[key], obs{s.T, v})
	}
}

// Keys lists the sampled keys of a source whose value name is value
// (e.g. every QP's acked_bytes of h0), sorted.
func (c *Counters) Keys(source, value string) []string {
	var out []string
	for k := range c.m {
		if strings.HasPrefix(k, source+":") && strings.HasSuffix(k, "/"+value) {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

// Values returns every sampled value of the keys taken between from and
// to (ns), e.g. a gauge's readings.
func (c *Counters) Values(keys []string, from, to int64) []float64 {
	var out []float64
	for _, k := range keys {
		for _, o := range c.m[k] {
			if o.t >= from && o.t <= to {
				out = append(out, o.v)
			}
		}
	}
	return out
}

// Growth is how much a cumulative counter grew from from to to (ns,
// CLOCK_MONOTONIC), by linear interpolation. With fromCreation the start
// value is 0 instead: the counters of an object created during the run (a
// QP) start at 0, and its first sample may come after it counted. ok is
// false when the key was never sampled.
func (c *Counters) Growth(key string, from, to int64, fromCreation bool) (g float64, ok bool) {
	o := c.m[key]
	if len(o) == 0 {
		return 0, false
	}
	start := 0.0
	if !fromCreation {
		start = at(o, from)
	}
	if to < o[0].t {
		// Not yet created at to: nothing counted.
		return 0, true
	}
	return at(o, to) - start, true
}

// GrowthByID is, for every object of source that reported keys[0] (every
// QP of a host, for a QP counter), how much each counter in keys grew from
// zero+from to zero+to (zero in CLOCK_MONOTONIC ns). A window from 0 or
// before counts from the object's creation (Growth's fromCreation).
func (c *Counters) GrowthByID(source string, zero int64, from, to time.Duration, keys ...string) (map[string]map[string]float64, error) {
	if len(keys) == 0 {
		return nil, fmt.Errorf("no counter named")
	}
	out := map[string]map[string]float64{}
	for _, id := range c.IDs(source, keys[0]) {
		m := map[string]float64{}
		for _, k := range keys {
			g, ok := c.Growth(Key(source, id, k), zero+int64(from), zero+int64(to), from <= 0)
			if !ok {
				return nil, fmt.Errorf("%s of %s did not report %s", id, source, k)
			}
			m[k] = g
		}
		out[id] = m
	}
	return out, nil
}

// IDs lists the objects of a source that report value (e.g. every QP of
// h0 has inflight_at_bad), sorted.
func (c *Counters) IDs(source, value string) []string {
	var out []string
	for _, k := range c.Keys(source, value) {
		out = append(out, strings.TrimSuffix(strings.TrimPrefix(k, source+":"), "/"+value))
	}
	return out
}

// Has says whether the counter was sampled at least twice.
func (c *Counters) Has(key string) bool { return len(c.m[key]) >= 2 }

// at is the counter's value at t by linear interpolation (clamped at the
// ends: before the first sample the counter is at its first value).
func at(o []obs, t int64) float64 {
	i := sort.Search(len(o), func(i int) bool { return o[i].t >= t })
	switch {
	case i == 0:
		return o[0].v
	case i == len(o):
		return o[len(o)-1].v
	}
	a, b := o[i-1], o[i]
	if b.t == a.t {
		return b.v
	}
	return a.v + (b.v-a.v)*float64(t-a.t)/float64(b.t-a.t)
}

// Rate is the sum of the keys' rates of change, in units per second times
// scale, on the grid zero, zero+step, ... up to end (ns, CLOCK_MONOTONIC).
// Point k holds the rate over (t_k - step, t_k]. A counter that went
// backwards (a daemon restarted) contributes 0 over that step.
func (c *Counters) Rate(name, unit string, keys []string, zero, end int64, step time.Duration, scale float64) (Series, error) {
	s := Series{Name: name, Unit: unit}
	for _, k := range keys {
		if !c.Has(k) {
			return s, fmt.Errorf("series %s: counter %s was not sampled (at least two samples needed)", name, k)
		}
	}
	for t := zero + int64(step); t <= end; t += int64(step) {
		var sum float64
		for _, k := range keys {
			d := at(c.m[k], t) - at(c.m[k], t-int64(step))
			if d > 0 {
				sum += d
			}
		}
		s.Points = append(s.Points, Point{T: time.Duration(t - zero), V: sum / step.Seconds() * scale})
	}
	return s, nil
}

// Port names the two counters of a modelled switch port that give what
// its emulated link carried: Tx, the bytes the port model admitted
// (tx_bytes), and Queue, the gauge of its virtual-queue backlog
// (queue_bytes; "" for a port without a model).
type Port struct{ Tx, Queue string }

// Drained is the rate at which the ports' virtual queues drained: over each
// step, the bytes admitted less the growth of the backlog, summed over the
// ports, in units per second times scale, on Rate's grid. This is the rate
// the emulated links carried, never above their capacity. The admitted
// bytes alone (Rate over Tx) are not: the XDP port model cannot delay a
// frame, so after a sender stall the queue has drained and a burst of up to
// the buffer passes at once, and a window's admitted rate can exceed the
// capacity by buffer / window (docs/lab.md). A port whose counters went
// backwards (a daemon restarted) contributes 0 over that step.
func (c *Counters) Drained(name, unit string, ports []Port, zero, end int64, step time.Duration, scale float64) (Series, error) {
	s := Series{Name: name, Unit: unit}
	for _, p := range ports {
		for _, k := range []string{p.Tx, p.Queue} {
			if k != "" && !c.Has(k) {
				return s, fmt.Errorf("series %s: counter %s was not sampled (at least two samples needed)", name, k)
			}
		}
	}
	for t := zero + int64(step); t <= end; t += int64(step) {
		var sum float64
		for _, p := range ports {
			d := at(c.m[p.Tx], t) - at(c.m[p.Tx], t-int64(step))
			if d < 0 {
				continue
			}
			if p.Queue != "" {
				d -= at(c.m[p.Queue], t) - at(c.m[p.Queue], t-int64(step))
			}
			if d > 0 {
				sum += d
			}
		}
		s.Points = append(s.Points, Point{T: time.Duration(t - zero), V: sum / step.Seconds() * scale})
	}
	return s, nil
}

// Window returns the points with from < T <= to.
func (s Series) Window(from, to time.Duration) []Point {
	var out []Point
	for _, p := range s.Points {
		if p.T > from && p.T <= to {
			out = append(out, p)
		}
	}
	return out
}

// Mean is the mean value over (from, to]; NaN when no point falls there.
func (s Series) Mean(from, to time.Duration) float64 {
	w := s.Window(from, to)
	if len(w) == 0 {
		return math.NaN()
	}
	var sum float64
	for _, p := range w {
		sum += p.V
	}
	return sum / float64(len(w))
}

// Median is the median value over (from, to]; NaN when empty.
func (s Series) Median(from, to time.Duration) float64 {
	w := s.Window(from, to)
	if len(w) == 0 {
		return math.NaN()
	}
	v := make([]float64, len(w))
	for i, p := range w {
		v[i] = p.V
	}
	sort.Float64s(v)
	if len(v)%2 == 1 {
		return v[len(v)/2]
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2
}

// Smooth is the trailing moving average over n points.
func (s Series) Smooth(n int) Series {
	out := Series{Name: s.Name, Unit: s.Unit, Points: make([]Point, len(s.Points))}
	var sum float64
	for i, p := range s.Points {
		sum += p.V
		if i >= n {
			sum -= s.Points[i-n].V
		}
		out.Points[i] = Point{T: p.T, V: sum / float64(min(i+1, n))}
	}
	return out
}

// FirstReach is the first time after from at which the series is at least
// level; ok is false when it never gets there.
func (s Series) FirstReach(from time.Duration, level float64) (time.Duration, bool) {
	for _, p := range s.Points {
		if p.T > from && p.V >= level {
			return p.T, true
		}
	}
	return 0, false
}

// Min is the smallest value over (from, to]; NaN when empty.
func (s Series) Min(from, to time.Duration) float64 {
	m := math.NaN()
	for _, p := range s.Window(from, to) {
		if math.IsNaN(m) || p.V < m {
			m = p.V
		}
	}
	return m
}

// WriteCSV writes series side by side: a time column in seconds, then one
// column per series (they must share the grid).
func WriteCSV(w io.Writer, ss []Series) error {
	if len(ss) == 0 {
		return nil
	}
	fmt.Fprint(w, "t_s")
	for _, s := range ss {
		fmt.Fprintf(w, ",%s[%s]", s.Name, s.Unit)
	}
	fmt.Fprintln(w)
	for i, p := range ss[0].Points {
		fmt.Fprintf(w, "%.4f", p.T.Seconds())
		for _, s := range ss {
			if i < len(s.Points) {
				fmt.Fprintf(w, ",%.6g", s.Points[i].V)
			} else {
				fmt.Fprint(w, ",")
			}
		}
		if _, err := fmt.Fprintln(w); err != nil {
			return err
		}
	}
	return nil
}

// JSONL writes samples one per line (the raw telemetry of a run), in
// internal/telemetry's encoding.
type JSONL struct {
	enc *telemetry.Encoder
}

// NewJSONL writes to w.
func NewJSONL(w io.Writer) *JSONL { return &JSONL{enc: telemetry.NewEncoder(w)} }

// Write appends one sample.
func (j *JSONL) Write(s Sample) error { return j.enc.Encode(&s) }
