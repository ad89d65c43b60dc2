package wire

import (
	"net"
	"testing"
)

// A uSID's text is 0x-prefixed hex, written and read; anything else is an
// error, not a guess.
func TestUSIDText(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want USID
		ok   bool
	}{
		{"0x0140", 0x0140, true},
		{"0x140", 0x0140, true},
		{"0XC001", 0xc001, true},
		{"0xffff", 0xffff, true},
		{"0x4_000", 0x4000, true},
		{"4000", 0, false}, // bare hex: ambiguous with decimal
		{"1280", 0, false}, // decimal
		{"0x", 0, false},
		{"0x10000", 0, false},
		{"0xzz", 0, false},
		{"", 0, false},
	} {
		var u USID
		err := u.UnmarshalText([]byte(tc.in))
		if (err == nil) != tc.ok || u != tc.want {
			t.Errorf("UnmarshalText(%q) = %#x, %v; want %#x, ok %v", tc.in, u, err, tc.want, tc.ok)
		}
	}
	if b, _ := USID(0x140).MarshalText(); string(b) != "0x0140" {
		t.Errorf("MarshalText(0x140) = %q, want 0x0140", b)
	}
	if h := USID(0xc001).Hex(); h != "0xc001" {
		t.Errorf("Hex = %q", h)
	}
}

func FuzzUSIDText(f *testing.F) {
	for _, s := range []string{"0xc000", "0x1", "0xffff", "", "0x12345", "zz", "c000"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var u USID
		if u.UnmarshalText([]byte(s)) != nil {
			return
		}
		b, _ := u.MarshalText()
		var v USID
		if err := v.UnmarshalText(b); err != nil || v != u {
			t.Fatalf("%q -> %#x -> %q -> %#x, %v", s, uint16(u), b, uint16(v), err)
		}
	})
}

// MAC text is net's: six colon- (or dash-) separated bytes; other lengths
// are refused; String, MarshalText and HardwareAddr agree with net.
func TestMACText(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want MAC
		ok   bool
	}{
		{"02:00:00:00:01:0a", MAC{2, 0, 0, 0, 1, 0x0a}, true},
		{"02-00-00-00-01-0A", MAC{2, 0, 0, 0, 1, 0x0a}, true},
		{"02:00:00:00:01", MAC{}, false},
		{"00:00:5e:10:00:00:00:01", MAC{}, false}, // EUI-64
		{"nonsense", MAC{}, false},
	} {
		var m MAC
		err := m.UnmarshalText([]byte(tc.in))
		if (err == nil) != tc.ok || m != tc.want {
			t.Errorf("UnmarshalText(%q) = %s, %v; want %s, ok %v", tc.in, m, err, tc.want, tc.ok)
		}
	}
	m := MAC{0x02, 0xab, 0, 0xff, 1, 0x10}
	if got, want := m.String(), net.HardwareAddr(m[:]).String(); got != want {
		t.Errorf("String = %q, net says %q", got, want)
	}
	if b, _ := m.MarshalText(); string(b) != m.String() {
		t.Errorf("MarshalText = %q", b)
	}
	if back, err := MACFromHardwareAddr(m.HardwareAddr()); err != nil || back != m {
		t.Errorf("HardwareAddr round trip = %s, %v", back, err)
	}
	if _, err := MACFromHardwareAddr(net.HardwareAddr{1, 2, 3}); err == nil {
		t.Error("a 3-byte hardware address accepted")
	}
	if !(MAC{0x01, 0, 0x5e, 0, 0, 1}).IsMulticast() || m.IsMulticast() || !(MAC{}).IsZero() || m.IsZero() {
		t.Error("IsMulticast/IsZero wrong")
	}
}
