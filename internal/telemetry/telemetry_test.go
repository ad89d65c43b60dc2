package telemetry

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestRoundTrip(t *testing.T) {
	for _, c := range []struct {
		name string
		s    Sample
	}{
		{"qp", Sample{T: 123456789012345, Source: "h0", Kind: KindQP, ID: "0x0101", Values: map[string]float64{
			KeyAckedBytes: 1 << 40, KeyTxBytes: 1<<53 - 1, KeySRTT: 12.5, EVStateKey(1, "assumed_bad"): 3}}},
		{"switch port", Sample{T: 1, Source: "p0-t0-0", Kind: KindSwitchPort, ID: "u1", Values: map[string]float64{
			KeyQueueBytes: 0, KeyDrops: 7, KeyECNMarked: 1e15}}},
		{"no values", Sample{T: 5, Source: "h1", Kind: KindNICPort, ID: "p0", Values: map[string]float64{}}},
		{"T beyond 2^53", Sample{T: 1<<53 + 1, Source: "h", Kind: KindQP, ID: "x", Values: map[string]float64{}}},
		{"escapes", Sample{T: -1, Source: "a\"b\\c\n", Kind: KindQP, ID: "\x01é", Values: map[string]float64{"k\"": -0.25}}},
		{"tiny and huge", Sample{T: 2, Source: "h", Kind: KindQP, ID: "x", Values: map[string]float64{"a": 1e-300, "b": 1e300, "c": -(1 << 60)}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := AppendJSON(nil, &c.s)
			if !bytes.HasSuffix(b, []byte("\n")) || bytes.Count(b, []byte("\n")) != 1 {
				t.Fatalf("not one line: %q", b)
			}
			if !json.Valid(b) {
				t.Fatalf("invalid JSON: %s", b)
			}
			var got Sample
			if err := Unmarshal(b, &got); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, c.s) {
				t.Fatalf("round trip:\n got %+v\nwant %+v\n(%s)", got, c.s, b)
			}
			// Deterministic: same sample, same bytes (map order is random).
			for range 5 {
				if b2 := AppendJSON(nil, &c.s); !bytes.Equal(b, b2) {
					t.Fatalf("encoding differs between calls:\n%s%s", b, b2)
				}
			}
		})
	}
}

func TestNonFinite(t *testing.T) {
	s := Sample{T: 1, Source: "h0", Kind: KindQP, ID: "q", Values: map[string]float64{"nan": math.NaN(), "inf": math.Inf(1)}}
	b := AppendJSON(nil, &s)
	if !json.Valid(b) {
		t.Fatalf("invalid JSON for NaN/Inf: %s", b)
	}
	var got Sample
	if err := Unmarshal(b, &got); err != nil || got.Values["nan"] != 0 || got.Values["inf"] != 0 {
		t.Fatalf("got %+v, %v; want zeros", got, err)
	}
}

func TestDecoder(t *testing.T) {
	good := `{"t":1,"src":"h0","kind":"qp","id":"0x1","v":{"acked_bytes":10}}`
	for _, c := range []struct {
		name    string
		in      string
		n       int
		wantErr string
	}{
		{"two lines and blanks", good + "\n\n" + good + "\n", 2, ""},
		{"no final newline", good, 1, ""},
		{"bad JSON on line 3", good + "\n" + good + "\n{\"t\":", 2, "line 3"},
		{"missing kind", good + "\n" + `{"t":1,"src":"h0","id":"x","v":{}}`, 1, "line 2: telemetry sample: missing kind"},
		{"wrong type", `{"t":"soon","src":"h0","kind":"qp","id":"x","v":{}}`, 0, "line 1"},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := NewDecoder(strings.NewReader(c.in))
			n := 0
			var err error
			for {
				var s Sample
				if err = d.Decode(&s); err != nil {
					break
				}
				n++
			}
			if n != c.n {
				t.Errorf("decoded %d samples, want %d", n, c.n)
			}
			if c.wantErr == "" {
				if !errors.Is(err, io.EOF) {
					t.Errorf("err %v, want EOF", err)
				}
			} else if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Errorf("err %v, want it to contain %q", err, c.wantErr)
			}
			// ParseLines agrees on the same input.
			m := 0
			perr := ParseLines([]byte(c.in), func(*Sample) { m++ })
			if (perr == nil) != (c.wantErr == "") || m != c.n {
				t.Errorf("ParseLines: %d samples, %v", m, perr)
			}
		})
	}
}

func TestEncoder(t *testing.T) {
	var buf bytes.Buffer
	e := NewEncoder(&buf)
	in := []Sample{
		{T: 1, Source: "h0", Kind: KindQP, ID: "a", Values: map[string]float64{"x": 1}},
		{T: 2, Source: "h0", Kind: KindQP, ID: "a", Values: map[string]float64{"x": 2}},
	}
	for i := range in {
		if err := e.Encode(&in[i]); err != nil {
			t.Fatal(err)
		}
	}
	d := NewDecoder(&buf)
	for i := range in {
		var s Sample
		if err := d.Decode(&s); err != nil || !reflect.DeepEqual(s, in[i]) {
			t.Fatalf("sample %d: %+v, %v", i, s, err)
		}
	}
}

func TestEVStateKey(t *testing.T) {
	for p := range 16 {
		for _, st := range EVStates {
			k := EVStateKey(p, st)
			gp, gs, ok := ParseEVStateKey(k)
			if !ok || gp != p || gs != st {
				t.Errorf("%s parses as %d %s %v", k, gp, gs, ok)
			}
		}
	}
	for _, bad := range []string{"acked_bytes", "ev_p_good", "ev_px_good", "ev_p0_fine", "ev_p0"} {
		if _, _, ok := ParseEVStateKey(bad); ok {
			t.Errorf("%q parsed as an EV state key", bad)
		}
	}
}

func TestCheckInterval(t *testing.T) {
	for _, c := range []struct {
		in, want time.Duration
		ok       bool
	}{
		{0, DefaultInterval, true},
		{time.Millisecond, time.Millisecond, true},
		{250 * time.Millisecond, 250 * time.Millisecond, true},
		{10 * time.Second, 10 * time.Second, true},
		{999 * time.Microsecond, 0, false},
		{-time.Millisecond, 0, false},
		{11 * time.Second, 0, false},
	} {
		got, err := CheckInterval(c.in)
		if (err == nil) != c.ok || got != c.want {
			t.Errorf("CheckInterval(%v) = %v, %v", c.in, got, err)
		}
	}
}

func TestSchedule(t *testing.T) {
	for _, c := range []struct {
		name       string
		calls      []int64 // times Due is asked at
		wantDue    []bool
		wantNext   int64
		wantMissed uint64
	}{
		{"on time", []int64{5, 10, 19, 20, 30}, []bool{false, true, false, true, true}, 40, 0},
		{"late by less than an interval", []int64{15, 21}, []bool{true, true}, 30, 0},
		{"late by three intervals skips them", []int64{45, 49, 50}, []bool{true, false, true}, 60, 3},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := NewSchedule(0, 10)
			for i, now := range c.calls {
				if got := s.Due(now); got != c.wantDue[i] {
					t.Errorf("Due(%d) = %v, want %v", now, got, c.wantDue[i])
				}
			}
			if s.Next() != c.wantNext || s.Missed != c.wantMissed {
				t.Errorf("next %d missed %d, want %d %d", s.Next(), s.Missed, c.wantNext, c.wantMissed)
			}
		})
	}
}

// TestNow: Now advances with real time (a sleep here measures the clock;
// there is no counter to wait on).
func TestNow(t *testing.T) {
	a := Now()
	time.Sleep(2 * time.Millisecond)
	b := Now()
	if b-a < int64(2*time.Millisecond) || b-a > int64(5*time.Second) {
		t.Fatalf("Now advanced %v over a 2 ms sleep", time.Duration(b-a))
	}
}

// TestFastDecodeAgrees: the fast decoder reads what AppendJSON writes
// exactly as encoding/json does, and other shapes of valid JSON (white
// space, another key order, escapes, big T) go to encoding/json.
func TestFastDecodeAgrees(t *testing.T) {
	samples := []Sample{
		*mustQP(),
		{T: 1, Source: "p0-t1-0", Kind: KindSwitchPort, ID: "d0", Values: map[string]float64{KeyQueueBytes: 12345, KeyDrops: 0}},
		{T: 2, Source: "h0", Kind: KindNICPort, ID: "p1", Values: map[string]float64{}},
		{T: 3, Source: "h0", Kind: KindQP, ID: "x", Values: map[string]float64{"neg": -1.5e-7, "big": 1e300, "unknown_key": 4}},
	}
	for _, s := range samples {
		line := AppendJSON(nil, &s)
		var fast, std Sample
		if err := fastUnmarshal(line, &fast); err != nil {
			t.Fatalf("fast decoder refused the encoder's own line %s: %v", line, err)
		}
		if err := json.Unmarshal(line, &std); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(fast, std) || !reflect.DeepEqual(fast, s) {
			t.Errorf("line %s:\nfast %+v\n std %+v", line, fast, std)
		}
	}
	for _, other := range []string{
		`{ "t": 1, "src": "h0", "kind": "qp", "id": "a", "v": {"x": 1} }`,
		`{"src":"h0","t":1,"kind":"qp","id":"a","v":{"x":1}}`,
		`{"t":1,"src":"h\u0030","kind":"qp","id":"a","v":{"x":1}}`,
		`{"t":1.5e3,"src":"h0","kind":"qp","id":"a","v":{"x":1}}`,
	} {
		var s Sample
		if fastUnmarshal([]byte(other), &s) == nil {
			t.Errorf("fast decoder took %s", other)
		}
		if err := Unmarshal([]byte(other), &s); (err != nil) != strings.Contains(other, "1.5e3") || (err == nil && (s.Values["x"] != 1 || s.Source != "h0")) {
			t.Errorf("Unmarshal(%s) = %+v, %v", other, s, err)
		}
	}
}

func mustQP() *Sample { return qpSample() }

// TestRecord: a Record writes the same line AppendJSON writes for the same
// values, and refuses keys it was not made with.
func TestRecord(t *testing.T) {
	r := NewRecord(KeyTxBytes, KeyDrops, EVStateKey(0, "good"), KeyDrops)
	r.Set(KeyTxBytes, 10)
	r.Set(EVStateKey(0, "good"), 3)
	got := r.Append(nil, 5, "s", KindSwitchPort, "u0")
	want := AppendJSON(nil, &Sample{T: 5, Source: "s", Kind: KindSwitchPort, ID: "u0",
		Values: map[string]float64{KeyTxBytes: 10, KeyDrops: 0, EVStateKey(0, "good"): 3}})
	if !bytes.Equal(got, want) {
		t.Errorf("Record: %s\nAppendJSON: %s", got, want)
	}
	defer func() {
		if recover() == nil {
			t.Error("Set of an unknown key did not panic")
		}
	}()
	r.Set("nope", 1)
}
