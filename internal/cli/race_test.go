//go:build race

package cli

// raceEnabled: the race detector slows a run several times over, so the large-change tests
// give it fewer targets.
const raceEnabled = true
