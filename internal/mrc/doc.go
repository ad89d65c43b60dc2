// Package mrc is the MRC transport engine of softmrc: reliable-connection
// queue pairs that carry RDMA Write and Write-with-Immediate, spray every
// packet over a set of entropy values (EVs, one fabric path each), recover
// losses selectively from SACKs and NACKs, treat trims as congestion and
// untrimmed loss as path failure, and route around failed paths and ports.
//
// The engine is sans-I/O: it never starts goroutines, never makes a system
// call, never reads a clock and never uses a global random source. Its
// caller hands it frames (HandlePacket), asks it for frames to send (Poll),
// and asks when it next needs attention (NextDeadline); the current time and a
// seeded *rand.Rand come from the caller. The same code therefore runs inside
// the AF_XDP daemon (nic/daemon) and inside the deterministic fabric
// simulator (internal/fabricsim), and a seed replays a run bit for bit.
//
// It lives in internal/ (not nic/transport) because it is a library with no
// dependency on the NIC: the simulator, the daemon and the benchmarks all use
// it, and none of its API is meant for code outside this module.
// docs/engine.md describes the state machines, timers, SACK coalescing and
// congestion-control constants.
//
// An Engine is not safe for concurrent use; one goroutine owns it.
package mrc
