package xsk

import (
	"fmt"
	"net"
	"sync"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// CarrierEvent is a change of a link's usable state.
type CarrierEvent struct {
	Ifindex int
	Name    string
	// Up is true when the link is administratively up and has carrier
	// (IFF_UP and IFF_LOWER_UP): frames can flow.
	Up bool
}

// Carrier watches one interface's link state through netlink and reports
// every change of Up on Events (the first event is the state at start).
type Carrier struct {
	ifindex int
	events  chan CarrierEvent
	done    chan struct{}
	once    sync.Once
	wg      sync.WaitGroup
	mu      sync.Mutex
	up      bool
	err     error
}

// WatchCarrier starts watching ifindex. ns names the network namespace of the
// interface; nil means the calling thread's.
func WatchCarrier(ifindex int, ns *netns.NsHandle) (*Carrier, error) {
	c := &Carrier{ifindex: ifindex, events: make(chan CarrierEvent, 16), done: make(chan struct{})}
	updates := make(chan netlink.LinkUpdate, 64)
	err := netlink.LinkSubscribeWithOptions(updates, c.done, netlink.LinkSubscribeOptions{
		Namespace:    ns,
		ListExisting: true,
		ErrorCallback: func(err error) {
			c.mu.Lock()
			c.err = err
			c.mu.Unlock()
		},
	})
	if err != nil {
		return nil, fmt.Errorf("xsk: subscribe to link updates for ifindex %d: %w", ifindex, err)
	}
	c.wg.Add(1)
	go c.run(updates)
	return c, nil
}

func (c *Carrier) run(updates <-chan netlink.LinkUpdate) {
	defer c.wg.Done()
	defer close(c.events)
	first := true
	for u := range updates {
		a := u.Attrs()
		if a == nil || a.Index != c.ifindex {
			continue
		}
		up := u.Header.Type != unix.RTM_DELLINK && a.Flags&net.FlagUp != 0 && a.RawFlags&unix.IFF_LOWER_UP != 0
		c.mu.Lock()
		changed := first || up != c.up
		c.up, first = up, false
		c.mu.Unlock()
		if !changed {
			continue
		}
		// After Close nobody reads events: drop them, but keep draining
		// updates so the netlink goroutine can finish and close it.
		select {
		case c.events <- CarrierEvent{Ifindex: a.Index, Name: a.Name, Up: up}:
		case <-c.done:
		}
	}
}

// Events delivers state changes; it is closed after Close.
func (c *Carrier) Events() <-chan CarrierEvent { return c.events }

// Up returns the last known state.
func (c *Carrier) Up() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.up
}

// Err returns the last netlink receive error, if any.
func (c *Carrier) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// Close stops watching.
func (c *Carrier) Close() error {
	c.once.Do(func() { close(c.done) })
	go func() {
		// The subscription closes updates once its socket notices done;
		// drain so the receiver never blocks meanwhile.
		for range c.events {
		}
	}()
	return nil
}
