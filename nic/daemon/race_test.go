//go:build race

package daemon_test

// raceEnabled: the race detector slows the engine loop several times over,
// so cadence floors in tests are looser under it.
const raceEnabled = true
