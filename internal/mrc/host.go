package mrc

import "github.com/softmrc/softmrc/internal/wire"

// SimHost adapts an Engine to drivers that count time in int64 nanoseconds
// and report carrier changes as PortDown/PortUp (internal/fabricsim's Host
// interface), so that a simulator needs no adapter of its own.
type SimHost struct{ E *Engine }

// HandlePacket forwards to Engine.HandlePacket.
func (h SimHost) HandlePacket(now int64, port wire.Plane, frame []byte) {
	h.E.HandlePacket(Time(now), port, frame)
}

// Poll forwards to Engine.Poll.
func (h SimHost) Poll(now int64, emit func(port wire.Plane, frame []byte)) { h.E.Poll(Time(now), emit) }

// NextDeadline forwards to Engine.NextDeadline (math.MaxInt64 = none).
func (h SimHost) NextDeadline() int64 { return int64(h.E.NextDeadline()) }

// PortDown reports a local port's carrier loss.
func (h SimHost) PortDown(now int64, p wire.Plane) { h.E.SetPortState(Time(now), p, false) }

// PortUp reports a local port's carrier return.
func (h SimHost) PortUp(now int64, p wire.Plane) { h.E.SetPortState(Time(now), p, true) }
