package run

import (
	"bytes"
	"log/slog"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strings"
	"testing"
)

// TestSetGC checks that a run sets its collector target unless the environment tunes the
// collector, and gives back the setting it found.
func TestSetGC(t *testing.T) {
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))

	t.Setenv("GOGC", "")
	t.Setenv("GOMEMLIMIT", "")
	before := debug.SetGCPercent(100)
	defer debug.SetGCPercent(before)
	restore := SetGC(log)
	if got := debug.SetGCPercent(defaultGCPercent); got != defaultGCPercent {
		t.Errorf("without GOGC and GOMEMLIMIT the target is %d, want %d", got, defaultGCPercent)
	}
	restore()
	if got := debug.SetGCPercent(100); got != 100 {
		t.Errorf("restored target is %d, want 100", got)
	}

	for _, env := range []string{"GOGC", "GOMEMLIMIT"} {
		t.Run(env, func(t *testing.T) {
			t.Setenv(env, map[string]string{"GOGC": "200", "GOMEMLIMIT": "1GiB"}[env])
			SetGC(log)()
			if got := debug.SetGCPercent(100); got != 100 {
				t.Errorf("with %s set the target became %d", env, got)
			}
		})
	}
	if !strings.Contains(logs.String(), "gogc=20") || !strings.Contains(logs.String(), "GOMEMLIMIT=1GiB") {
		t.Errorf("log does not say the settings:\n%s", logs.String())
	}
}

// TestBoundaryGC: a boundary raises the run's collector target while its scrapes are in
// flight and sets it back after; a process whose target the run does not own keeps its own.
func TestBoundaryGC(t *testing.T) {
	t.Setenv("GOGC", "")
	t.Setenv("GOMEMLIMIT", "")
	before := debug.SetGCPercent(100)
	defer debug.SetGCPercent(before)

	end := boundaryGC() // not owned: nothing changes
	if got := debug.SetGCPercent(100); got != 100 {
		t.Errorf("without SetGC a boundary set the target to %d", got)
	}
	end()

	restore := SetGC(slog.New(slog.DiscardHandler))
	end = boundaryGC()
	if got := debug.SetGCPercent(boundaryGCPercent); got != boundaryGCPercent {
		t.Errorf("in a boundary the target is %d, want %d", got, boundaryGCPercent)
	}
	end()
	if got := debug.SetGCPercent(defaultGCPercent); got != defaultGCPercent {
		t.Errorf("after a boundary the target is %d, want %d", got, defaultGCPercent)
	}
	restore()
	if got := debug.SetGCPercent(100); got != 100 {
		t.Errorf("restored target is %d, want 100", got)
	}
}

// TestBoundaryReturnsItsBurst: a boundary whose burst left more garbage than returnBurstAt has
// its memory collected and given back to the system once it ends; one that left little starts
// no collection.
func TestBoundaryReturnsItsBurst(t *testing.T) {
	t.Setenv("GOGC", "")
	t.Setenv("GOMEMLIMIT", "")
	restore := SetGC(slog.New(slog.DiscardHandler))
	defer restore()
	resident := func() uint64 { // the heap's memory not given back to the system
		s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}, {Name: "/memory/classes/heap/unused:bytes"}, {Name: "/memory/classes/heap/free:bytes"}}
		metrics.Read(s)
		return s[0].Value.Uint64() + s[1].Value.Uint64() + s[2].Value.Uint64()
	}
	runtime.GC()
	end := boundaryGC()
	end() // nothing allocated
	if returning.Load() {
		t.Error("a boundary that allocated nothing started a collection")
	}

	// What is live before the boundary, enough that the burst, held back at boundaryGCPercent,
	// runs no collection: its answers all in memory at once, then all garbage, as a step
	// end's are.
	live := make([][]byte, 3*returnBurstAt>>20/2)
	for i := range live {
		live[i] = make([]byte, 1<<20)
	}
	debug.FreeOSMemory()
	before := resident()
	end = boundaryGC()
	answers := make([][]byte, 2*returnBurstAt>>20)
	for i := range answers {
		answers[i] = make([]byte, 1<<20)
	}
	burstGarbage, answers = answers, nil
	burstGarbage = nil
	end()
	for returning.Load() { // the collection runs on a goroutine of its own
		runtime.Gosched()
	}
	if got := resident(); got > before+returnBurstAt/2 {
		t.Errorf("after a burst of %d MiB, the heap holds %d MiB more than before it, want less than %d", 2*returnBurstAt>>20, (got-before)>>20, returnBurstAt>>21)
	}
	runtime.KeepAlive(live)
}

// burstGarbage keeps the test's allocations from being optimised away.
var burstGarbage [][]byte
