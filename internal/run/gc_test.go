package run

import (
	"bytes"
	"log/slog"
	"runtime/debug"
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
