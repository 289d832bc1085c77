package cli

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestResumeAfterALastLineWithoutNewline: a run killed after writing a whole step but before its
// newline left it without one; opening steps.jsonl keeps it (adding the newline), so it is the
// step the next run continues after, and no step number comes twice.
func TestResumeAfterALastLineWithoutNewline(t *testing.T) {
	a := newFakeServer(t, "prometheus-client-render-vllm-0.20.prom", 31)
	out := t.TempDir()
	if err := os.WriteFile(filepath.Join(out, "steps.jsonl"), []byte(`{"step":1,"metrics":{}}`+"\n"+`{"step":2,"metrics":{}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	l := startLive(t, out, "--target", a.url())
	resp, err := http.Post(l.api+"/v1/steps/end", "application/json", strings.NewReader(`{"step": 2}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusConflict {
		t.Fatalf("step 2 again: %d, want 409", resp.StatusCode)
	}
	l.endStep(3)
	if code := l.stop(); code != 0 {
		t.Fatalf("exit %d\n%s", code, l.stderr.String())
	}
	steps, _ := readSteps(t, filepath.Join(out, "steps.jsonl"))
	var got []int64
	for _, s := range steps {
		got = append(got, s.Step)
	}
	if fmt.Sprint(got) != "[1 2 3]" {
		t.Fatalf("steps %v, want [1 2 3]", got)
	}
	if !strings.Contains(l.stderr.String(), "last_step=2") {
		t.Errorf("the run did not say it continues after step 2:\n%s", l.stderr.String())
	}
}

// TestResumeMovesAGarbageLastLineAside: steps.jsonl ends with a whole line that is not JSON
// (a line written by something else, or mangled on disk). Opening the file takes that line out
// into steps.jsonl.corrupt-1, as it is, and says so; the run continues after the last step, and
// steps.jsonl holds only step records.
func TestResumeMovesAGarbageLastLineAside(t *testing.T) {
	a := newFakeServer(t, "prometheus-client-render-vllm-0.20.prom", 32)
	out := t.TempDir()
	steps := filepath.Join(out, "steps.jsonl")
	if err := os.WriteFile(steps, []byte(`{"step":1,"metrics":{}}`+"\n"+`{"step":2,"metrics":{}}`+"\n"+"#### not a step ####\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	l := startLive(t, out, "--target", a.url())
	l.endStep(3)
	if code := l.stop(); code != 0 {
		t.Fatalf("exit %d\n%s", code, l.stderr.String())
	}
	recs, _ := readSteps(t, steps)
	var got []int64
	for _, s := range recs {
		got = append(got, s.Step)
	}
	if fmt.Sprint(got) != "[1 2 3]" {
		t.Fatalf("steps %v, want [1 2 3]", got)
	}
	kept, err := os.ReadFile(steps + ".corrupt-1")
	if err != nil || string(kept) != "#### not a step ####\n" {
		t.Fatalf("steps.jsonl.corrupt-1: %q, %v; want the line taken out", kept, err)
	}
	if log := l.stderr.String(); !strings.Contains(log, "steps.jsonl.corrupt-1") || !strings.Contains(log, "last_step=2") {
		t.Errorf("the run did not name the file the line went to, or the step it continues after:\n%s", log)
	}
}
