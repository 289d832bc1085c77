package cli

import (
	"log/slog"
	"os"
	"runtime/debug"
)

// defaultMemoryLimit is a run's soft memory limit (the Go runtime's GOMEMLIMIT) when the
// environment sets none. vllmstat runs beside the engines as a sidecar, where its resident
// memory is what it costs; left alone, the garbage collector lets the heap grow to twice what
// is live before collecting, so a run holding 60 MiB would sit at 120 MiB or more. Under the
// limit it collects more often instead (a soft limit never fails an allocation, and the runtime
// caps the collector's share of the CPU when the live heap itself is over it). 80 MiB keeps a
// run of 1,000 engines at 2 Hz with 10-minute steps under 100 MiB resident; a bigger fleet, or
// timelines, plots and per_worker records, need a higher GOMEMLIMIT.
const defaultMemoryLimit = 80 << 20

// setMemoryLimit gives the runtime defaultMemoryLimit unless GOMEMLIMIT is set, and returns
// what restores the previous limit.
func setMemoryLimit(log *slog.Logger) (restore func()) {
	if v := os.Getenv("GOMEMLIMIT"); v != "" {
		log.Info("soft memory limit from GOMEMLIMIT", "limit", v)
		return func() {}
	}
	prev := debug.SetMemoryLimit(defaultMemoryLimit)
	log.Info("soft memory limit (set GOMEMLIMIT to change it)", "limit_mib", defaultMemoryLimit>>20)
	return func() { debug.SetMemoryLimit(prev) }
}
