package collector

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/vllmstat/vllmstat/internal/record"
	"github.com/vllmstat/vllmstat/internal/step"
	"github.com/vllmstat/vllmstat/internal/target"
	"github.com/vllmstat/vllmstat/internal/testkit"
)

// TestSourceLabels follows target labels from discovery sources into per_worker records: the
// first source that lists a URL gives its labels (the static source, without labels, comes
// first), a source's change of labels reaches the next step, a URL another source still lists
// takes that source's labels, and a removed target keeps its labels in the step it left. The
// recording replays to the same records.
func TestSourceLabels(t *testing.T) {
	a, b := newValueServer(t, 100), newValueServer(t, 200)
	path := filepath.Join(t.TempDir(), "rec.jsonl")
	rw, err := record.Create(path, record.WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	topt := step.Options{PerWorker: true}
	c, fc, stop := start(t, Options{Targets: targets(a.srv.URL), Recorder: rw, NoFinalStep: true, Tracker: topt})
	ctx := context.Background()
	lt := func(url string, kv ...string) target.Target {
		ls := map[string]string{}
		for i := 0; i+1 < len(kv); i += 2 {
			ls[kv[i]] = kv[i+1]
		}
		return target.Target{URL: url, Labels: ls}
	}
	set := func(source string, ts ...target.Target) {
		t.Helper()
		if err := c.SetSourceTargets(ctx, source, ts); err != nil {
			t.Fatal(err)
		}
	}
	au, bu := a.srv.URL, b.srv.URL
	var live []step.Record
	check := func(n int64, want map[string]string) {
		t.Helper()
		endStep(t, c, n, &live)
		r := live[len(live)-1]
		got := map[string]string{}
		for _, w := range r.PerWorker {
			got[w.Target] = w.TargetLabels["team"]
		}
		for u, v := range want {
			if got[u] != v {
				t.Errorf("step %d: %s has team %q, want %q (all: %v)", n, u, got[u], v, got)
			}
		}
		if len(got) != len(want) {
			t.Errorf("step %d: workers %v, want %v", n, got, want)
		}
	}
	set("file:x", lt(bu, "team", "x"), lt(au, "team", "y"))
	set("file:y", lt(bu, "team", "z"))
	check(1, map[string]string{au: "", bu: "x"})
	_, states, err := c.Live(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range states {
		if s.URL == bu && s.Labels["team"] != "x" || s.URL == au && s.Labels != nil {
			t.Errorf("target state %s has labels %v", s.URL, s.Labels)
		}
	}
	set("file:x", lt(bu, "team", "w"))
	check(2, map[string]string{au: "", bu: "w"})
	set("file:x")
	check(3, map[string]string{au: "", bu: "z"})
	b.value.Add(9)
	fc.Advance(time.Second) // a scrape, before the target goes
	testkit.WaitFor(t, 5*time.Second, "the removed target's last scrape", func() bool {
		r, _, _ := c.Live(ctx)
		return r.Metrics["vllm/generation_tokens"] == 9
	})
	set("file:y")
	check(4, map[string]string{au: "", bu: "z"})
	if got := live[3].Metrics["vllm/generation_tokens"]; got != 9 {
		t.Errorf("step 4 counted %v tokens; want the 9 the removed target served before it left", got)
	}
	check(5, map[string]string{au: ""})
	set("file:x", lt(bu, "team", "back"))
	check(6, map[string]string{au: "", bu: "back"})
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	replayed := replayRecording(t, path, topt)
	if len(replayed) != len(live) {
		t.Fatalf("replayed %d steps, live %d", len(replayed), len(live))
	}
	for i := range live {
		x, _ := step.MarshalLine(&live[i])
		y, _ := step.MarshalLine(&replayed[i])
		if string(x) != string(y) {
			t.Errorf("step %d differs:\nlive   %s\nreplay %s", live[i].Step, x, y)
		}
	}
}

func TestFewTargets(t *testing.T) {
	urls := make([]string, 1000)
	for i := range urls {
		urls[i] = fmt.Sprintf("http://h:%d/metrics", i)
	}
	got := fewTargets(urls)
	if len(got) != 9 || got[0] != urls[0] || got[7] != urls[7] || got[8] != "... and 992 more" {
		t.Fatalf("fewTargets of 1,000 = %q", got)
	}
	if got := fewTargets(urls[:3]); len(got) != 3 {
		t.Fatalf("fewTargets of 3 = %q", got)
	}
	if urls[8] != "http://h:8/metrics" {
		t.Fatal("fewTargets changed its argument")
	}
}
