package mrc

import (
	"bytes"
	"testing"

	"github.com/softmrc/softmrc/internal/wire"
)

// Writes reach only regions of the receiving QP's protection domain that
// were registered for remote write under an rkey; the sender hears a
// remote access error and the region is untouched. The posted source is
// resolved the same way, among lkeys of the sender's domain.
func TestRemoteWriteProtection(t *testing.T) {
	const pdA, pdB = 7, 9
	for _, tc := range []struct {
		name string
		reg  func(m *MemTable, dst []byte) // the receiver's registration
		rkey uint32
		ok   bool
	}{
		{"remote write granted", func(m *MemTable, dst []byte) {
			m.RegisterPD(pdB, 0x21, 0x22, 0x1000, dst, AccessLocalWrite|AccessRemoteWrite)
		}, 0x22, true},
		{"no remote-write access", func(m *MemTable, dst []byte) {
			m.RegisterPD(pdB, 0x21, 0x22, 0x1000, dst, AccessLocalRead|AccessLocalWrite)
		}, 0x22, false},
		{"rkey of another protection domain", func(m *MemTable, dst []byte) {
			m.RegisterPD(pdB+1, 0x21, 0x22, 0x1000, dst, AccessLocalWrite|AccessRemoteWrite)
		}, 0x22, false},
		{"an lkey named as rkey", func(m *MemTable, dst []byte) {
			m.RegisterPD(pdB, 0x21, 0x22, 0x1000, dst, AccessLocalWrite|AccessRemoteWrite)
		}, 0x21, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, hopts{seed: 5, noQPs: true})
			h.qp[0], h.qp[1] = h.connect(QPConfig{PD: pdA}, QPConfig{PD: pdB})
			src := make([]byte, 3000)
			for i := range src {
				src[i] = byte(i*7 + 1)
			}
			h.mem[0].RegisterPD(pdA, 0x11, 0, 0x8000, src, AccessLocalRead)
			dst := make([]byte, 4096)
			tc.reg(h.mem[1], dst)
			if err := h.eng[0].PostWrite(h.qp[0], WR{ID: 1, Op: OpWrite, LKey: 0x11, Addr: 0x8000, Len: 3000, RemoteVA: 0x1000, RKey: tc.rkey}); err != nil {
				t.Fatal(err)
			}
			var got []Completion
			h.run(100*Millisecond, func() bool {
				got = append(got, h.drainCQ(0)...)
				for _, c := range got {
					if c.Kind == CompSend {
						return true
					}
				}
				return false
			})
			var send *Completion
			for i := range got {
				if got[i].Kind == CompSend {
					send = &got[i]
				}
			}
			if send == nil {
				t.Fatalf("no send completion (got %+v)", got)
			}
			rx := h.snap(1).Counters
			if tc.ok {
				if send.Status != StatusOK || !bytes.Equal(dst[:3000], src) {
					t.Fatalf("allowed write: completion %+v, bytes equal %v", *send, bytes.Equal(dst[:3000], src))
				}
				return
			}
			if send.Status != StatusRemoteAccess {
				t.Fatalf("refused write completed %v, want %v", send.Status, StatusRemoteAccess)
			}
			if !bytes.Equal(dst, make([]byte, len(dst))) {
				t.Fatal("a refused write changed the region")
			}
			if rx.BadRKey == 0 || rx.NACKsSent[wire.NackUnexpEvent] == 0 {
				t.Fatalf("receiver counted BadRKey %d, NACKs %v", rx.BadRKey, rx.NACKsSent)
			}
		})
	}
}

// A posted write's source must be an lkey of the QP's own protection
// domain, with local-read access; an rkey does not name a source.
func TestLocalKeyProtection(t *testing.T) {
	h := newHarness(t, hopts{seed: 6, noQPs: true})
	h.qp[0], h.qp[1] = h.connect(QPConfig{PD: 1}, QPConfig{PD: 2})
	buf := make([]byte, 4096)
	h.mem[0].RegisterPD(1, 0x11, 0x12, 0x1000, buf, AccessLocalRead)
	h.mem[0].RegisterPD(3, 0x31, 0, 0x1000, buf, AccessLocalRead)
	h.mem[0].RegisterPD(1, 0x41, 0, 0x1000, buf, AccessRemoteWrite)
	for _, tc := range []struct {
		name string
		wr   WR
		ok   bool
	}{
		{"own lkey", WR{LKey: 0x11, Addr: 0x1000, Len: 100}, true},
		{"range past the end", WR{LKey: 0x11, Addr: 0x1000 + 4000, Len: 100}, false},
		{"an rkey as lkey", WR{LKey: 0x12, Addr: 0x1000, Len: 100}, false},
		{"lkey of another protection domain", WR{LKey: 0x31, Addr: 0x1000, Len: 100}, false},
		{"no local-read access", WR{LKey: 0x41, Addr: 0x1000, Len: 100}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := tc.wr
			w.Op, w.RKey = OpWrite, 0x99
			err := h.eng[0].PostWrite(h.qp[0], w)
			if (err == nil) != tc.ok || (err != nil && !isErr(err, ErrLocalAccess)) {
				t.Fatalf("PostWrite: %v, want ok=%v (or ErrLocalAccess)", err, tc.ok)
			}
		})
	}
}

// IBTA: a zero-length RDMA Write transfers nothing, so it names no local
// region and the responder checks neither its R_Key nor its VA: dummy keys
// and addresses must complete successfully, with and without immediate.
func TestZeroLengthWriteDummyKeys(t *testing.T) {
	for _, tc := range []struct {
		name string
		wr   WR
	}{
		{"write, no local buffer", WR{Op: OpWrite, RKey: 0xdeadbeef, RemoteVA: ^uint64(0)}},
		{"write, empty local buffer", WR{Op: OpWrite, Local: []byte{}, RKey: 0xdeadbeef, RemoteVA: 12345}},
		{"write-imm, dummy lkey and rkey", WR{Op: OpWriteImm, LKey: 0xbad, Addr: 1, RKey: 0xdeadbeef, RemoteVA: 7, Imm: 0x5eed}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, hopts{seed: 8})
			w := tc.wr
			w.ID = 42
			if err := h.eng[0].PostWrite(h.qp[0], w); err != nil {
				t.Fatalf("PostWrite of a zero-length write: %v", err)
			}
			var send, recv []Completion
			h.run(100*Millisecond, func() bool {
				send = append(send, h.drainCQ(0)...)
				recv = append(recv, h.drainCQ(1)...)
				return len(send) > 0 && (w.Op != OpWriteImm || len(recv) > 0)
			})
			if len(send) != 1 || send[0].Kind != CompSend || send[0].Status != StatusOK || send[0].WRID != 42 {
				t.Fatalf("sender completions %+v, want one OK for WR 42", send)
			}
			if w.Op == OpWriteImm {
				if len(recv) != 1 || recv[0].Kind != CompRecvImm || recv[0].Imm != 0x5eed || recv[0].Len != 0 {
					t.Fatalf("receiver completions %+v, want one RecvImm imm 0x5eed len 0", recv)
				}
			}
			if c := h.snap(1).Counters; c.BadRKey+c.BadVA != 0 {
				t.Fatalf("receiver checked the dummy key: BadRKey %d BadVA %d", c.BadRKey, c.BadVA)
			}
		})
	}
}

// CompRecvImm reports the message's length, which every data packet's RETH
// carries as its DMA length.
func TestRecvImmLength(t *testing.T) {
	h := newHarness(t, hopts{seed: 9})
	dst := make([]byte, 1<<16)
	h.mem[1].Register(0x22, 0, dst, AccessRemoteWrite)
	h.region(0, 0x11, 0, 1<<16, AccessLocalRead)
	sizes := []uint32{1, 2048, 5000, 1 << 16}
	for i, n := range sizes {
		if err := h.eng[0].PostWrite(h.qp[0], WR{ID: uint64(i), Op: OpWriteImm, LKey: 0x11, Len: n, RKey: 0x22, Imm: uint32(i)}); err != nil {
			t.Fatal(err)
		}
	}
	var recv []Completion
	h.run(Second, func() bool {
		h.drainCQ(0)
		recv = append(recv, h.drainCQ(1)...)
		return len(recv) == len(sizes)
	})
	if len(recv) != len(sizes) {
		t.Fatalf("%d of %d immediates", len(recv), len(sizes))
	}
	for i, c := range recv {
		if c.Len != sizes[c.Imm] || c.Imm != uint32(i) {
			t.Fatalf("immediate %d: Len %d, want %d", c.Imm, c.Len, sizes[c.Imm])
		}
	}
}

func TestRegionSlice(t *testing.T) {
	r := Region{Base: 0x10000, Buf: make([]byte, 100)}
	for _, tc := range []struct {
		name string
		va   uint64
		n    uint32
		ok   bool
	}{
		{"whole", 0x10000, 100, true},
		{"empty at start", 0x10000, 0, true},
		{"empty at end", 0x10000 + 100, 0, true},
		{"last byte", 0x10000 + 99, 1, true},
		{"one past the end", 0x10000 + 99, 2, false},
		{"starts past the end", 0x10000 + 101, 0, false},
		{"below the start", 0xffff, 1, false},
		{"huge length", 0x10000, 1<<32 - 1, false},
		{"VA wraps", 1<<64 - 1, 2, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, ok := r.Slice(tc.va, tc.n)
			if ok != tc.ok {
				t.Fatalf("Slice(%#x, %d): ok = %v, want %v", tc.va, tc.n, ok, tc.ok)
			}
			if ok && (len(b) != int(tc.n) || cap(b) != int(tc.n)) {
				t.Fatalf("len %d cap %d, want %d (capped so appends cannot reach past the range)", len(b), cap(b), tc.n)
			}
		})
	}
}
