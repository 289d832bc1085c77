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
