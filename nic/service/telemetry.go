package service

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/softmrc/softmrc/nic/vproto"
)

// Watcher is implemented by a NIC that streams telemetry (mrc-nicd's
// daemon). Watch starts sending the caller's session message bodies of
// JSON Lines samples through push: every port, and the QPs the caller may
// inspect (all of them for an admin, else the session's own, as for
// mrcctl's other commands). push does not block and reports false when it dropped the
// body because the subscriber reads too slowly, except with wait set
// (bodies that must arrive, such as a QP's final sample), when it waits up
// to teleWait for room. stop ends the subscription. A second Watch of the
// same owner replaces the first.
type Watcher interface {
	Watch(caller Caller, interval time.Duration, push func(body []byte, wait bool) bool) (info vproto.WatchInfo, stop func(), err error)
}

// teleQueue is the telemetry messages (10 ms of samples each at most
// intervals) a session may have waiting for its socket; beyond it, samples
// are dropped (counted in TelemetryDropped) rather than held: a subscriber
// that reads slowly loses samples, never slows the NIC.
const teleQueue = 64

// teleWait bounds how long a body that must arrive waits for room.
const teleWait = time.Second

// watch handles TypeWatch.
func (ss *session) watch(body []byte) (any, error) {
	w, ok := ss.svc.nic.(Watcher)
	if !ok {
		return nil, errors.New("watch: this NIC does not stream telemetry")
	}
	var req vproto.Watch
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, fmt.Errorf("bad watch request: %w", err)
	}
	ss.mu.Lock()
	if ss.tele == nil {
		ss.tele = make(chan []byte, teleQueue)
		ss.svc.wg.Add(1)
		go ss.teleLoop(ss.tele)
	}
	ch := ss.tele
	old := ss.teleStop
	ss.teleStop = nil
	ss.mu.Unlock()
	if old != nil {
		old()
	}
	info, stop, err := w.Watch(ss.caller(), time.Duration(req.IntervalNS), func(body []byte, wait bool) bool {
		var h [vproto.HeaderLen]byte
		vproto.PutHeader(h[:], vproto.Header{Type: vproto.TypeTelemetry, Version: vproto.Version})
		msg := append(h[:len(h):len(h)], body...)
		select {
		case <-ss.done:
			return false
		case ch <- msg:
			return true
		default:
		}
		if wait {
			t := time.NewTimer(teleWait)
			defer t.Stop()
			select {
			case <-ss.done:
				return false
			case ch <- msg:
				return true
			case <-t.C:
			}
		}
		ss.svc.TelemetryDropped.Add(1)
		return false
	})
	if err != nil {
		return nil, fmt.Errorf("watch: %w", err)
	}
	ss.mu.Lock()
	ss.teleStop = stop
	ss.mu.Unlock()
	return info, nil
}

// stopWatch ends the session's subscription, if any.
func (ss *session) stopWatch() {
	ss.mu.Lock()
	stop := ss.teleStop
	ss.teleStop = nil
	ss.mu.Unlock()
	if stop != nil {
		stop()
	}
}

// teleLoop writes queued telemetry messages until the session ends.
func (ss *session) teleLoop(ch chan []byte) {
	defer ss.svc.wg.Done()
	for {
		select {
		case <-ss.done:
			return
		case msg := <-ch:
			ss.wmu.Lock()
			_, err := ss.conn.Write(msg)
			ss.wmu.Unlock()
			if err != nil {
				ss.end()
				return
			}
		}
	}
}
