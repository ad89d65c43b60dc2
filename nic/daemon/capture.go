package daemon

import (
	"bufio"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/softmrc/softmrc/internal/pcapio"
)

// capture writes the frames a NIC sends and receives to a pcap file (the
// software twin of a port mirror: AF_XDP traffic bypasses tcpdump's taps).
// With threads > 1 every engine thread's loop writes to the front's one
// capture, under mu; the front closes it.
type capture struct {
	mu   sync.Mutex
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
	if c == nil || (c.port >= 0 && port != c.port) {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.left <= 0 {
		return
	}
	c.left--
	_ = c.w.WriteFrame(time.Now(), b)
}

func (c *capture) close() error {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	err := c.bw.Flush()
	if cerr := c.f.Close(); err == nil {
		err = cerr
	}
	return err
}
