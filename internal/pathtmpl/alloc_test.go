package pathtmpl

import (
	"testing"

	"github.com/softmrc/softmrc/internal/wire"
)

// The allocation table of docs/conventions.md, written out: the functions
// must give these uSIDs, and the limits must end each range where the next
// begins.
func TestAllocation(t *testing.T) {
	for _, tc := range []struct {
		name string
		got  wire.USID
		want wire.USID
	}{
		{"first T1, plane 0", T1USID(0, 0), 0x0100},
		{"last T1, plane 1", T1USID(MaxT1s-1, 1), 0x3f01},
		{"first T0, plane 2", T0USID(0, 2), 0x4002},
		{"last T0, plane 0", T0USID(MaxT0s-1, 0), 0xbf00},
		{"first downlink, plane 3", DownlinkUSID(0, 3), 0xc003},
		{"last downlink, plane 15", DownlinkUSID(MaxDownlinks-1, wire.Plane(wire.MaxPlanes-1)), 0xfe0f},
	} {
		if tc.got != tc.want {
			t.Errorf("%s: %#04x, want %#04x", tc.name, tc.got, tc.want)
		}
	}
	if MaxT1s != 63 || MaxT0s != 128 || MaxDownlinks != 63 {
		t.Errorf("limits %d T1s, %d T0s, %d downlinks; conventions.md says 63, 128, 63", MaxT1s, MaxT0s, MaxDownlinks)
	}
}

func TestNodeMAC(t *testing.T) {
	for _, tc := range []struct {
		k         NodeKind
		run, node uint16
		port      uint8
		want      wire.MAC
	}{
		{NodeHost, 0x1234, 1, 0, wire.MAC{0x02, 0x12, 0x34, 0, 1, 0}},
		{NodeT0, 0xabcd, 0x0102, 0x80, wire.MAC{0x06, 0xab, 0xcd, 1, 2, 0x80}},
		{NodeT1, 1, 0, 3, wire.MAC{0x0a, 0, 1, 0, 0, 3}},
		{NodeMgmt, 1, 0, 0xff, wire.MAC{0x0e, 0, 1, 0, 0, 0xff}},
	} {
		got := NodeMAC(tc.k, tc.run, tc.node, tc.port)
		if got != tc.want {
			t.Errorf("NodeMAC(%d, %#x, %#x, %#x) = %s, want %s", tc.k, tc.run, tc.node, tc.port, got, tc.want)
		}
		if got[0]&1 != 0 || got[0]&2 == 0 {
			t.Errorf("%s is not a locally administered unicast MAC", got)
		}
	}
}

// USIDNode inverts T1USID, T0USID and DownlinkUSID over their whole
// ranges and every plane; unallocated indexes are refused.
func TestUSIDNodeInvertsAllocation(t *testing.T) {
	for p := wire.Plane(0); p < wire.MaxPlanes; p++ {
		for _, tc := range []struct {
			kind NodeKind
			max  int
			f    func(int, wire.Plane) wire.USID
		}{{NodeT1, MaxT1s, T1USID}, {NodeT0, MaxT0s, T0USID}, {NodeHost, MaxDownlinks, DownlinkUSID}} {
			for n := 0; n < tc.max; n++ {
				u := tc.f(n, p)
				k, gn, gp, ok := USIDNode(u)
				if !ok || k != tc.kind || gn != n || gp != p {
					t.Fatalf("USIDNode(%04x) = %d %d %d %v, want %d %d %d", u, k, gn, gp, ok, tc.kind, n, p)
				}
			}
		}
		for _, u := range []wire.USID{wire.USID(p), 0xff00 | wire.USID(p)} {
			if _, _, _, ok := USIDNode(u); ok {
				t.Errorf("USIDNode(%04x) accepted an unallocated index", u)
			}
		}
	}
	for u, want := range map[wire.USID]string{0x4000: "p0-t0-0", 0x4103: "p3-t0-1", 0x0100: "p0-t1-0", 0x0402: "p2-t1-3", 0xc000: ""} {
		if got, _ := SwitchName(u); got != want {
			t.Errorf("SwitchName(%04x) = %q, want %q", u, got, want)
		}
	}
}
