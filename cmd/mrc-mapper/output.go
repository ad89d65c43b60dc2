package main

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync"
	"time"

	"gonum.org/v1/plot/vg"

	"github.com/softmrc/softmrc/nic/fabricpic"
	"github.com/softmrc/softmrc/nic/pathprobe"
)

// promMap serves the latest map of watch as Prometheus metrics. A nil
// *promMap ignores set (watch without --metrics).
type promMap struct {
	mu    sync.Mutex
	links []pathprobe.Link
	srv   *http.Server
	addr  string
}

func serveMetrics(addr string) (*promMap, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--metrics %s: %w", addr, err)
	}
	m := &promMap{addr: ln.Addr().String()}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /metrics", func(w http.ResponseWriter, r *http.Request) {
		m.mu.Lock()
		links := m.links
		m.mu.Unlock()
		var b bytes.Buffer
		writeProm(&b, links)
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		w.Write(b.Bytes())
	})
	m.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		if err := m.srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			slog.Error("mrc-mapper --metrics", "err", err)
		}
	}()
	slog.Info("mrc-mapper metrics", "url", "http://"+m.addr+"/metrics")
	return m, nil
}

func (m *promMap) set(links []pathprobe.Link) {
	if m == nil {
		return
	}
	m.mu.Lock()
	m.links = links
	m.mu.Unlock()
}

func (m *promMap) close() { m.srv.Close() }

// writePNG draws the map into file (fabricpic).
func writePNG(file string, links []pathprobe.Link) error {
	nBad := 0
	for _, l := range links {
		if l.State != pathprobe.Good {
			nBad++
		}
	}
	f, err := os.Create(file)
	if err != nil {
		return fmt.Errorf("--png: %w", err)
	}
	title := fmt.Sprintf("mrc-mapper link map %s: %d of %d not good", time.Now().UTC().Format("2006-01-02 15:04:05Z"), nBad, len(links))
	if err := fabricpic.Write(f, links, title, 10*vg.Inch, 4*vg.Inch); err != nil {
		f.Close()
		return fmt.Errorf("--png %s: %w", file, err)
	}
	return f.Close()
}
