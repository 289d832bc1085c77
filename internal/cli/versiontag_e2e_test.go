package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vllmstat/vllmstat/internal/sim"
	"github.com/vllmstat/vllmstat/internal/step"
)

// TestRunTaggedVersions runs "vllmstat run" against a simulated vLLM fleet whose servers answer
// their weight versions as strings, as vLLM keeps them ("default" until the first update, then
// what the trainer set), the test playing the trainer over both APIs: it publishes 0 at the
// start, while the engines report "default", and step 1 has no stale tokens; one engine loads
// "step-1" before publish(1, name "step-1") and holds 1 from that publish, the other still
// holds 0 and generates stale tokens; "step-2" without a name is 2. The recording replays to
// steps.jsonl byte for byte.
func TestRunTaggedVersions(t *testing.T) {
	t.Parallel()
	sc := sim.DefaultConfig()
	sc.Servers, sc.DP, sc.Port, sc.Speed, sc.Seed = 2, 1, 0, 20, 5
	sc.Workload.Kind = sim.WorkloadNone
	sc.VersionTag = "step-"
	fleet, err := sim.Start(context.Background(), sc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fleet.Close() })
	var bases []string
	args := []string{"--interval", "0.2", "--per-worker"}
	for _, u := range fleet.URLs() {
		bases = append(bases, strings.TrimSuffix(u, "/metrics"))
		args = append(args, "--target", u)
	}
	out := t.TempDir()
	rec := filepath.Join(t.TempDir(), "run.jsonl.gz")
	l := startRunContext(t, out, append(args, "--record", rec)...)
	post := func(url, body string) {
		t.Helper()
		resp, err := http.Post(url, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if b, _ := io.ReadAll(resp.Body); resp.StatusCode != 200 {
			t.Fatalf("%s %s: %d %s", url, body, resp.StatusCode, b)
		}
	}
	generate := func() { // tokens on both engines, answered once generated
		for _, b := range bases {
			post(b+"/v1/completions", `{"prompt": "a b c d", "max_tokens": 40, "n": 4}`)
		}
	}

	const (
		gen    = "vllm/generation_tokens"
		stale  = "vllm/policy/stale_generation_tokens"
		behind = "vllm/policy/engines_behind"
		lo, hi = "vllm/policy/engine_version_min", "vllm/policy/engine_version_max"
	)
	post(l.api+"/v1/policy", `{"version": 0}`) // the initial weights: both engines report "default"
	generate()
	// step 1 is checked as the trainer sees it, before the test goes on
	code, body := l.tryEndStep(1)
	var first step.Record
	if err := json.Unmarshal([]byte(body), &first); code != 200 || err != nil {
		t.Fatalf("end step 1: %d %s", code, body)
	}
	checkFirst := func(m map[string]float64) {
		t.Helper()
		if m[gen] < 320 || m[stale] != 0 || m[behind] != 0 || m[lo] != 0 || m[hi] != 0 {
			t.Errorf("step 1: %v tokens, %v stale, %v behind, versions %v to %v; want no stale tokens, none behind, both at 0",
				m[gen], m[stale], m[behind], m[lo], m[hi])
		}
	}
	checkFirst(first.Metrics)
	post(bases[0]+"/update_weight_version", `{"new_version": "step-1"}`) // loaded before the publish
	post(l.api+"/v1/policy", `{"version": 1, "name": "step-1"}`)
	generate() // stale on engine 1, which holds 0
	l.endStep(2)
	post(bases[1]+"/update_weight_version", `{"new_version": "step-2"}`)
	post(l.api+"/v1/policy", `{"version": 2}`)
	generate() // stale on engine 0, which holds 1
	l.endStep(3)
	if code := l.stop(); code != 0 {
		t.Fatalf("run exited %d\n%s", code, l.stderr.String())
	}

	steps, raw := readSteps(t, filepath.Join(out, "steps.jsonl"))
	if len(steps) != 3 {
		t.Fatalf("%d steps, want 3\n%s", len(steps), raw)
	}
	checkFirst(steps[0].Metrics)
	for i, w := range []struct {
		lo, hi float64
		behind string // the server whose engine is a version behind, and generates stale tokens
	}{{0, 1, fleet.URLs()[1]}, {1, 2, fleet.URLs()[0]}} {
		m := steps[i+1].Metrics
		if m[lo] != w.lo || m[hi] != w.hi || m[behind] != 1 || !(m[stale] >= 160) || m[stale] >= m[gen] {
			t.Errorf("step %d: versions %v to %v, %v behind, %v of %v tokens stale; want %v to %v, 1 behind, some stale",
				i+2, m[lo], m[hi], m[behind], m[stale], m[gen], w.lo, w.hi)
		}
		for _, pw := range steps[i+1].PerWorker {
			want := 0.0
			if pw.Target == w.behind {
				want = 1
			}
			if lag, ok := pw.Metrics["vllm/policy/lag"]; !ok || lag != want {
				t.Errorf("step %d: %s is %v (%v) versions behind, want %v", i+2, pw.Target, lag, ok, want)
			}
		}
	}

	var replayed, errb bytes.Buffer
	if code := RunContext(context.Background(), []string{"replay", "--per-worker", rec}, &replayed, &errb); code != 0 || errb.Len() > 0 {
		t.Fatalf("replay exited %d: %s", code, errb.String())
	}
	if !bytes.Equal(replayed.Bytes(), raw) {
		t.Fatalf("replay differs from steps.jsonl\nreplay:\n%s\nrun:\n%s", replayed.String(), raw)
	}
}
