package dataplane

import (
	"encoding/binary"
	"math/rand/v2"
	"net/netip"
	"testing"
)

// diffResult is what arrived at the receiver for one probe.
type diffResult struct {
	arrived bool
	da      netip.Addr
	hl      uint8
}

const sentinelID = 0xffffffff

// probeFrame is an SRv6-style frame from the sender to the router with an id
// in the inner payload.
func (c *chain) probeFrame(da netip.Addr, hl uint8, id uint32) []byte {
	f := usidFrame("5f00:1:200::", hl)
	f.dst = da
	f.dstMAC, f.srcMAC = [6]byte(c.macR0), [6]byte(c.macS0)
	f.rawPayload = binary.BigEndian.AppendUint32(nil, id)
	return f.bytes()
}

func probeID(f []byte) (uint32, bool) {
	if len(f) < 106 || binary.BigEndian.Uint16(f[12:]) != 0x86dd || f[20] != 41 {
		return 0, false
	}
	return binary.BigEndian.Uint32(f[102:]), true
}

// diffProbe is one destination of the differential test.
type diffProbe struct {
	da  netip.Addr
	hl  uint8
	own int // uN executions the RFC performs on it (for the divergence rule)
}

// diffProbes builds random containers over {own 0x100, routed 0x200/0x300,
// unrouted 0x400, random} plus edge cases.
func diffProbes(n int) []diffProbe {
	rng := rand.New(rand.NewPCG(7, 11))
	mk := func(hl uint8, ids ...uint16) diffProbe {
		var a [16]byte
		binary.BigEndian.PutUint32(a[:], 0x5f000001)
		for i, u := range ids {
			binary.BigEndian.PutUint16(a[4+2*i:], u)
		}
		return diffProbe{da: netip.AddrFrom16(a), hl: hl}
	}
	ps := []diffProbe{
		mk(64, 0x100), mk(64, 0x100, 0x200), mk(64, 0x100, 0x100, 0x200), mk(2, 0x100, 0x100, 0x200),
		mk(64, 0x100, 0x100, 0x100, 0x100, 0x100, 0x100), mk(64, 0x100, 0x200, 0x300, 0x400, 0x500, 0x600),
		mk(10, 0x100, 0, 0, 0, 0, 1), mk(1, 0x100, 0x200), mk(1, 0x200), mk(2, 0x200), mk(255, 0x100, 0x300),
		mk(64, 0x200, 0x100), mk(64, 0x400), mk(64, 0x100, 0x400), mk(64, 0x100, 0x100), mk(0, 0x100, 0x200),
	}
	choices := []uint16{0x100, 0x100, 0x200, 0x300, 0x400}
	hls := []uint8{64, 64, 64, 3, 2, 1, 255}
	for len(ps) < n {
		k := 1 + rng.IntN(6)
		ids := make([]uint16, k)
		for i := range ids {
			if rng.IntN(5) == 0 {
				ids[i] = uint16(rng.Uint32())
			} else {
				ids[i] = choices[rng.IntN(len(choices))]
			}
		}
		ps = append(ps, mk(hls[rng.IntN(len(hls))], ids...))
	}
	for i := range ps {
		a := ps[i].da.As16()
		for binary.BigEndian.Uint16(a[4:]) == ownUSID && !allZero(a[6:]) {
			ps[i].own++
			copy(a[4:], a[6:])
			a[14], a[15] = 0, 0
		}
	}
	return ps
}

// runProbes sends every probe through the chain and returns what arrived.
func (c *chain) runProbes(t *testing.T, probes []diffProbe) []diffResult {
	tx := c.openPacket(c.S, c.p+"s0")
	rx := c.openPacket(c.D, c.p+"d0")
	res := make([]diffResult, len(probes))
	for i, p := range probes {
		if err := tx.send(c.probeFrame(p.da, p.hl, uint32(i))); err != nil {
			t.Fatalf("send probe %d: %v", i, err)
		}
	}
	sentinel := c.probeFrame(netip.MustParseAddr("5f00:1:100:200::"), 64, sentinelID)
	collect(t, rx, tx, sentinel, func(f []byte) bool {
		id, ok := probeID(f)
		return ok && id == sentinelID
	}, func(f []byte) {
		id, ok := probeID(f)
		if !ok || int(id) >= len(res) {
			return
		}
		res[id] = diffResult{arrived: true, da: netip.AddrFrom16([16]byte(f[38:54])), hl: f[21]}
	})
	return res
}

// TestKernelDifferential sends the same destinations through the kernel's
// seg6local End flavors next-csid and through the XDP switch on the same
// veth chain and compares what arrives, allowing only the kernel divergences
// of SRV6-XDP-FACTS §2 (see docs/switch.md).
func TestKernelDifferential(t *testing.T) {
	if testing.Short() {
		t.Skip("skipping netns test in -short mode")
	}
	c := newChain(t)
	r0, r1 := c.p+"r0", c.p+"r1"
	kernelUN(t, c.R, "5f00:1:100::/48", r0)
	sh(t, "ip", "-n", c.R, "-6", "route", "add", "5f00:1:200::/48", "via", "fd00:2::2", "dev", r1)
	sh(t, "ip", "-n", c.R, "-6", "route", "add", "5f00:1:300::/48", "via", "fd00:2::2", "dev", r1)

	probes := diffProbes(400)
	kernel := c.runProbes(t, probes)

	d, err := Load(LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Destroy() })
	r0idx, r1idx, d0idx := c.ifindex(c.R, r0), c.ifindex(c.R, r1), c.ifindex(c.D, c.p+"d0")
	c.in(c.R, func() error {
		if err := d.SetSwitchConfig(SwitchConfig{Block: testBlock, OwnUSIDs: []uint16{ownUSID}}); err != nil {
			return err
		}
		if err := d.SetPort(0, Port{Ifindex: r1idx, NeighMAC: c.macD0, OwnMAC: c.macR1}); err != nil {
			return err
		}
		for _, p := range []string{"5f00:1:200::/48", "5f00:1:300::/48"} {
			if err := d.AddRoute(netip.MustParsePrefix(p), NextHop{Port: 0}); err != nil {
				return err
			}
		}
		return d.Attach(r0idx, AttachNative)
	})
	c.in(c.D, func() error { return d.AttachPass(d0idx) })
	xdp := c.runProbes(t, probes)

	var same, diverged, arrived int
	for i, p := range probes {
		k, x := kernel[i], xdp[i]
		if x.arrived {
			arrived++
		}
		if k == x {
			same++
			continue
		}
		// Divergence 2: the kernel decrements the hop limit once for a run of
		// the node's own uSIDs, RFC 9800 (and we) once per uN execution; so
		// we also drop when the hop limit runs out part-way.
		if p.own >= 2 && k.arrived && k.hl == p.hl-1 {
			if (x.arrived && x.da == k.da && int(x.hl) == int(p.hl)-p.own) || (!x.arrived && int(p.hl) <= p.own) {
				diverged++
				continue
			}
		}
		t.Errorf("probe %d DA %v hl %d (own x%d): kernel %+v, xdp %+v", i, p.da, p.hl, p.own, k, x)
	}
	t.Logf("%d probes: %d identical, %d allowed divergences, %d forwarded by XDP", len(probes), same, diverged, arrived)
	if arrived < len(probes)/4 || diverged == 0 {
		t.Errorf("probe set too weak: %d forwarded, %d divergent", arrived, diverged)
	}
	// Every probe is counted by the switch.
	var rx, outs uint64
	for p := PortID(0); p <= UnmappedPort; p++ {
		cn, _ := d.Counters(p)
		rx += cn.RxPackets
		outs += outcomes(cn)
	}
	if rx != outs || rx < uint64(len(probes)) {
		t.Errorf("switch counted rx %d, outcomes %d for %d probes (+sentinels)", rx, outs, len(probes))
	}
}
