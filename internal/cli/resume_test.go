package cli

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestLastStep(t *testing.T) {
	long := `{"step":%d,"metrics":{"pad":"` + strings.Repeat("x", 100<<10) + `"}}` + "\n"
	tests := []struct {
		name, content string
		n             int64
		ok            bool
	}{
		{"empty", "", 0, false},
		{"one", `{"step":3}` + "\n", 3, true},
		{"cut short by kill -9", `{"step":3}` + "\n" + `{"step":4,"met`, 3, true},
		{"no newline at all", `{"step":4}`, 0, false},
		{"a broken line before", `{"step":2}` + "\n" + "not json\n", 2, true},
		{"step 0", `{"step":0}` + "\n", 0, true},
		{"long lines", fmt.Sprintf(long, 1) + fmt.Sprintf(long, 2) + `{"step":3,"x`, 2, true},
		{"many lines", strings.Repeat(`{"step":1}`+"\n", 20000) + `{"step":77}` + "\n", 77, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "steps.jsonl")
			if err := os.WriteFile(path, []byte(tt.content), 0o644); err != nil {
				t.Fatal(err)
			}
			n, ok, err := lastStep(path)
			if err != nil || n != tt.n || ok != tt.ok {
				t.Fatalf("lastStep = %d, %v, %v; want %d, %v", n, ok, err, tt.n, tt.ok)
			}
		})
	}
	if _, ok, err := lastStep(filepath.Join(t.TempDir(), "none")); ok || err != nil {
		t.Fatalf("missing file: %v, %v", ok, err)
	}
}

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
