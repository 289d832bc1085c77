package cli

import (
	"bytes"
	"log/slog"
	"runtime/debug"
	"strings"
	"testing"
)

func TestMemoryLimit(t *testing.T) {
	before := debug.SetMemoryLimit(-1)
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))

	t.Setenv("GOMEMLIMIT", "")
	restore := setMemoryLimit(log)
	if got := debug.SetMemoryLimit(-1); got != defaultMemoryLimit {
		t.Errorf("without GOMEMLIMIT the limit is %d, want %d", got, defaultMemoryLimit)
	}
	restore()
	if got := debug.SetMemoryLimit(-1); got != before {
		t.Errorf("restored limit is %d, want %d", got, before)
	}

	// The runtime read GOMEMLIMIT at start; a run leaves what it set alone.
	t.Setenv("GOMEMLIMIT", "1GiB")
	setMemoryLimit(log)()
	if got := debug.SetMemoryLimit(-1); got != before {
		t.Errorf("with GOMEMLIMIT set the limit became %d, want %d", got, before)
	}
	if !strings.Contains(logs.String(), "limit_mib=80") || !strings.Contains(logs.String(), "limit=1GiB") {
		t.Errorf("log does not say the limits:\n%s", logs.String())
	}
}
