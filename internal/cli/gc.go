package cli

import (
	"log/slog"
	"os"
	"runtime/debug"
)

// defaultGCPercent is the garbage collector's target (the Go runtime's GOGC) of a run whose
// environment sets neither GOGC nor GOMEMLIMIT: the heap may grow to 1.5 times what is live
// before a collection, instead of twice.
//
// vllmstat runs beside the engines as a sidecar, where its resident memory is what it costs.
// What is live grows with the fleet (each target holds its parser's memory of its last page,
// connection buffers and goroutines) and with the open step (its samples), so a fixed soft
// memory limit is a trap: once the live heap nears it, the collector runs nearly all the time.
// Measured at 1,000 targets at 2 Hz with 10-minute steps: a limit of 142 MiB held 150 MiB
// resident while the CPU per scrape rose from 160 to 230 µs within two minutes as the step
// grew; GOGC=50 held the CPU at about 150 µs, the resident memory following what is live
// (160 MiB, growing by the step's samples). A run that must stay under a size sets GOMEMLIMIT.
const defaultGCPercent = 50

// setGC sets defaultGCPercent unless the environment tunes the collector, and returns what
// restores the previous setting.
func setGC(log *slog.Logger) (restore func()) {
	if gogc, limit := os.Getenv("GOGC"), os.Getenv("GOMEMLIMIT"); gogc != "" || limit != "" {
		log.Info("garbage collector tuned by the environment", "GOGC", gogc, "GOMEMLIMIT", limit)
		return func() {}
	}
	prev := debug.SetGCPercent(defaultGCPercent)
	log.Info("garbage collector target (set GOGC or GOMEMLIMIT to change it)", "gogc", defaultGCPercent)
	return func() { debug.SetGCPercent(prev) }
}
