//go:build !race

package pathprobe

const raceEnabled = false
