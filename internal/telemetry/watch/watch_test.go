package watch

import (
	"bufio"
	"bytes"
	"context"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/softmrc/softmrc/internal/telemetry"
	"github.com/softmrc/softmrc/nic/daemon/daemontest"
)

// fakeSwitch serves the control-socket watch protocol: it answers the
// request and streams a sample of port "u0" every millisecond.
func fakeSwitch(t *testing.T) string {
	path := filepath.Join(t.TempDir(), "sw.sock")
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				if _, err := bufio.NewReader(c).ReadString('\n'); err != nil {
					return
				}
				c.Write([]byte("{\"ok\":true}\n"))
				s := telemetry.Sample{Source: "p0-t0-0", Kind: telemetry.KindSwitchPort, ID: "u0", Values: map[string]float64{}}
				for i := 0; i < 10000; i++ {
					s.T = telemetry.Now()
					s.Values[telemetry.KeyTxBytes] = float64(i)
					if _, err := c.Write(telemetry.AppendJSON(nil, &s)); err != nil {
						return
					}
					time.Sleep(time.Millisecond) // the fake's own cadence
				}
			}()
		}
	}()
	return path
}

// TestStreamBothDaemons: Stream recognises mrc-nicd's device socket and
// mrc-switchd's control socket by their type and gets samples from each;
// StreamAll merges them; Print stops after --count samples.
func TestStreamBothDaemons(t *testing.T) {
	pair, err := daemontest.Run(2)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pair.Close() })
	nic, sw := pair.Sock[0], fakeSwitch(t)
	for _, c := range []struct {
		path, kind, src string
	}{
		{nic, telemetry.KindNICPort, "h1"},
		{sw, telemetry.KindSwitchPort, "p0-t0-0"},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		var got telemetry.Sample
		err := Stream(ctx, c.path, time.Millisecond, func(s telemetry.Sample) {
			got = s
			cancel()
		})
		cancel()
		if err != nil || got.Kind != c.kind || got.Source != c.src {
			t.Errorf("%s: sample %+v, %v; want kind %s from %s", c.path, got, err, c.kind, c.src)
		}
	}

	ctx, cancel := context.WithCancel(context.Background())
	seen := map[string]int{}
	err = StreamAll(ctx, []string{nic, sw}, time.Millisecond, func(s telemetry.Sample) {
		seen[s.Kind]++
		if seen[telemetry.KindNICPort] >= 10 && seen[telemetry.KindSwitchPort] >= 10 {
			cancel()
		}
	})
	cancel()
	if err != nil || seen[telemetry.KindNICPort] < 10 || seen[telemetry.KindSwitchPort] < 10 {
		t.Errorf("StreamAll: %v, samples %v", err, seen)
	}

	var buf bytes.Buffer
	n, err := Print(context.Background(), &buf, nic, Options{Interval: time.Millisecond, Count: 7, Duration: 10 * time.Second})
	if err != nil || n != 7 || strings.Count(buf.String(), "\n") != 7 {
		t.Errorf("Print --count 7: %d samples, %v:\n%s", n, err, buf.String())
	}
	d := telemetry.NewDecoder(&buf)
	for i := 0; i < 7; i++ {
		var s telemetry.Sample
		if err := d.Decode(&s); err != nil {
			t.Fatalf("printed line %d: %v", i+1, err)
		}
	}

	// A socket nobody serves: a clear error, not a hang.
	ctx, cancel = context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := Stream(ctx, filepath.Join(t.TempDir(), "none.sock"), 0, func(telemetry.Sample) {}); err == nil ||
		!strings.Contains(err.Error(), "no daemon answers") {
		t.Errorf("Stream on a missing socket: %v, want 'no daemon answers'", err)
	}
}
