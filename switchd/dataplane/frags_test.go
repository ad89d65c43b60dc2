package dataplane

import (
	"testing"
)

// 4 KiB RoCE MTU frames through BPF_PROG_RUN: the kernel puts what does not
// fit one page (less headroom and skb_shared_info, about 3.5 KB) in
// fragments, as veth does for a frags-aware program, so these frames have
// their headers in the linear part and the payload's tail in a fragment.
// Before the switch program was in SEC("xdp.frags"), BPF_PROG_RUN refused
// them (EINVAL) and a veth carrying the program could not have an MTU
// above 3506 at all.

// frag4K is a 4096-byte-payload MRC WRITE through the own uN to port 1:
// about 4.2 KB, more than the linear part.
func frag4K(dscp uint8, m mrcHdr) testFrame {
	m.payload = 4096
	return dataFrame(dscp, ecnECT0, m)
}

func TestMultiFragFrames(t *testing.T) {
	w := mrcHdr{opcode: 0xCA}
	wts := mrcHdr{opcode: 0xC6, ts: true}
	in := frag4K(10, w)
	if n := len(in.bytes()); n <= 3520 {
		t.Fatalf("test frame of %d bytes would be linear", n)
	}
	fwd := sent(in, 1, "5f00:1:200::", 63)
	trimmed := trimmedOf(in, 1, 40)
	trimmedTS := trimmedOf(frag4K(10, wts), 1, 40)
	marked := sent(in, 1, "5f00:1:200::", 63)
	itc := in.tc
	marked.innerTC = &itc
	marked.tc = marked.tc&^3 | ecnCE
	short := in.bytes()
	short = short[:len(short)-100] // payload length now claims 100 bytes more than the frame
	trimPort1 := func(h *harness) { h.setModel(1, RoleFabric, slowModel(0, 1000, 20000)) }
	runCases(t, []fwdCase{
		{name: "forwarded whole", in: in, wantRet: xdpRedirect, want: &fwd, port: 1, cnt: cForwarded},
		{name: "trimmed to its headers", setup: trimPort1, in: in, wantRet: xdpRedirect, want: &trimmed, port: 1, cnt: cTrimmed},
		{name: "trimmed with TSETH", setup: trimPort1, in: frag4K(10, wts), wantRet: xdpRedirect, want: &trimmedTS, port: 1, cnt: cTrimmed},
		{name: "ECN marked", setup: func(h *harness) { h.setModel(1, RoleFabric, slowModel(100, 100000, 200000)) },
			in: in, wantRet: xdpRedirect, want: &marked, port: 1, cnt: cMarked},
		// 4000 lies between the linear part and the whole frame: the
		// queue must be charged the whole frame.
		{name: "NO_TRIM above the threshold by its fragments", setup: func(h *harness) { h.setModel(1, RoleFabric, slowModel(0, 4000, 20000)) },
			in: frag4K(14, w), wantRet: xdpDrop, port: 1, cnt: cBuffer},
		{name: "payload length beyond the frame", raw: short, wantRet: xdpDrop, port: ingressPort, cnt: cMalformed},
	})

	// Byte counters count the whole frame, fragments included.
	h := newHarness(t)
	n := uint64(len(in.bytes()))
	if ret, _ := h.run(in.bytes()); ret != xdpRedirect {
		t.Fatalf("verdict %d, want redirect", ret)
	}
	if c := h.counters(ingressPort); c.RxBytes != n {
		t.Errorf("ingress rx_bytes %d, want %d (the whole frame)", c.RxBytes, n)
	}
	if c := h.counters(1); c.TxBytes != n {
		t.Errorf("port 1 tx_bytes %d, want %d (the whole frame)", c.TxBytes, n)
	}
}
