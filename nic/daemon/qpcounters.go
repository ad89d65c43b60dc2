package daemon

import (
	"fmt"
	"reflect"

	"github.com/softmrc/softmrc/internal/mrc"
	"github.com/softmrc/softmrc/internal/wire"
)

// QP counters by reflection: every uint64 field of mrc.QPCounters reaches
// the telemetry QP samples, `mrcctl qps -json` and the Prometheus
// exposition (mrc_qp_events_total) under its snake_case name, with no
// hand-kept list. Why: counters added to the engine (SendBlockedFail,
// LastEVKept, PathFlapHolds) used to stay invisible to the lab and to
// operators until someone remembered to map them (issue 10, S3).

// qpCounterField is one uint64 field of mrc.QPCounters.
type qpCounterField struct {
	index int    // field index in mrc.QPCounters
	name  string // Go name (mrcctl, vproto.CounterMap)
	key   string // snake_case (telemetry key, metric label)
}

// maxQPCounterFields bounds teleQP's fixed copy of the generic counters
// (no allocation per tick).
const maxQPCounterFields = 64

// qpCounterFields lists every uint64 field of mrc.QPCounters, in field
// order. Arrays (per-reason NACKs, EV transitions) are left out.
var qpCounterFields = func() []qpCounterField {
	t := reflect.TypeOf(mrc.QPCounters{})
	var fs []qpCounterField
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if f.IsExported() && f.Type.Kind() == reflect.Uint64 {
			fs = append(fs, qpCounterField{index: i, name: f.Name, key: snakeCase(f.Name)})
		}
	}
	if len(fs) > maxQPCounterFields {
		panic(fmt.Sprintf("mrc.QPCounters has %d uint64 fields, raise maxQPCounterFields (%d)", len(fs), maxQPCounterFields))
	}
	return fs
}()

// copyQPCounters copies the generic counters of c into dst (in
// qpCounterFields order).
func copyQPCounters(dst *[maxQPCounterFields]uint64, c *mrc.QPCounters) {
	v := reflect.ValueOf(c).Elem()
	for i, f := range qpCounterFields {
		dst[i] = v.Field(f.index).Uint()
	}
}

// addQPCounters adds the generic counters of c to m, by snake_case key.
func addQPCounters(m map[string]uint64, c *mrc.QPCounters) {
	v := reflect.ValueOf(c).Elem()
	for _, f := range qpCounterFields {
		m[f.key] += v.Field(f.index).Uint()
	}
}

// retireQPCounters adds qpn's counters to the destroyed QPs' totals; loop
// only, before the engine destroys it.
func (d *Daemon) retireQPCounters(qpn wire.QPN) {
	s := &d.qpScratch
	s.EVs = s.EVs[:0]
	if d.eng.Snapshot(qpn, s) != nil {
		return
	}
	if d.qpRetired == nil {
		d.qpRetired = map[string]uint64{}
	}
	addQPCounters(d.qpRetired, &s.Counters)
}

// qpTotals is every QP counter summed over the daemon's QPs, destroyed
// ones included; loop only.
func (d *Daemon) qpTotals() map[string]uint64 {
	m := make(map[string]uint64, len(qpCounterFields))
	for _, f := range qpCounterFields {
		m[f.key] = d.qpRetired[f.key]
	}
	s := &d.qpScratch
	for qpn := range d.qps {
		s.EVs = s.EVs[:0]
		if d.eng.Snapshot(qpn, s) == nil {
			addQPCounters(m, &s.Counters)
		}
	}
	return m
}
