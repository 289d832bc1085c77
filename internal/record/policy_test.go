package record

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestPolicyEvents: the trainer's publishes and the engines' reported versions are written,
// read back and replayed as their tracker calls, a reported version of 0 and "reports none"
// kept apart.
func TestPolicyEvents(t *testing.T) {
	const a = "http://a:8000/metrics"
	path := filepath.Join(t.TempDir(), "rec.jsonl.gz")
	w, err := Create(path, WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	must(t, w.Start(t0))
	must(t, w.Policy(t0.Add(time.Second), 0))
	must(t, w.EngineVersion(t0.Add(2*time.Second), a, 0, true))
	must(t, w.Policy(t0.Add(3*time.Second), 7))
	must(t, w.EngineVersion(t0.Add(4*time.Second), a, 7, true))
	must(t, w.EngineVersion(t0.Add(5*time.Second), a, 0, false))
	must(t, w.ServerVersion(t0.Add(6*time.Second), a, "http://s:30000", 7, true))
	must(t, w.ServerVersion(t0.Add(7*time.Second), a, "http://s:30000", 0, false))
	must(t, w.Close())

	r, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	log := &callLog{t0: t0}
	if err := Replay(r, log, ReplayOptions{}); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"begin 0",
		"publish 0 1",
		"engine version 2 " + a + " 0",
		"publish 7 3",
		"engine version 4 " + a + " 7",
		"engine version 5 " + a + " none",
		"server version 6 " + a + " http://s:30000 7",
		"server version 7 " + a + " http://s:30000 none",
	}
	if !slices.Equal(log.calls, want) {
		t.Errorf("calls:\n%s\nwant:\n%s", strings.Join(log.calls, "\n"), strings.Join(want, "\n"))
	}
}

// TestPolicyEventLines: a policy event needs its version, an engine_version event its target;
// a version that does not grow stops replay with its line.
func TestPolicyEventLines(t *testing.T) {
	for _, tt := range []struct{ name, in, errHas string }{
		{"policy without version", `{"kind":"policy","ts":"2026-01-01T00:00:00Z"}`, "line 1: policy event without a version"},
		{"engine version without target", `{"kind":"engine_version","ts":"2026-01-01T00:00:00Z","version":3}`, "line 1: engine_version event without a target"},
		{"engine version without version", `{"kind":"engine_version","ts":"2026-01-01T00:00:00Z","target":"t"}`, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := NewReader(strings.NewReader(tt.in)).Next()
			if tt.errHas == "" && err != nil || tt.errHas != "" && (err == nil || !strings.Contains(err.Error(), tt.errHas)) {
				t.Errorf("err = %v, want %q", err, tt.errHas)
			}
		})
	}
	in := `{"kind":"policy","ts":"2026-01-01T00:00:00Z","version":3}` + "\n" + `{"kind":"policy","ts":"2026-01-01T00:00:01Z","version":3}` + "\n"
	log := &callLog{t0: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	err := Replay(NewReader(strings.NewReader(in)), log, ReplayOptions{})
	if err == nil || !strings.HasPrefix(err.Error(), "line 2: policy version 3 is not greater") {
		t.Errorf("a version that does not grow: %v", err)
	}
}
