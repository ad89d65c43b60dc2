package telemetry

import (
	"fmt"
	"slices"
)

// Record encodes samples that all have one fixed set of keys, the way a
// daemon produces them: the keys are sorted once, values are set by key
// into a slice, and Append writes the line AppendJSON would write for the
// same sample, without building a map or sorting per sample.
type Record struct {
	keys []string
	idx  map[string]int
	vals []float64
}

// NewRecord returns a record with these keys (duplicates are dropped).
func NewRecord(keys ...string) *Record {
	ks := slices.Clone(keys)
	slices.Sort(ks)
	ks = slices.Compact(ks)
	r := &Record{keys: ks, idx: make(map[string]int, len(ks)), vals: make([]float64, len(ks))}
	for i, k := range ks {
		r.idx[k] = i
	}
	return r
}

// Set sets key's value. A key the record was not made with is a
// programming error and panics.
func (r *Record) Set(key string, v float64) {
	i, ok := r.idx[key]
	if !ok {
		panic(fmt.Sprintf("telemetry: key %q is not in this record", key))
	}
	r.vals[i] = v
}

// Append appends the sample line (values as last Set; unset ones 0).
func (r *Record) Append(dst []byte, t int64, src, kind, id string) []byte {
	return AppendRecord(dst, t, src, kind, id, r.keys, r.vals)
}
