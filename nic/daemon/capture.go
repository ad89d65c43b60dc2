package daemon

import (
	"bufio"
	"fmt"
	"os"
	"time"

	"github.com/softmrc/softmrc/internal/pcapio"
)

// capture writes the frames a NIC sends and receives to a pcap file (the
// software twin of a port mirror: AF_XDP traffic bypasses tcpdump's taps).
// Only the loop goroutine uses it.
type capture struct {
	f    *os.File
	bw   *bufio.Writer
	w    *pcapio.Writer
	port int // index into ports, -1 = all
	left int
}

func newCapture(path string, port, max int) (*capture, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("capture: %w", err)
	}
	bw := bufio.NewWriterSize(f, 1<<20)
	w, err := pcapio.NewWriter(bw)
	if err != nil {
		f.Close()
		return nil, err
	}
	return &capture{f: f, bw: bw, w: w, port: port, left: max}, nil
}

func (c *capture) frame(port int, b []byte) {
	if c == nil || c.left <= 0 || (c.port >= 0 && port != c.port) {
		return
	}
	c.left--
	_ = c.w.WriteFrame(time.Now(), b)
}

func (c *capture) close() error {
	if c == nil {
		return nil
	}
	err := c.bw.Flush()
	if cerr := c.f.Close(); err == nil {
		err = cerr
	}
	return err
}
