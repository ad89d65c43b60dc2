package telemetry

import (
	"encoding/json"
	"testing"
)

func qpSample() *Sample {
	s := &Sample{T: 1234567890123, Source: "h0", Kind: KindQP, ID: "0x0101", Values: map[string]float64{}}
	for _, k := range []string{KeyAckedBytes, KeyTxBytes, KeyRtxBytes, KeyTxPackets, KeyRtxPackets, KeyRxBytes, KeyLosses,
		KeyTimeouts, KeyNACKs, KeyTrims, KeyECNEchoes, KeyNoEVStalls, KeyMsgsSent, KeyCwnd, KeyInFlight, KeySRTT, KeyQPState} {
		s.Values[k] = 123456789
	}
	for p := range 2 {
		for _, st := range EVStates {
			s.Values[EVStateKey(p, st)] = 8
		}
	}
	return s
}

// BenchmarkAppendJSON: the daemon's cost per QP sample.
func BenchmarkAppendJSON(b *testing.B) {
	s := qpSample()
	var buf []byte
	b.ReportAllocs()
	for b.Loop() {
		buf = AppendJSON(buf[:0], s)
	}
	b.SetBytes(int64(len(buf)))
}

// BenchmarkUnmarshal: a subscriber's cost per QP sample.
func BenchmarkUnmarshal(b *testing.B) {
	line := AppendJSON(nil, qpSample())
	var s Sample
	b.ReportAllocs()
	for b.Loop() {
		if err := Unmarshal(line, &s); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkUnmarshalStdlib: the same line through encoding/json, what
// Unmarshal falls back to (the comparison for the fast path).
func BenchmarkUnmarshalStdlib(b *testing.B) {
	line := AppendJSON(nil, qpSample())
	var s Sample
	b.ReportAllocs()
	for b.Loop() {
		s = Sample{}
		if err := json.Unmarshal(line, &s); err != nil {
			b.Fatal(err)
		}
	}
}
