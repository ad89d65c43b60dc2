// Package tagmetrics makes Prometheus counters from the tagged fields of a
// counter struct, so that a daemon's metrics are generated from the struct
// that counts them and never from a hand-kept list of names.
//
// A field tagged
//
//	metric:"name" help:"What it counts."
//
// is one counter, exported as <prefix>name_total. It must be a uint64 (read
// as is: a counter only its owner's goroutine writes, or a copy) or an
// atomic.Uint64 (read with Load). A struct-typed field tagged
//
//	metric:"name" help:"..." label:"reason"
//
// is one counter with an extra label: each tagged field of the inner struct
// is a series of <prefix>name_total whose label value is the inner field's
// metric tag (ctl.Drops -> softmrc_switch_dropped_total{reason="no_route"}).
// metric:"-" or no metric tag leaves a field out.
package tagmetrics

import (
	"fmt"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/prometheus/client_golang/prometheus"
)

// Field is one counter of a tagged struct.
type Field struct {
	Name string // the metric tag: the counter's name without prefix and _total
	Help string
	// Label and Value are set for a field of an inner struct tagged label:
	// the label's name (from the outer field) and this field's value of it.
	Label, Value string
	Load         func() uint64
}

// Key is the field's name in a flat name -> value map: Name, or
// Name.Value for a labelled field (dropped.no_route).
func (f Field) Key() string {
	if f.Label == "" {
		return f.Name
	}
	return f.Name + "." + f.Value
}

var atomicUint64 = reflect.TypeFor[atomic.Uint64]()

// Fields lists the tagged counters of *ptr (a pointer to a struct). A
// tagged field of another type is a programming error and panics, naming
// the field: the owning package's tests walk their structs and catch it
// before a scrape can.
//
// The fields are mostly unexported (the counters belong to the daemon), so
// they are reached through their address: reflect may read unexported
// fields but not call their methods (atomic.Uint64.Load).
func Fields(ptr any) []Field {
	v := reflect.ValueOf(ptr)
	if v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct {
		panic(fmt.Sprintf("tagmetrics: Fields(%T): want a pointer to a struct", ptr))
	}
	return appendFields(nil, v.Elem(), false)
}

// appendFields appends the tagged fields of the struct v; inner is set
// inside a labelled struct, which cannot hold another.
func appendFields(out []Field, v reflect.Value, inner bool) []Field {
	t := v.Type()
	for i := 0; i < t.NumField(); i++ {
		sf := t.Field(i)
		name, ok := sf.Tag.Lookup("metric")
		if !ok || name == "-" {
			continue
		}
		fv := v.Field(i)
		if sf.Type.Kind() == reflect.Struct && sf.Type != atomicUint64 {
			l := sf.Tag.Get("label")
			if l == "" || inner {
				panic(fmt.Sprintf("tagmetrics: %s.%s (metric %q) is a struct: it needs a label tag naming the label its fields set, and cannot be inside another labelled struct", t, sf.Name, name))
			}
			for _, in := range appendFields(nil, fv, true) {
				in.Label, in.Value, in.Name, in.Help = l, in.Name, name, sf.Tag.Get("help")
				out = append(out, in)
			}
			continue
		}
		addr := unsafe.Pointer(fv.UnsafeAddr())
		f := Field{Name: name, Help: sf.Tag.Get("help")}
		switch {
		case sf.Type == atomicUint64:
			f.Load = (*atomic.Uint64)(addr).Load
		case sf.Type.Kind() == reflect.Uint64:
			p := (*uint64)(addr)
			f.Load = func() uint64 { return *p }
		default:
			panic(fmt.Sprintf("tagmetrics: counter %s.%s (metric %q) is a %s: want uint64 or atomic.Uint64", t, sf.Name, name, sf.Type))
		}
		out = append(out, f)
	}
	return out
}

// Check reports the counter fields of the struct types of ptrs (and of their
// labelled inner structs) that break the rules a daemon's tests enforce:
// every uint64, atomic.Uint64 or struct field is tagged (metric:"-" to say
// it is not a counter), names are snake_case, unique and have help text. A
// counter added without a tag then fails a test instead of silently
// missing from the metrics.
func Check(ptrs ...any) []error {
	names := map[string]string{} // a name is unique over all the structs
	var errs []error
	for _, p := range ptrs {
		errs = append(errs, check(reflect.TypeOf(p).Elem(), false, names)...)
	}
	return errs
}

// check walks the struct type t; the fields of a labelled inner struct
// (inner) are label values and take their help from the outer field.
func check(t reflect.Type, inner bool, names map[string]string) []error {
	var errs []error
	for i := 0; i < t.NumField(); i++ {
		sf := t.Field(i)
		isStruct := sf.Type.Kind() == reflect.Struct && sf.Type != atomicUint64
		if sf.Type != atomicUint64 && sf.Type.Kind() != reflect.Uint64 && !isStruct {
			continue
		}
		where := t.String() + "." + sf.Name
		name, ok := sf.Tag.Lookup("metric")
		if !ok && isStruct {
			continue // a struct that is not a counter group (a mutex, a config)
		}
		switch {
		case !ok:
			errs = append(errs, fmt.Errorf("%s is a counter without a metric tag: add metric:\"name\" help:\"...\" (or metric:\"-\" if it is not one)", where))
			continue
		case name == "-":
			continue
		case !snakeCase(name):
			errs = append(errs, fmt.Errorf("%s: metric name %q is not snake_case", where, name))
		case !inner && sf.Tag.Get("help") == "":
			errs = append(errs, fmt.Errorf("%s: metric %q has no help tag", where, name))
		}
		if prev, dup := names[name]; dup {
			errs = append(errs, fmt.Errorf("metric %q named twice: %s and %s", name, prev, where))
		}
		names[name] = where
		if isStruct {
			if inner || sf.Tag.Get("label") == "" {
				errs = append(errs, fmt.Errorf("%s: metric %q is a struct: it needs a label tag and cannot sit inside another labelled struct", where, name))
				continue
			}
			errs = append(errs, check(sf.Type, true, map[string]string{})...)
		}
	}
	return errs
}

// snakeCase reports whether s is lower_snake_case: a-z, 0-9 and _, starting
// with a letter.
func snakeCase(s string) bool {
	for i, c := range s {
		if !(c >= 'a' && c <= 'z' || c == '_' && i > 0 || c >= '0' && c <= '9' && i > 0) {
			return false
		}
	}
	return s != ""
}

// Map is Key -> current value over fs (what a control socket reports).
func Map(fs []Field) map[string]uint64 {
	m := make(map[string]uint64, len(fs))
	for _, f := range fs {
		m[f.Key()] = f.Load()
	}
	return m
}

// Desc is f's metric: prefix+Name+"_total" with the help tag, the variable
// labels given, and f's own label last when it has one.
func Desc(prefix string, f Field, labels []string) *prometheus.Desc {
	if f.Label != "" {
		labels = append(labels[:len(labels):len(labels)], f.Label)
	}
	return prometheus.NewDesc(prefix+f.Name+"_total", f.Help, labels, nil)
}

// Describe sends the metric of each field once (the fields of one labelled
// struct share one).
func Describe(ch chan<- *prometheus.Desc, prefix string, fs []Field, labels []string) {
	seen := map[string]bool{}
	for _, f := range fs {
		if !seen[f.Name] {
			seen[f.Name] = true
			ch <- Desc(prefix, f, labels)
		}
	}
}

// descs caches the descriptors Collect makes: a scrape builds the same
// ones every time (prefix, field and label names do not change), and
// NewDesc is most of a scrape's cost.
var descs sync.Map // descKey -> *prometheus.Desc

type descKey struct {
	prefix, name, help, label, labels string
}

func cachedDesc(prefix string, f Field, labels []string) *prometheus.Desc {
	k := descKey{prefix, f.Name, f.Help, f.Label, strings.Join(labels, "\x00")}
	if d, ok := descs.Load(k); ok {
		return d.(*prometheus.Desc)
	}
	d, _ := descs.LoadOrStore(k, Desc(prefix, f, labels))
	return d.(*prometheus.Desc)
}

// Collect sends each field's value as a counter, with labelValues for the
// labels Describe was given.
func Collect(ch chan<- prometheus.Metric, prefix string, fs []Field, labels []string, labelValues ...string) {
	var last *prometheus.Desc
	lastName := ""
	for _, f := range fs {
		d := last
		if d == nil || f.Name != lastName {
			d = cachedDesc(prefix, f, labels)
			last, lastName = d, f.Name
		}
		lv := labelValues
		if f.Label != "" {
			lv = append(labelValues[:len(labelValues):len(labelValues)], f.Value)
		}
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(f.Load()), lv...)
	}
}
