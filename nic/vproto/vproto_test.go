package vproto

import (
	"encoding/hex"
	"encoding/json"
	"strings"
	"testing"
)

// Golden encodings: little-endian fields at the offsets documented on Put.
func TestWRGolden(t *testing.T) {
	w := WR{ID: 0x0102030405060708, QPN: 0x123456, Op: OpWriteImm, Flags: FlagSignaled, LocalAddr: 0x7f0000001000,
		LKey: 0xaabbccdd, Len: 65536, RemoteAddr: 0x7f0000002000, RKey: 0x11223344, Imm: 0xdeadbeef}
	var b [WRLen]byte
	w.Put(b[:])
	want := "0807060504030201" + "56341200" + "01" + "01" + "0000" + "00100000007f0000" + "ddccbbaa" + "00000100" +
		"00200000007f0000" + "44332211" + "efbeadde"
	if got := hex.EncodeToString(b[:]); got != want {
		t.Fatalf("WR bytes\n got %s\nwant %s", got, want)
	}
	var r WR
	r.Get(b[:])
	if r != w {
		t.Fatalf("round trip: %+v != %+v", r, w)
	}
}

func TestCQEGolden(t *testing.T) {
	c := CQE{ID: 9, QPN: 0x101, Status: StatusRemAccessErr, Op: CQRecvImm, Len: 2048, Imm: 0xcafe, SrcQP: 0x202, Vendor: 2}
	var b [CQELen]byte
	c.Put(b[:])
	want := "0900000000000000" + "01010000" + "0a" + "80" + "0000" + "00080000" + "feca0000" + "02020000" + "02000000"
	if got := hex.EncodeToString(b[:]); got != want {
		t.Fatalf("CQE bytes\n got %s\nwant %s", got, want)
	}
	var r CQE
	r.Get(b[:])
	if r != c {
		t.Fatalf("round trip: %+v != %+v", r, c)
	}
}

func TestMessages(t *testing.T) {
	wrs := []WR{{ID: 1, Len: 5}, {ID: 2, Op: OpWriteImm, Imm: 3}}
	m := AppendWRs(nil, wrs)
	h, err := ParseHeader(m)
	if err != nil || h.Type != TypePost {
		t.Fatalf("header %+v, %v", h, err)
	}
	got, err := ParseWRs(nil, m[HeaderLen:])
	if err != nil || len(got) != 2 || got[0] != wrs[0] || got[1] != wrs[1] {
		t.Fatalf("ParseWRs = %+v, %v", got, err)
	}
	if _, err := ParseWRs(nil, m[HeaderLen:len(m)-1]); err == nil {
		t.Fatal("a truncated post body parsed")
	}
	cm := AppendCQEs(nil, []CQE{{ID: 4}})
	if cs, err := ParseCQEs(nil, cm[HeaderLen:]); err != nil || len(cs) != 1 || cs[0].ID != 4 {
		t.Fatalf("ParseCQEs = %+v, %v", cs, err)
	}
	jm, err := AppendJSON(nil, TypeHello, 42, Hello{Version: Version, Client: "x"})
	if err != nil {
		t.Fatal(err)
	}
	if h, _ := ParseHeader(jm); h.Seq != 42 || h.Type != TypeHello || !strings.Contains(string(jm[HeaderLen:]), `"client":"x"`) {
		t.Fatalf("json message %q", jm)
	}
	jm[1] = 9
	if _, err := ParseHeader(jm); err == nil || !strings.Contains(err.Error(), "version 9") {
		t.Fatalf("version mismatch: %v", err)
	}
	if _, err := ParseHeader([]byte{1, 2}); err != ErrShort {
		t.Fatalf("short header: %v", err)
	}
}

func TestStatusAndOpcodeText(t *testing.T) {
	for _, s := range []Status{StatusLocQPOpErr, StatusLocProtErr, StatusRemAccessErr, StatusRemInvReqErr} {
		if len(s.String()) < 20 {
			t.Errorf("status %d text %q says too little", s, s)
		}
	}
	if Status(200).String() != "status 200" || OpRead.Supported() || !OpWriteImm.Supported() {
		t.Error("status/opcode helpers")
	}
}

func FuzzParseWRs(f *testing.F) {
	f.Add(AppendWRs(nil, []WR{{ID: 1, Len: 5}})[HeaderLen:])
	f.Add([]byte{1, 2, 3})
	f.Fuzz(func(t *testing.T, b []byte) {
		wrs, err := ParseWRs(nil, b)
		if err != nil {
			return
		}
		again := AppendWRs(nil, wrs)[HeaderLen:]
		// Reserved bytes are not kept; compare the decoded values.
		wrs2, err := ParseWRs(nil, again)
		if err != nil || len(wrs2) != len(wrs) {
			t.Fatalf("re-parse: %v", err)
		}
		for i := range wrs {
			if wrs[i] != wrs2[i] {
				t.Fatalf("WR %d changed: %+v -> %+v", i, wrs[i], wrs2[i])
			}
		}
	})
}

func FuzzParseCQEs(f *testing.F) {
	f.Add(AppendCQEs(nil, []CQE{{ID: 1, Imm: 5}})[HeaderLen:])
	f.Fuzz(func(t *testing.T, b []byte) {
		cs, err := ParseCQEs(nil, b)
		if err != nil {
			return
		}
		cs2, err := ParseCQEs(nil, AppendCQEs(nil, cs)[HeaderLen:])
		if err != nil || len(cs2) != len(cs) {
			t.Fatalf("re-parse: %v", err)
		}
		for i := range cs {
			if cs[i] != cs2[i] {
				t.Fatalf("CQE %d changed", i)
			}
		}
	})
}

func FuzzParseHeader(f *testing.F) {
	f.Add([]byte{8, 1, 0, 0, 1, 0, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := ParseHeader(b)
		if err != nil {
			return
		}
		var out [HeaderLen]byte
		PutHeader(out[:], h)
		if string(out[:]) != string(b[:HeaderLen]) {
			t.Fatalf("header round trip %x -> %x", b[:HeaderLen], out)
		}
	})
}

func TestTransportJSON(t *testing.T) {
	for _, tc := range []struct {
		in   CreateQP
		json string
	}{
		{CreateQP{SQDepth: 8}, `{"sq_depth":8}`},
		{CreateQP{SQDepth: 8, Transport: TransportRoCE}, `{"sq_depth":8,"transport":"roce"}`},
	} {
		b, err := json.Marshal(tc.in)
		if err != nil || string(b) != tc.json {
			t.Fatalf("marshal %+v = %s, %v; want %s", tc.in, b, err, tc.json)
		}
		var back CreateQP
		if err := json.Unmarshal(b, &back); err != nil || back != tc.in {
			t.Fatalf("round trip of %s = %+v, %v", b, back, err)
		}
	}
	var c CreateQP
	if err := json.Unmarshal([]byte(`{"transport":"iwarp"}`), &c); err == nil || !strings.Contains(err.Error(), "want mrc or roce") {
		t.Fatalf("unknown transport: err %v", err)
	}
	if _, err := json.Marshal(CreateQP{Transport: 9}); err == nil {
		t.Fatal("marshalling transport 9 succeeded")
	}
}

func TestAccessCheck(t *testing.T) {
	for _, tc := range []struct {
		a  Access
		ok bool
	}{
		{0, true},
		{AccessLocalWrite, true},
		{AccessLocalWrite | AccessRemoteWrite, true},
		{AccessRemoteWrite, false}, // verbs: remote write needs local write
		{1 << 5, false},            // remote read, atomics: not in MRC
	} {
		if err := tc.a.Check(); (err == nil) != tc.ok {
			t.Errorf("Access(%#x).Check() = %v, want ok=%v", uint32(tc.a), err, tc.ok)
		}
	}
}
