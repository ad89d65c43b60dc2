// Package pcapio writes Ethernet frames to a classic pcap stream (the format
// tcpdump, tshark and Wireshark read). Tools and tests share it so that every
// capture softmrc produces opens the same way; it is never on a hot path.
package pcapio

import (
	"fmt"
	"io"
	"os"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"github.com/google/gopacket/pcapgo"
)

// SnapLen is the snapshot length written in the file header: large enough for
// a 4096-byte MTU frame with two IPv6 headers, so nothing is ever cut.
const SnapLen = 65535

// Writer writes frames to a pcap stream. It is not safe for concurrent use.
type Writer struct {
	w *pcapgo.Writer
	c io.Closer // set by Create
}

// NewWriter writes the pcap file header (Ethernet link type, microsecond
// timestamps) to w and returns a Writer for the frames that follow.
func NewWriter(w io.Writer) (*Writer, error) {
	pw := pcapgo.NewWriter(w)
	if err := pw.WriteFileHeader(SnapLen, layers.LinkTypeEthernet); err != nil {
		return nil, fmt.Errorf("pcapio: writing the pcap file header: %w", err)
	}
	return &Writer{w: pw}, nil
}

// Create creates (or truncates) the file at path and returns a Writer on it;
// Close closes the file.
func Create(path string) (*Writer, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("pcapio: %w", err)
	}
	w, err := NewWriter(f)
	if err != nil {
		f.Close()
		return nil, err
	}
	w.c = f
	return w, nil
}

// WriteFrame appends one whole Ethernet frame captured at ts.
func (w *Writer) WriteFrame(ts time.Time, frame []byte) error {
	ci := gopacket.CaptureInfo{Timestamp: ts, CaptureLength: len(frame), Length: len(frame)}
	if err := w.w.WritePacket(ci, frame); err != nil {
		return fmt.Errorf("pcapio: writing a %d-byte frame: %w", len(frame), err)
	}
	return nil
}

// Close closes the underlying file when the Writer came from Create; for
// NewWriter it does nothing (the caller owns the io.Writer).
func (w *Writer) Close() error {
	if w.c == nil {
		return nil
	}
	return w.c.Close()
}
