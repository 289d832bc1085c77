package cli

import (
	"bytes"
	"log/slog"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/vllmstat/vllmstat/internal/scrape"
	"github.com/vllmstat/vllmstat/internal/step"
)

// countingObserver counts the target changes passed on to it.
type countingObserver struct{ changes *int }

func (countingObserver) Scraped(*scrape.Result)         {}
func (countingObserver) Skipped(string)                 {}
func (countingObserver) StepClosed(*step.Record)        {}
func (o countingObserver) TargetsChanged(_, _ []string) { *o.changes++ }

// TestMemoryLimit checks that without GOMEMLIMIT the soft limit follows the number of targets
// as they come and go, that the run gives back the limit it found, and that with GOMEMLIMIT set
// the run leaves the limit alone.
func TestMemoryLimit(t *testing.T) {
	before := debug.SetMemoryLimit(-1)
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	var changes int

	t.Setenv("GOMEMLIMIT", "")
	m := newMemoryLimit(log)
	if got := debug.SetMemoryLimit(-1); got != baseMemoryLimit {
		t.Errorf("without targets the limit is %d, want %d", got, baseMemoryLimit)
	}
	o := limitObserver{Observer: countingObserver{&changes}, limit: m}
	o.TargetsChanged(make([]string, 1000), nil)
	if got, want := debug.SetMemoryLimit(-1), int64(baseMemoryLimit+1000*perTargetMemory); got != want {
		t.Errorf("with 1,000 targets the limit is %d, want %d", got, want)
	}
	o.TargetsChanged(make([]string, 10), make([]string, 910))
	if got, want := debug.SetMemoryLimit(-1), int64(baseMemoryLimit+100*perTargetMemory); got != want {
		t.Errorf("with 100 targets the limit is %d, want %d", got, want)
	}
	if changes != 2 {
		t.Errorf("the observer behind got %d changes, want 2", changes)
	}
	m.restore()
	if got := debug.SetMemoryLimit(-1); got != before {
		t.Errorf("restored limit is %d, want %d", got, before)
	}

	// The runtime read GOMEMLIMIT at start; a run leaves what it set alone.
	t.Setenv("GOMEMLIMIT", "1GiB")
	m = newMemoryLimit(log)
	limitObserver{Observer: countingObserver{&changes}, limit: m}.TargetsChanged(make([]string, 1000), nil)
	m.restore()
	if got := debug.SetMemoryLimit(-1); got != before {
		t.Errorf("with GOMEMLIMIT set the limit became %d, want %d", got, before)
	}
	if !strings.Contains(logs.String(), "per_target_kib=96") || !strings.Contains(logs.String(), "limit=1GiB") {
		t.Errorf("log does not say the limits:\n%s", logs.String())
	}
}
