//go:build race

package pathprobe

// raceEnabled: the race detector slows TestDetectionRounds' simulation
// tenfold and finds nothing in it (one goroutine), so it runs fewer trials.
const raceEnabled = true
