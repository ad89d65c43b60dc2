package daemon

import (
	"reflect"
	"strings"
	"testing"

	"github.com/softmrc/softmrc/switchd/ctl"
)

// Every field of ctl.Drops is a drop reason in the metrics, under its JSON
// name, with its own value: the list is made from the struct, so a reason
// added there cannot be left out here.
func TestDropReasonsCoverEveryField(t *testing.T) {
	var d ctl.Drops
	v := reflect.ValueOf(&d).Elem()
	want := map[string]uint64{}
	for i := 0; i < v.NumField(); i++ {
		v.Field(i).SetUint(uint64(100 + i))
		name, _, _ := strings.Cut(v.Type().Field(i).Tag.Get("json"), ",")
		if name == "" {
			t.Fatalf("ctl.Drops.%s has no json name: the metric label comes from it", v.Type().Field(i).Name)
		}
		want[name] = uint64(100 + i)
	}
	got := map[string]uint64{}
	for _, r := range dropReasons(d) {
		got[r.name] = r.v
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("drop reasons %v, want %v", got, want)
	}
	var sum uint64
	for _, x := range got {
		sum += x
	}
	if sum != d.Total() {
		t.Errorf("reasons sum to %d, Drops.Total() = %d: Total misses a reason", sum, d.Total())
	}
}
