package e2e

import (
	"bytes"
	"testing"
	"time"

	"github.com/softmrc/softmrc/internal/wire"
	"github.com/softmrc/softmrc/nic/verbs"
	"github.com/softmrc/softmrc/nic/vproto"
)

// An application pins its QP's EVs through the verbs API (the ECN-balancing
// experiment does): with every pinned EV on plane 1, two real mrc-nicd
// daemons over veths and AF_XDP carry the writes on port p1 only, the QP's
// active EVs are exactly the pinned ones, and the bytes arrive intact.
func TestPinnedEVsCarryTheData(t *testing.T) {
	requireNetns(t)
	tp := newTopo(t, 2)
	open := func(h *host) *verbs.Device {
		d, err := verbs.Open(h.cfg.DeviceSocket)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { d.Close() })
		return d
	}
	da, db := open(tp.h[0]), open(tp.h[1])
	const size = 256 << 10
	src, err := da.RegMR(size, verbs.AccessLocalWrite)
	if err != nil {
		t.Fatal(err)
	}
	dst, err := db.RegMR(size, verbs.AccessLocalWrite|verbs.AccessRemoteWrite)
	if err != nil {
		t.Fatal(err)
	}
	qa, err := da.CreateQP(verbs.QPConfig{})
	if err != nil {
		t.Fatal(err)
	}
	qb, err := db.CreateQP(verbs.QPConfig{})
	if err != nil {
		t.Fatal(err)
	}
	pinned := map[string]bool{}
	r := qb.ConnectInfo()
	for i := 0; i < 4; i++ {
		ev := wire.MakeEV(1, uint8(i), 0x5000+uint32(i)*7919)
		r.EVs = append(r.EVs, uint32(ev))
		pinned[ev.String()] = true
	}
	if err := qa.Connect(r); err != nil {
		t.Fatal(err)
	}
	if err := qb.Connect(qa.ConnectInfo()); err != nil {
		t.Fatal(err)
	}
	txFrames := func() [2]uint64 {
		var ports []vproto.PortStatus
		if err := da.Ctl(vproto.CtlRequest{Cmd: vproto.CtlPorts}, &ports); err != nil {
			t.Fatal(err)
		}
		var tx [2]uint64
		for _, p := range ports {
			tx[p.Plane] = p.Stats["TxFrames"]
		}
		return tx
	}
	before := txFrames()
	for i := range src.Buf {
		src.Buf[i] = byte(i*31 + i>>9)
	}
	const msg = 16 << 10
	for off := 0; off < size; off += msg {
		if err := qa.PostSend(verbs.Write(uint64(off), src, uint64(off), msg, dst.Addr+uint64(off), dst.RKey)); err != nil {
			t.Fatal(err)
		}
	}
	for n := 0; n < size/msg; n++ {
		c, err := da.NextCompletion(10 * time.Second)
		if err != nil || c.Status != verbs.StatusSuccess {
			t.Fatalf("completion %+v: %v", c, err)
		}
	}
	if !bytes.Equal(src.Buf, dst.Buf) {
		t.Fatal("the receiver's region differs from the sender's")
	}
	after := txFrames()
	p0, p1 := after[0]-before[0], after[1]-before[1]
	t.Logf("frames sent during the writes: port p0 %d, port p1 %d", p0, p1)
	if p1 < size/2048 || p0*10 > p1 {
		t.Fatalf("port p0 sent %d frames and p1 %d: want the data (>= %d frames) on p1, where every pinned EV is, and p0 under a tenth of it", p0, p1, size/2048)
	}
	var evs []vproto.EVRow
	if err := da.Ctl(vproto.CtlRequest{Cmd: vproto.CtlEVs, QPN: qa.QPN}, &evs); err != nil {
		t.Fatal(err)
	}
	active := 0
	for _, e := range evs {
		if e.Active {
			active++
			if !pinned[e.EV] {
				t.Errorf("active EV %s was not pinned", e.EV)
			}
		}
	}
	if active != len(pinned) {
		t.Fatalf("%d active EVs, want the %d pinned", active, len(pinned))
	}
}
