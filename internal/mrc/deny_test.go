package mrc

import (
	"testing"

	"github.com/softmrc/softmrc/internal/wire"
)

// TestDenylist: the engine-wide denylist keeps every packet, data and
// control alike (SACK, NACK, probes, reverse probes, port status and its
// answer), off what it denies, on both ends, for QPs connected before and
// after the rule; lifting it brings the paths back.
func TestDenylist(t *testing.T) {
	cases := []struct {
		name string
		// rules builds the rules once the QPs' EV sets are known (after
		// is true) or before any QP exists (after false: the rule must
		// hold for QPs created later).
		rules     func(h *harness) []DenyRule
		after     bool
		forbidden func(port wire.Plane, ev wire.EV) bool
		plane     int // a plane that must carry no frame at all (-1: none)
	}{
		{name: "plane before connect", plane: 2,
			rules:     func(*harness) []DenyRule { return []DenyRule{{Plane: 2, T1: AnyT1, Peer: AnyPeer}} },
			forbidden: func(port wire.Plane, ev wire.EV) bool { return port == 2 || ev.Plane() == 2 }},
		{name: "plane after connect", plane: 1, after: true,
			rules:     func(*harness) []DenyRule { return []DenyRule{{Plane: 1, T1: AnyT1, Peer: AnyPeer}} },
			forbidden: func(port wire.Plane, ev wire.EV) bool { return port == 1 || ev.Plane() == 1 }},
		{name: "path before connect", plane: -1,
			rules: func(*harness) []DenyRule { return []DenyRule{{Plane: 1, T1: 3, Peer: AnyPeer}} },
			forbidden: func(_ wire.Plane, ev wire.EV) bool {
				return ev.Plane() == 1 && ev.T1()%4 == 3
			}},
		{name: "path of one peer after connect", plane: -1, after: true,
			rules: func(*harness) []DenyRule { return []DenyRule{{Plane: 0, T1: 2, Peer: 0}} },
			forbidden: func(_ wire.Plane, ev wire.EV) bool {
				return ev.Plane() == 0 && ev.T1()%4 == 2
			}},
		{name: "two paths and a plane before connect", plane: 3,
			rules: func(*harness) []DenyRule {
				return []DenyRule{{Plane: 0, T1: 0, Peer: AnyPeer}, {Plane: 0, T1: 1, Peer: AnyPeer}, {Plane: 3, T1: AnyT1, Peer: AnyPeer}}
			},
			forbidden: func(port wire.Plane, ev wire.EV) bool {
				return port == 3 || ev.Plane() == 3 || (ev.Plane() == 0 && ev.T1()%4 < 2)
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, hopts{seed: 77, noQPs: !tc.after})
			set := func(r []DenyRule) {
				for i := 0; i < 2; i++ {
					if err := h.eng[i].SetDenylist(r); err != nil {
						t.Fatal(err)
					}
				}
			}
			if !tc.after {
				set(tc.rules(h))
				h.qp[0], h.qp[1] = h.connect(QPConfig{}, QPConfig{})
			} else {
				// Some traffic first, so that the reverse sets and
				// the rotation hold the soon-denied EVs.
				h.transfer(512<<10, 64<<10, Second)
				h.mem[0].Deregister(0x11)
				h.mem[1].Deregister(0x22)
				set(tc.rules(h))
			}
			bad := 0
			h.Filter = func(from int, port wire.Plane, f []byte) bool {
				var p wire.Packet
				if (wire.Decoder{}).Decode(f, &p) == nil && tc.forbidden(port, p.EV) {
					bad++
					t.Logf("side %d sent %v on port %d EV %v", from, p.Opcode, port, p.EV)
				}
				return false
			}
			before := [2]EngineCounters{h.eng[0].Counters(), h.eng[1].Counters()}
			h.Loss = 0.02 // losses: NACKs, ASSUMED_BAD EVs and their probes
			h.transfer(2<<20, 256<<10, Second)
			// A port flap elsewhere: port-status updates and answers.
			h.eng[0].SetPortState(h.now, 0, false)
			h.run(h.now+Millisecond, nil)
			h.eng[0].SetPortState(h.now, 0, true)
			h.Loss = 0
			// Idle: keepalive reverse probes.
			h.run(h.now+300*Millisecond, nil)
			if bad != 0 {
				t.Fatalf("%d packets used a denied EV, path or plane", bad)
			}
			for i := 0; i < 2; i++ {
				c := h.eng[i].Counters()
				var ctrl uint64
				for pl := 0; pl < testPlanes; pl++ {
					ctrl += c.TxCtrlByPlane[pl] - before[i].TxCtrlByPlane[pl]
				}
				if ctrl == 0 {
					t.Fatalf("side %d sent no control packets at all: the test exercised nothing", i)
				}
				if tc.plane >= 0 {
					d := c.TxDataByPlane[tc.plane] - before[i].TxDataByPlane[tc.plane]
					k := c.TxCtrlByPlane[tc.plane] - before[i].TxCtrlByPlane[tc.plane]
					if d != 0 || k != 0 {
						t.Errorf("side %d: denied plane %d carried %d data and %d control frames", i, tc.plane, d, k)
					}
				}
				t.Logf("side %d: control per plane %v, data per plane %v, TxDenied %d", i,
					c.TxCtrlByPlane[:testPlanes], c.TxDataByPlane[:testPlanes], c.TxDenied)
			}
			s := h.snap(0)
			checkTransitions(t, s)
			for _, e := range s.EVs {
				if tc.forbidden(e.Plane, e.EV) != (e.State == EVDenied) {
					t.Errorf("EV %v is %v", e.EV, e.State)
				}
			}

			// Lifting the list: the denied EVs carry data again.
			set(nil)
			h.Filter = nil
			h.mem[0].Deregister(0x11)
			h.mem[1].Deregister(0x22)
			h.transfer(2<<20, 256<<10, Second)
			s = h.snap(0)
			checkTransitions(t, s)
			var used uint64
			for _, e := range s.EVs {
				if e.State == EVDenied {
					t.Errorf("EV %v still DENIED after the list was lifted", e.EV)
				}
				if tc.forbidden(e.Plane, e.EV) {
					used += e.Sent
				}
			}
			if used == 0 {
				t.Error("the formerly denied EVs carry nothing after the list was lifted")
			}
		})
	}
}

// TestDenylistExactEV denies one EV engine-wide; a per-QP Allow must not
// lift it (the list outranks the QP's own admin state), and Allow after a
// per-QP Deny of a listed EV leaves it DENIED too.
func TestDenylistExactEV(t *testing.T) {
	h := newHarness(t, hopts{seed: 5})
	s := h.snap(0)
	var ev wire.EV
	for _, e := range s.EVs {
		if e.Active {
			ev = e.EV
			break
		}
	}
	if err := h.eng[0].SetDenylist([]DenyRule{{Exact: true, EV: ev}}); err != nil {
		t.Fatal(err)
	}
	if err := h.eng[0].Allow(h.qp[0], ev); err != nil {
		t.Fatal(err)
	}
	bad := 0
	h.Filter = func(from int, _ wire.Plane, f []byte) bool {
		var p wire.Packet
		if from == 0 && (wire.Decoder{}).Decode(f, &p) == nil && p.EV == ev {
			bad++
		}
		return false
	}
	h.Loss = 0.02
	h.transfer(1<<20, 128<<10, Second)
	if bad != 0 {
		t.Fatalf("%d packets on the denied EV %v", bad, ev)
	}
	s = h.snap(0)
	for _, e := range s.EVs {
		if e.EV == ev && e.State != EVDenied {
			t.Fatalf("EV %v is %v after a per-QP Allow, want DENIED (the denylist holds it)", ev, e.State)
		}
	}
	checkTransitions(t, s)
}

func TestDenylistErrors(t *testing.T) {
	h := newHarness(t, hopts{seed: 1, noQPs: true})
	for _, r := range []DenyRule{
		{Plane: testPlanes, T1: AnyT1, Peer: AnyPeer},
		{Exact: true, EV: wire.MakeEV(9, 0, 1)},
		{Plane: AnyPlane, T1: AnyT1, Peer: AnyPeer},
	} {
		if err := h.eng[0].SetDenylist([]DenyRule{r}); err == nil {
			t.Errorf("rule %v accepted", r)
		}
	}
	if len(h.eng[0].Denylist()) != 0 {
		t.Error("a refused list was installed")
	}
}

// TestDenyRuleDeniesAgreesWithEngine: the exported matcher and the engine's
// per-peer table say the same for every rule shape and EV.
func TestDenyRuleDeniesAgreesWithEngine(t *testing.T) {
	rules := []DenyRule{
		{Plane: 1, T1: AnyT1, Peer: AnyPeer}, {Plane: 2, T1: 3, Peer: AnyPeer}, {Plane: 0, T1: 1, Peer: 0},
		{Plane: 3, T1: 2, Peer: 1}, {Plane: AnyPlane, T1: 2, Peer: 0}, {Plane: 3, T1: AnyT1, Peer: 0},
		{Exact: true, EV: wire.MakeEV(0, 0, 42)},
	}
	for _, r := range rules {
		h := newHarness(t, hopts{seed: 3, noQPs: true})
		if err := h.eng[0].SetDenylist([]DenyRule{r}); err != nil {
			t.Fatal(err)
		}
		h.qp[0], h.qp[1] = h.connect(QPConfig{}, QPConfig{})
		p := h.eng[0].peers[0]
		for pl := 0; pl < testPlanes; pl++ {
			for t1 := 0; t1 < 8; t1++ {
				for _, ent := range []uint32{42, 43} {
					ev := wire.MakeEV(wire.Plane(pl), uint8(t1), ent)
					if got, want := h.eng[0].evDenied(p, ev), r.Denies(p.tidx, false, 4, ev); got != want {
						t.Errorf("rule %v EV %v: engine %v, Denies %v", r, ev, got, want)
					}
				}
			}
		}
	}
}
