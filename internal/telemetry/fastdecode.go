package telemetry

import (
	"errors"
	"strconv"
)

// errNotFast: the line is not in the exact shape AppendJSON writes (other
// key order, white space, escapes); Unmarshal then uses encoding/json.
var errNotFast = errors.New("not in the encoder's shape")

// known interns the value keys the daemons send, so that decoding a sample
// allocates no key strings.
var known = func() map[string]string {
	m := map[string]string{}
	for _, k := range []string{KeyAckedBytes, KeyTxBytes, KeyRtxBytes, KeyTxPackets, KeyRtxPackets, KeyRxBytes, KeyLosses,
		KeyTimeouts, KeyNACKs, KeyTrims, KeyECNEchoes, KeyNoEVStalls, KeyInFlightAtBad, KeyMsgsSent, KeyCwnd, KeyInFlight, KeySRTT, KeyQPState,
		KeyFinal, KeyRxPackets, KeyCarrier, KeyPlane, KeyDrops, KeyDropBuffer, KeyDropFault, KeyECNMarked, KeyTrimmed,
		KeyQueueBytes, KeyFaultDown, KindQP, KindNICPort, KindSwitchPort} {
		m[k] = k
	}
	for p := range 16 {
		for _, st := range EVStates {
			k := EVStateKey(p, st)
			m[k] = k
		}
	}
	return m
}()

func intern(b []byte) string {
	if s, ok := known[string(b)]; ok { // no allocation for the lookup
		return s
	}
	return string(b)
}

// fastUnmarshal decodes exactly what AppendJSON writes, about ten times
// faster than encoding/json (a subscriber at 1 ms decodes thousands of
// samples a second).
func fastUnmarshal(b []byte, s *Sample) error {
	p := parser{b: b}
	if !p.lit(`{"t":`) {
		return errNotFast
	}
	t, ok := p.integer()
	if !ok {
		return errNotFast
	}
	s.T = t
	var src, kind, id []byte
	if !p.lit(`,"src":`) || !p.str(&src) || !p.lit(`,"kind":`) || !p.str(&kind) || !p.lit(`,"id":`) || !p.str(&id) || !p.lit(`,"v":{`) {
		return errNotFast
	}
	s.Source, s.Kind, s.ID = intern(src), intern(kind), string(id)
	s.Values = make(map[string]float64, 32)
	if !p.lit("}") {
		for {
			var k []byte
			if !p.str(&k) || !p.lit(":") {
				return errNotFast
			}
			var v float64
			if p.lit("null") {
				v = 0
			} else if v, ok = p.number(); !ok {
				return errNotFast
			}
			s.Values[intern(k)] = v
			if p.lit("}") {
				break
			}
			if !p.lit(",") {
				return errNotFast
			}
		}
	}
	if !p.lit("}") {
		return errNotFast
	}
	for ; p.i < len(p.b); p.i++ {
		if c := p.b[p.i]; c != '\n' && c != '\r' && c != ' ' && c != '\t' {
			return errNotFast
		}
	}
	return nil
}

type parser struct {
	b []byte
	i int
}

func (p *parser) lit(s string) bool {
	if len(p.b)-p.i < len(s) || string(p.b[p.i:p.i+len(s)]) != s {
		return false
	}
	p.i += len(s)
	return true
}

// str reads a string without escapes into *out (a sub-slice of the input).
func (p *parser) str(out *[]byte) bool {
	if p.i >= len(p.b) || p.b[p.i] != '"' {
		return false
	}
	for j := p.i + 1; j < len(p.b); j++ {
		switch c := p.b[j]; {
		case c == '"':
			*out = p.b[p.i+1 : j]
			p.i = j + 1
			return true
		case c == '\\' || c < 0x20:
			return false
		}
	}
	return false
}

func (p *parser) integer() (int64, bool) {
	j := p.i
	if j < len(p.b) && p.b[j] == '-' {
		j++
	}
	for j < len(p.b) && p.b[j] >= '0' && p.b[j] <= '9' {
		j++
	}
	v, err := strconv.ParseInt(string(p.b[p.i:j]), 10, 64)
	if err != nil {
		return 0, false
	}
	p.i = j
	return v, true
}

func (p *parser) number() (float64, bool) {
	j := p.i
	for j < len(p.b) {
		c := p.b[j]
		if (c >= '0' && c <= '9') || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E' {
			j++
			continue
		}
		break
	}
	if j == p.i {
		return 0, false
	}
	v, err := strconv.ParseFloat(string(p.b[p.i:j]), 64)
	if err != nil {
		return 0, false
	}
	p.i = j
	return v, true
}
