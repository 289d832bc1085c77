package cli

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
)

// TestPhasesReplayAsRun: a run whose trainer marks rollout and eval phases (one spanning a step
// end) records every edge, and replaying the recording gives its steps.jsonl byte for byte.
func TestPhasesReplayAsRun(t *testing.T) {
	a := newFakeServer(t, "prometheus-client-render-vllm-0.20.prom", 41)
	out := t.TempDir()
	rec := filepath.Join(t.TempDir(), "run.jsonl.gz")
	l := startLive(t, out, "--target", a.url(), "--record", rec, "--per-worker")
	phase := func(edge, name string) {
		t.Helper()
		resp, err := http.Post(l.api+"/v1/phases/"+edge, "application/json", strings.NewReader(fmt.Sprintf(`{"phase": %q}`, name)))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s %s: %d", edge, name, resp.StatusCode)
		}
	}
	phase("start", "rollout")
	phase("start", "eval") // ends the rollout
	phase("end", "eval")
	phase("start", "rollout")
	l.endStep(1) // the rollout goes on in step 2
	phase("end", "rollout")
	l.endStep(2)
	if code := l.stop(); code != 0 {
		t.Fatalf("exit %d\n%s", code, l.stderr.String())
	}
	steps, raw := readSteps(t, filepath.Join(out, "steps.jsonl"))
	if len(steps) != 2 || !bytes.Contains(raw, []byte(`"phases":{"eval":`)) || !bytes.Contains(raw, []byte(`"rollout":{"duration_s":`)) {
		t.Fatalf("steps.jsonl lacks the phases:\n%s", raw)
	}
	var replayed, errb bytes.Buffer
	if code := RunContext(context.Background(), []string{"replay", "--per-worker", rec}, &replayed, &errb); code != 0 || errb.Len() > 0 {
		t.Fatalf("replay exited %d: %s", code, errb.String())
	}
	if !bytes.Equal(replayed.Bytes(), raw) {
		t.Fatalf("replay differs from steps.jsonl\nreplay:\n%s\nrun:\n%s", replayed.String(), raw)
	}
}
