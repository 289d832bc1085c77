package run

import (
	"log/slog"
	"os"
	"runtime/debug"
	"runtime/metrics"
	"sync/atomic"
	"time"
)

// burst is how many targets are scraped together at most, about: a fleet of more is spread
// over the interval in bursts of this size (see scrape.Options.Burst).
const burst = 128

// spread is how much of each scrape interval a fleet's scrapes are spread over. A fleet of
// hundreds of targets is scraped over half the interval in bursts of at most about burst
// targets rather than all at once; a small one gains nothing from it and keeps its samples
// aligned. The pool decides as targets come and go (discovery, the API), not from the start's
// count.
func spread(interval time.Duration) time.Duration { return interval / 2 }

// The API server's timeouts for reading a request and keeping a connection. Its requests are
// small (a step end, a phase, a list of targets), so a client still sending one after this
// long is stuck or hostile, and must not hold a connection and its goroutine; a trainer's
// client idle between steps reconnects when its connection was closed.
const (
	apiReadHeaderTimeout = 5 * time.Second
	apiReadTimeout       = 10 * time.Second
	apiIdleTimeout       = 2 * time.Minute
)

// apiWriteTimeout bounds an answer. Ending a step waits for a boundary scrape of every target,
// at most twice the scrape timeout, so the answer's time is that plus room for the step's
// close.
func apiWriteTimeout(scrapeTimeout time.Duration) time.Duration {
	return 2*scrapeTimeout + 30*time.Second
}

// apiShutdownTimeout bounds the API's shutdown at exit: a request still running then (a step
// end can take twice the scrape timeout) is cut off rather than hold the exit.
const apiShutdownTimeout = 5 * time.Second

// drainTimeout bounds the sinks' drain at exit, once the collector has written the last step: a
// dead tracker (a W&B or remote-write endpoint that stopped answering) cannot hold the exit
// longer; what is left is dropped and counted.
const drainTimeout = 10 * time.Second

// defaultGCPercent is the garbage collector's target (the Go runtime's GOGC) of a run whose
// environment sets neither GOGC nor GOMEMLIMIT: the heap may grow to 1.2 times what is live
// before a collection, instead of twice.
//
// vllmstat runs beside the engines as a sidecar, where its resident memory is what it costs.
// What is live grows with the fleet (each target holds its parser's memory of its last page
// and its goroutine) and with the open step (its samples), so a fixed soft memory limit is a
// trap: once the live heap nears it, the collector runs nearly all the time. Scraping makes
// little garbage (parsing a page like the last one allocates nothing), so a low target costs
// little CPU. Measured at 1,000 targets at 2 Hz with 30 s steps: 75 µs per scrape at 133 MiB
// resident with GOGC=50, 76 µs at 121 MiB with 25; with 10, 95 µs and ticks skipped. Once a
// scrape made less garbage (no timer and no result on the heap per scrape), 20 against 25 in
// runs taken in turn: 101 and 104 MiB against 113 and 113, 86 and 98 µs per scrape against 89
// and 93 (the runs' own spread).
const defaultGCPercent = 20

// returnStartMemory gives the memory of a fleet's start back to the system once its first pages
// are in. Those are its most expensive pages (full, read and learnt in full, all in the first
// seconds), and the heap they grew stays mapped long after, the runtime returning free memory
// a little at a time: at 5,000 targets, 75 MB of free heap were still resident a minute in. It
// costs one collection, once.
func returnStartMemory() { debug.FreeOSMemory() }

// SetGC sets defaultGCPercent unless the environment tunes the collector, and returns what
// restores the previous setting. It is the process's: a command that runs the pipeline for as
// long as the process lives calls it, not a test or a demo.
func SetGC(log *slog.Logger) (restore func()) {
	if gogc, limit := os.Getenv("GOGC"), os.Getenv("GOMEMLIMIT"); gogc != "" || limit != "" {
		log.Info("garbage collector tuned by the environment", "GOGC", gogc, "GOMEMLIMIT", limit)
		return func() {}
	}
	prev := debug.SetGCPercent(defaultGCPercent)
	gcOwned.Store(true)
	log.Info("garbage collector target (set GOGC or GOMEMLIMIT to change it)", "gogc", defaultGCPercent)
	return func() { gcOwned.Store(false); debug.SetGCPercent(prev) }
}

// boundaryGCPercent is the collector's target while a boundary's scrapes are in flight: the
// trainer waits for them, every target answers at once, and at defaultGCPercent the heap's
// growth in that burst started collections in the middle of it. At 1,000 targets
// (scripts/bench-stepend), a step end took p50 84-103 ms and p99 110-148 ms with it, against
// 110-139 and 150-212 without it (five runs of each, taken in turn); at 10,000 engines with a
// step every 20 s, the resident size was unchanged (mean 340 MiB against 336).
const boundaryGCPercent = 200

// gcOwned is set while SetGC's target holds: the run owns the collector's target, which
// boundaryGC then raises for a boundary. A process that did not call SetGC (a test, a demo)
// keeps its own.
var gcOwned atomic.Bool

// boundaryGC is the collector's Options.Boundary: it holds the garbage collector back while a
// boundary's scrapes are in flight, when the run owns its target.
func boundaryGC() func() {
	if !gcOwned.Load() {
		return func() {}
	}
	debug.SetGCPercent(boundaryGCPercent)
	return func() {
		if gcOwned.Load() {
			debug.SetGCPercent(defaultGCPercent)
			returnBurstMemory()
		}
	}
}

// returnBurstAt is how much a boundary's burst must have allocated beyond what was live at the
// last collection for the run to give the memory back to the system at once, once collected.
// Held back at boundaryGCPercent, the burst grows the heap to up to three times what is live,
// and the runtime returns the free heap a little at a time: at 10,000 engines with a step every
// 20 s, returning it at every boundary's end gave a mean resident size of 290 and 295 MiB
// against 305 and 310 without (runs taken in turn), and this threshold is passed at each of
// those step ends (229 MB of heap collected to 121, about 90 ms of CPU). A burst that leaves
// less than this costs nothing.
const returnBurstAt = 32 << 20

// returning is set while a collection started by returnBurstMemory runs: boundaries that close
// meanwhile start none.
var returning atomic.Bool

// returnBurstMemory collects and returns the free heap to the system, on a goroutine of its own
// (the collection takes tens of milliseconds at 10,000 engines, which the collector's goroutine
// does not wait for), when the heap holds at least returnBurstAt more than was live.
func returnBurstMemory() {
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}, {Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	if s[0].Value.Uint64() < s[1].Value.Uint64()+returnBurstAt || !returning.CompareAndSwap(false, true) {
		return
	}
	go func() {
		defer returning.Store(false)
		debug.FreeOSMemory()
	}()
}
