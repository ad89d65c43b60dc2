package telemetry

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
)

// AppendJSON appends s as one JSON object and a newline (one JSON Lines
// record) to dst. Value keys come out sorted, so equal samples encode to
// equal bytes. Non-finite values are written as null (JSON has no NaN);
// they decode as 0. It allocates only for the key order of a large sample.
func AppendJSON(dst []byte, s *Sample) []byte {
	var karr [48]string
	var varr [48]float64
	keys, vals := karr[:0], varr[:0]
	for k := range s.Values {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		vals = append(vals, s.Values[k])
	}
	return AppendRecord(dst, s.T, s.Source, s.Kind, s.ID, keys, vals)
}

// AppendRecord is AppendJSON for a sample given as parallel key and value
// slices: what a daemon uses with a key list sorted once, so that encoding
// a sample builds no map and sorts nothing. keys must be sorted and unique
// for the output to equal AppendJSON's.
func AppendRecord(dst []byte, t int64, src, kind, id string, keys []string, vals []float64) []byte {
	dst = append(dst, `{"t":`...)
	dst = strconv.AppendInt(dst, t, 10)
	dst = append(dst, `,"src":`...)
	dst = appendString(dst, src)
	dst = append(dst, `,"kind":`...)
	dst = appendString(dst, kind)
	dst = append(dst, `,"id":`...)
	dst = appendString(dst, id)
	dst = append(dst, `,"v":{`...)
	for i, k := range keys {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendString(dst, k)
		dst = append(dst, ':')
		v := vals[i]
		switch {
		case math.IsNaN(v) || math.IsInf(v, 0):
			dst = append(dst, "null"...)
		case v == math.Trunc(v) && math.Abs(v) < 1<<53:
			dst = strconv.AppendInt(dst, int64(v), 10)
		default:
			dst = strconv.AppendFloat(dst, v, 'g', -1, 64)
		}
	}
	return append(dst, "}}\n"...)
}

// appendString appends s as a JSON string.
func appendString(dst []byte, s string) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			dst = append(dst, '\\', c)
		case c < 0x20:
			dst = append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		default:
			dst = append(dst, c)
		}
	}
	return append(dst, '"')
}

// Encoder writes samples as JSON Lines.
type Encoder struct {
	w   io.Writer
	buf []byte
}

// NewEncoder returns an encoder writing to w.
func NewEncoder(w io.Writer) *Encoder { return &Encoder{w: w} }

// Encode writes one sample (one line).
func (e *Encoder) Encode(s *Sample) error {
	e.buf = AppendJSON(e.buf[:0], s)
	_, err := e.w.Write(e.buf)
	return err
}

// MaxLine bounds one encoded sample (a QP with 16 planes' EV states is
// about 1 KiB).
const MaxLine = 64 << 10

// Decoder reads JSON Lines samples. Empty lines are skipped.
type Decoder struct {
	sc   *bufio.Scanner
	line int
}

// NewDecoder returns a decoder reading from r.
func NewDecoder(r io.Reader) *Decoder {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), MaxLine)
	return &Decoder{sc: sc}
}

// Decode reads the next sample into s; io.EOF at the end. Errors name the
// line.
func (d *Decoder) Decode(s *Sample) error {
	for d.sc.Scan() {
		d.line++
		b := bytes.TrimSpace(d.sc.Bytes())
		if len(b) == 0 {
			continue
		}
		if err := Unmarshal(b, s); err != nil {
			return fmt.Errorf("line %d: %w", d.line, err)
		}
		return nil
	}
	if err := d.sc.Err(); err != nil {
		return fmt.Errorf("line %d: %w", d.line+1, err)
	}
	return io.EOF
}

// Unmarshal decodes one encoded sample (with or without its newline) into
// s, replacing its values.
func Unmarshal(b []byte, s *Sample) error {
	*s = Sample{}
	if fastUnmarshal(b, s) != nil {
		*s = Sample{}
		if err := json.Unmarshal(b, s); err != nil {
			return fmt.Errorf("telemetry sample: %w", err)
		}
	}
	if s.Kind == "" || s.Source == "" {
		return fmt.Errorf("telemetry sample: missing kind or src in %.80q", b)
	}
	return nil
}

// ParseLines decodes every sample in b (JSON Lines, as one message of a
// daemon carries them) and calls fn for each. fn must not keep s.
func ParseLines(b []byte, fn func(s *Sample)) error {
	var s Sample
	for n := 1; len(b) > 0; n++ {
		line, rest, _ := bytes.Cut(b, []byte{'\n'})
		b = rest
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		if err := Unmarshal(line, &s); err != nil {
			return fmt.Errorf("line %d: %w", n, err)
		}
		fn(&s)
	}
	return nil
}
