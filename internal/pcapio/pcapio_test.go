package pcapio

import (
	"bytes"
	"testing"
	"time"

	"github.com/google/gopacket/layers"
	"github.com/google/gopacket/pcapgo"
)

func TestWriteReadBack(t *testing.T) {
	var buf bytes.Buffer
	w, err := NewWriter(&buf)
	if err != nil {
		t.Fatal(err)
	}
	frames := [][]byte{{1, 2, 3}, bytes.Repeat([]byte{0xAB}, 4200)}
	ts := time.Unix(1700000000, 123456000)
	for i, f := range frames {
		if err := w.WriteFrame(ts.Add(time.Duration(i)*time.Millisecond), f); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	r, err := pcapgo.NewReader(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if r.LinkType() != layers.LinkTypeEthernet || r.Snaplen() != SnapLen {
		t.Fatalf("header: link %v snaplen %d", r.LinkType(), r.Snaplen())
	}
	for i, want := range frames {
		got, ci, err := r.ReadPacketData()
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) || ci.Length != len(want) || !ci.Timestamp.Equal(ts.Add(time.Duration(i)*time.Millisecond)) {
			t.Fatalf("frame %d: %d bytes at %v", i, len(got), ci.Timestamp)
		}
	}
}
