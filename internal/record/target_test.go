package record

import (
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestTargetEvent writes a target's labels, then clears them, and reads both back; a target
// event without a target is an error naming its line.
func TestTargetEvent(t *testing.T) {
	path := filepath.Join(t.TempDir(), "rec.jsonl")
	w, err := Create(path, WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ts := time.Date(2026, 11, 30, 1, 2, 3, 0, time.UTC)
	must(t, w.TargetLabels(ts, "http://a:1/metrics", map[string]string{"team": "a", "zone": "z1"}))
	must(t, w.TargetLabels(ts.Add(1), "http://a:1/metrics", nil))
	must(t, w.Close())
	r, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	e1, err1 := r.Next()
	e2, err2 := r.Next()
	if _, err := r.Next(); err != io.EOF || err1 != nil || err2 != nil {
		t.Fatalf("errors %v %v, then %v instead of EOF", err1, err2, err)
	}
	if e1.Kind != KindTarget || e1.Target != "http://a:1/metrics" || len(e1.Labels) != 2 || e1.Labels["zone"] != "z1" {
		t.Errorf("event 1: %+v", e1)
	}
	if e2.Kind != KindTarget || e2.Labels != nil || !e2.TS.Equal(ts.Add(1)) {
		t.Errorf("event 2: %+v, want the labels cleared", e2)
	}

	_, err = NewReader(strings.NewReader(`{"kind":"target","ts":"2026-01-01T00:00:00Z","labels":{"a":"b"}}`)).Next()
	if err == nil || !strings.Contains(err.Error(), "line 1: target event without a target") {
		t.Fatalf("target event without target: %v", err)
	}
}
