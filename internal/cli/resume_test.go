package cli

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vllmstat/vllmstat/internal/syncbuf"
	"github.com/vllmstat/vllmstat/internal/testkit"
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

// runUntilStarted runs "vllmstat run" with args in-process until it exits by itself or has
// started scraping, then stops it, and returns its exit code, stderr, and whether it started.
func runUntilStarted(t *testing.T, args ...string) (code int, stderr string, started bool) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errb := &syncbuf.Buffer{}
	done := make(chan int, 1)
	go func() { done <- runWith(ctx, "run", args, &bytes.Buffer{}, errb) }()
	testkit.Poll(10*time.Second, func() bool {
		return len(done) > 0 || strings.Contains(errb.String(), `msg=scraping`)
	})
	started = strings.Contains(errb.String(), `msg=scraping`)
	cancel()
	return <-done, errb.String(), started
}

// TestResumeRefusesABadLastStep: steps.jsonl's last step record has a step number no run can
// continue after. After 1e18 every end_step was a 409 and a timer run wrote nothing and exited
// 0; after -5 a timer run wrote steps 1, 2 and 3 again. The run refuses to start instead, names
// the line and says what to do, and leaves the out_dir's files as they were.
func TestResumeRefusesABadLastStep(t *testing.T) {
	a := newFakeServer(t, "prometheus-client-render-vllm-0.20.prom", 33)
	for _, tt := range []struct {
		name, last, shown string
	}{
		{"1e18", `{"step":1000000000000000000,"metrics":{}}`, "1000000000000000000"},
		{"negative", `{"step":-5,"metrics":{}}`, "-5"},
		{"2^53", `{"step":9007199254740992}`, "9007199254740992"},
		{"exponent", `{"step":1e18}`, "1e18"},
		{"fraction", `{"step":2.5}`, "2.5"},
		{"string", `{"step":"3"}`, `"3"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			out := t.TempDir()
			path := filepath.Join(out, "steps.jsonl")
			content := `{"step":1,"metrics":{}}` + "\n" + `{"step":2,"metrics":{}}` + "\n" + tt.last + "\n"
			if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
			code, stderr, started := runUntilStarted(t, "--interval", "0.1", "--scrape-timeout", "5s", "--step-every", "1s",
				"--listen", "", "--out", out, "--target", a.url())
			if started || code != exitError {
				t.Fatalf("the run started (%v) and exited %d, want a refusal with exit %d\n%s", started, code, exitError, stderr)
			}
			for _, want := range []string{path, "line 3", "step " + tt.shown, "9007199254740991", "fix or delete that line"} {
				if !strings.Contains(stderr, want) {
					t.Errorf("stderr lacks %q:\n%s", want, stderr)
				}
			}
			if got := mustRead(t, path); string(got) != content {
				t.Errorf("steps.jsonl changed: %q", got)
			}
		})
	}
}

// TestResumePassesOverLinesThatAreNoStep: steps.jsonl ends with lines that are JSON but no step
// record ({}, a note, null, a null step). The run continues after the last real step: ending
// it again is a 409, the next one is written after those lines, which stay as they were.
func TestResumePassesOverLinesThatAreNoStep(t *testing.T) {
	a := newFakeServer(t, "prometheus-client-render-vllm-0.20.prom", 34)
	out := t.TempDir()
	path := filepath.Join(out, "steps.jsonl")
	before := `{"step":1,"metrics":{}}` + "\n" + `{"step":2,"metrics":{}}` + "\n" + "{}\n" + `{"note":"x"}` + "\n" + "null\n" + `{"step":null}` + "\n"
	if err := os.WriteFile(path, []byte(before), 0o644); err != nil {
		t.Fatal(err)
	}
	l := startLive(t, out, "--target", a.url())
	resp, err := http.Post(l.api+"/v1/steps/end", "application/json", strings.NewReader(`{"step": 2}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusConflict {
		t.Errorf("step 2 again: %d, want 409", resp.StatusCode)
	}
	l.endStep(3)
	if code := l.stop(); code != 0 {
		t.Fatalf("exit %d\n%s", code, l.stderr.String())
	}
	b := mustRead(t, path)
	rest, ok := strings.CutPrefix(string(b), before)
	if !ok || strings.Count(rest, "\n") != 1 || !strings.HasPrefix(rest, `{"step":3,`) {
		t.Fatalf("steps.jsonl ends %.300q, want the lines before, then step 3's", b[len(before)/2:])
	}
	if !strings.Contains(l.stderr.String(), "last_step=2") {
		t.Errorf("the run did not say it continues after step 2:\n%s", l.stderr.String())
	}
}
