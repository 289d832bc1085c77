//go:build race

package report

// raceEnabled: the race detector slows the large report tenfold, so its test embeds fewer steps.
const raceEnabled = true
