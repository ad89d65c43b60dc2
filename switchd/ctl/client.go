package ctl

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"time"
)

// MaxLine bounds one protocol line (a stats answer for 64 ports is ~30 KB).
const MaxLine = 1 << 20

// Client talks to one mrc-switchd control socket. Its methods are not safe
// for concurrent use; open one Client per goroutine.
type Client struct {
	path string
	conn net.Conn
	r    *bufio.Reader
}

// Dial connects to the control socket at path.
func Dial(ctx context.Context, path string) (*Client, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", path)
	if err != nil {
		return nil, fmt.Errorf("connect to mrc-switchd control socket %s (is the daemon running? see --ctl): %w", path, err)
	}
	return &Client{path: path, conn: c, r: bufio.NewReaderSize(c, 64<<10)}, nil
}

// Close closes the connection.
func (c *Client) Close() error { return c.conn.Close() }

// Do sends req and returns the response. A response with OK false is
// returned as an error too.
func (c *Client) Do(ctx context.Context, req Request) (*Response, error) {
	if dl, ok := ctx.Deadline(); ok {
		c.conn.SetDeadline(dl)
	} else {
		c.conn.SetDeadline(time.Time{})
	}
	b, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	if _, err := c.conn.Write(append(b, '\n')); err != nil {
		return nil, fmt.Errorf("send %s to %s: %w", req.Cmd, c.path, err)
	}
	line, err := readLine(c.r)
	if err != nil {
		return nil, fmt.Errorf("read answer to %s from %s: %w", req.Cmd, c.path, err)
	}
	var resp Response
	if err := json.Unmarshal(line, &resp); err != nil {
		return nil, fmt.Errorf("bad answer to %s from %s: %w", req.Cmd, c.path, err)
	}
	if !resp.OK {
		return &resp, fmt.Errorf("mrc-switchd: %s", resp.Error)
	}
	return &resp, nil
}

// readLine reads one newline-terminated line of at most MaxLine bytes.
func readLine(r *bufio.Reader) ([]byte, error) {
	var out []byte
	for {
		chunk, err := r.ReadSlice('\n')
		out = append(out, chunk...)
		if len(out) > MaxLine {
			return nil, fmt.Errorf("line longer than %d bytes", MaxLine)
		}
		if err == nil {
			return out, nil
		}
		if !errors.Is(err, bufio.ErrBufferFull) {
			return nil, err
		}
	}
}

// ReadLine is readLine for the server side.
func ReadLine(r *bufio.Reader) ([]byte, error) { return readLine(r) }

// Ready asks whether the switch is programmed and forwarding.
func (c *Client) Ready(ctx context.Context) (*Ready, error) {
	resp, err := c.Do(ctx, Request{Cmd: CmdReady})
	if err != nil {
		return nil, err
	}
	if resp.Ready == nil {
		return nil, errors.New("mrc-switchd: empty ready answer")
	}
	return resp.Ready, nil
}

// Stats returns the switch's counters and state.
func (c *Client) Stats(ctx context.Context) (*Stats, error) {
	resp, err := c.Do(ctx, Request{Cmd: CmdStats})
	if err != nil {
		return nil, err
	}
	if resp.Stats == nil {
		return nil, errors.New("mrc-switchd: empty stats answer")
	}
	return resp.Stats, nil
}

// Routes returns the FIB.
func (c *Client) Routes(ctx context.Context) ([]Route, error) {
	resp, err := c.Do(ctx, Request{Cmd: CmdRoutes})
	if err != nil {
		return nil, err
	}
	return resp.Routes, nil
}

// SetFault injects or clears a fault.
func (c *Client) SetFault(ctx context.Context, f Fault) error {
	_, err := c.Do(ctx, Request{Cmd: CmdFault, Fault: &f})
	return err
}

// Detach asks the daemon to remove its programs, links and pins and exit.
func (c *Client) Detach(ctx context.Context) error {
	_, err := c.Do(ctx, Request{Cmd: CmdDetach})
	return err
}

// WaitReady polls the socket at path until the daemon answers ready or ctx
// ends. It is what a launcher calls after starting mrc-switchd.
func WaitReady(ctx context.Context, path string) (*Ready, error) {
	var last error
	for {
		c, err := Dial(ctx, path)
		if err == nil {
			r, err := c.Ready(ctx)
			c.Close()
			if err == nil && r.Ready {
				return r, nil
			}
			if err == nil {
				err = errors.New("daemon answers but is not ready yet")
			}
			last = err
		} else {
			last = err
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("mrc-switchd at %s not ready: %w (last: %v)", path, ctx.Err(), last)
		case <-time.After(20 * time.Millisecond):
		}
	}
}
