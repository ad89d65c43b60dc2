package plan

import (
	"net/netip"
	"testing"

	"github.com/softmrc/softmrc/internal/pathtmpl"

	"github.com/softmrc/softmrc/internal/wire"
)

func TestContainer(t *testing.T) {
	b := netip.MustParsePrefix("5f00:1::/32")
	for _, tc := range []struct {
		us   []wire.USID
		want string
	}{
		{[]wire.USID{0x4000, 0x0100, 0x4100, 0xc000}, "5f00:1:4000:100:4100:c000::"},
		{[]wire.USID{pathtmpl.T0USID(0, 1), pathtmpl.DownlinkUSID(1, 1)}, "5f00:1:4001:c101::"},
		{[]wire.USID{1, 2, 3, 4, 5, 6}, "5f00:1:1:2:3:4:5:6"},
	} {
		got, err := Container(b, tc.us...)
		if err != nil || got.String() != tc.want {
			t.Errorf("Container(%v) = %v, %v; want %s", tc.us, got, err, tc.want)
		}
	}
	if _, err := Container(b, 1, 2, 3, 4, 5, 6, 7); err == nil {
		t.Error("7 uSIDs accepted in F3216")
	}
	if _, err := Container(netip.MustParsePrefix("5f00::/16"), 1); err == nil {
		t.Error("a /16 block accepted")
	}
}
