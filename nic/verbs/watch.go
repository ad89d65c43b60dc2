package verbs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/softmrc/softmrc/internal/telemetry"
	"github.com/softmrc/softmrc/nic/vproto"
)

// Watch streams mrc-nicd's telemetry: it opens its own session on the
// device socket at path, subscribes at interval (0: 10 ms; 1 ms to 10 s)
// and calls fn with every sample (one per QP and per NIC port per
// interval, docs/telemetry.md) until ctx ends, which returns nil, or the
// daemon goes away, which returns why. fn runs on Watch's goroutine; a slow
// fn makes the daemon drop samples for this subscriber, never slows the NIC.
func Watch(ctx context.Context, path string, interval time.Duration, fn func(telemetry.Sample)) error {
	var dl net.Dialer
	nc, err := dl.DialContext(ctx, "unixpacket", path)
	if err != nil {
		return fmt.Errorf("verbs: watch %s: %w (is mrc-nicd running with this device_socket?)", path, err)
	}
	c := nc.(*net.UnixConn)
	defer c.Close()
	stop := context.AfterFunc(ctx, func() { c.SetReadDeadline(time.Unix(1, 0)) })
	defer stop()
	buf := make([]byte, vproto.MaxMessage)
	call := func(t vproto.Type, seq uint32, req, out any) error {
		msg, err := vproto.AppendJSON(nil, t, seq, req)
		if err != nil {
			return err
		}
		if _, err := c.Write(msg); err != nil {
			return err
		}
		for {
			n, err := c.Read(buf)
			if err != nil {
				return err
			}
			h, err := vproto.ParseHeader(buf[:n])
			if err != nil {
				return err
			}
			if h.Type != vproto.TypeReply || h.Seq != seq {
				continue
			}
			var r vproto.Reply
			if err := json.Unmarshal(buf[vproto.HeaderLen:n], &r); err != nil {
				return fmt.Errorf("bad reply: %w", err)
			}
			if r.Error != "" {
				return errors.New(r.Error)
			}
			if out != nil {
				return json.Unmarshal(r.Body, out)
			}
			return nil
		}
	}
	var info DeviceInfo
	if err := call(vproto.TypeHello, 1, vproto.Hello{Version: vproto.Version, Client: filepath.Base(os.Args[0]) + " (watch)",
		PID: os.Getpid()}, &info); err != nil {
		return watchErr(ctx, path, "hello", err)
	}
	var wi vproto.WatchInfo
	if err := call(vproto.TypeWatch, 2, vproto.Watch{IntervalNS: int64(interval)}, &wi); err != nil {
		return watchErr(ctx, path, "subscribe", err)
	}
	for {
		n, err := c.Read(buf)
		if err != nil || n == 0 {
			if err == nil {
				err = errors.New("EOF")
			}
			return watchErr(ctx, path, "read", fmt.Errorf("%w: %v", ErrDeviceGone, err))
		}
		h, err := vproto.ParseHeader(buf[:n])
		if err != nil {
			return watchErr(ctx, path, "read", err)
		}
		switch h.Type {
		case vproto.TypeTelemetry:
			if err := telemetry.ParseLines(buf[vproto.HeaderLen:n], func(s *telemetry.Sample) { fn(*s) }); err != nil {
				return watchErr(ctx, path, "decode", err)
			}
		case vproto.TypeFatal:
			var r vproto.Reply
			_ = json.Unmarshal(buf[vproto.HeaderLen:n], &r)
			return watchErr(ctx, path, "read", fmt.Errorf("%w: %s", ErrDeviceGone, r.Error))
		}
		if ctx.Err() != nil {
			return nil
		}
	}
}

// watchErr is nil when ctx ended (the caller stopped the watch), else err
// with what failed.
func watchErr(ctx context.Context, path, what string, err error) error {
	if ctx.Err() != nil {
		return nil
	}
	return fmt.Errorf("verbs: watch %s: %s: %w", path, what, err)
}
