package daemon

import (
	"errors"
	"reflect"
	"testing"

	"github.com/softmrc/softmrc/internal/mrc"
	"github.com/softmrc/softmrc/internal/wire"
)

// snapEngine answers Snapshot with fixed QP counters (the rest of Engine
// is not used).
type snapEngine struct {
	Engine
	c map[wire.QPN]mrc.QPCounters
}

func (e snapEngine) Snapshot(qpn wire.QPN, s *mrc.QPSnapshot) error {
	c, ok := e.c[qpn]
	if !ok {
		return errors.New("no such QP")
	}
	s.Counters = c
	return nil
}

// Every uint64 field of mrc.QPCounters reaches the QP totals (mrcctl
// counters' "qps", mrc_qp_events_total) and the per-QP copies (telemetry,
// mrcctl qps) under its snake_case name, summed over live and destroyed
// QPs: the list is made from the struct, so a counter added to the
// engine appears with no edit here (the fields are filled by reflection,
// and SendBlockedFail, LastEVKept and PathFlapHolds, which no hand list
// carried, are checked by name).
func TestQPCountersCoverEveryField(t *testing.T) {
	var c mrc.QPCounters
	v := reflect.ValueOf(&c).Elem()
	n := 0
	for i := 0; i < v.NumField(); i++ {
		if v.Field(i).Kind() == reflect.Uint64 {
			v.Field(i).SetUint(uint64(1000 + i)) // distinct: a swapped key shows
			n++
		}
	}
	if n != len(qpCounterFields) {
		t.Fatalf("%d uint64 fields in mrc.QPCounters, %d mapped", n, len(qpCounterFields))
	}
	eng := snapEngine{c: map[wire.QPN]mrc.QPCounters{1: c, 2: c, 3: c}}
	d := &Daemon{eng: eng, qps: map[wire.QPN]*qpState{1: {qpn: 1}, 2: {qpn: 2}, 3: {qpn: 3}}}
	d.retireQPCounters(3)
	delete(d.qps, 3)
	got := d.qpTotals()

	var one [maxQPCounterFields]uint64
	copyQPCounters(&one, &c)
	seen := map[string]bool{}
	for k, f := range qpCounterFields {
		w := v.Field(f.index).Uint()
		if got[f.key] != 3*w {
			t.Errorf("total %q = %d, want 3 QPs × %d (two live, one destroyed)", f.key, got[f.key], w)
		}
		if one[k] != w {
			t.Errorf("per-QP copy of %s = %d, want %d", f.name, one[k], w)
		}
		if seen[f.key] {
			t.Errorf("key %q used twice", f.key)
		}
		seen[f.key] = true
	}
	if len(got) != len(qpCounterFields) {
		t.Errorf("%d totals for %d counters", len(got), len(qpCounterFields))
	}
	for _, k := range []string{"send_blocked_fail", "last_ev_kept", "path_flap_holds"} {
		if !seen[k] {
			t.Errorf("QP counter %q not exported", k)
		}
	}
}
