//go:build race

package run

// raceEnabled: the race detector slows this test process (the subscriber)
// several times over, so cadence floors are looser under it.
const raceEnabled = true
