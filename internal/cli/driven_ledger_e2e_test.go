package cli

import (
	"errors"
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vllmstat/vllmstat/internal/record"
	"github.com/vllmstat/vllmstat/internal/sim"
	"github.com/vllmstat/vllmstat/internal/step"
	"github.com/vllmstat/vllmstat/internal/testkit"
	"github.com/vllmstat/vllmstat/internal/vllm"
)

// TestDrivenColocatedLedger runs "vllmstat run" against a driven vLLM fleet (workload none), the
// test playing a colocated trainer over the servers' HTTP endpoints: a rollout, a sleep, the
// weights' wake-up, a weight update (start, transfer, finish), the KV cache's wake-up, a
// rollout, and the step's end. The fleet is paced by the scrapes (see pacedFleet), so the
// simulated wake-ups and load last their configured time between the scrapes that show them.
// The step's ledger has, per engine, waking time of one --wake-time (the KV cache's half; the
// page shows the weights' half asleep, as the colocated loop's) and loading_weights time of one
// --load-time, in wall seconds (simulated over --speed). Each is booked from the first scrape
// that shows it to the first that shows it over, so it may be longer by the span of that
// scrape and, for waking, the span of the scrape that answered the weights' wake-up (the
// engine shows its weights back before the load starts): at most two of the step's longest
// scrape spans, taken from the run's recording.
func TestDrivenColocatedLedger(t *testing.T) {
	t.Parallel()
	const dp = 2
	sc := sim.DefaultConfig()
	sc.Engine, sc.Servers, sc.DP, sc.Port, sc.Speed, sc.Seed = sim.EngineVLLM, 1, dp, 0, 4, 3
	w := &sc.Workload
	w.Kind = sim.WorkloadNone
	w.WakeTime, w.LoadTime = 2400*time.Millisecond, 4*time.Second // 0.6 s and 1 s of wall time
	if err := sc.Validate(); err != nil {
		t.Fatal(err)
	}
	p := startPacedFleet(t, sc)
	base := strings.TrimSuffix(p.fleet.URLs()[0], "/metrics")
	call := func(path, body string) {
		t.Helper()
		if code, b := apiCall(t, "POST", base+path, body, map[string]string{"Content-Type": "application/json"}); code != 200 {
			t.Fatalf("%s: %d %s", path, code, b)
		}
	}
	rollout := func() {
		t.Helper()
		call("/v1/completions", `{"prompt": "a question of the driven loop", "n": 4, "max_tokens": 40, "ignore_eos": true}`)
	}

	out := t.TempDir()
	rec := filepath.Join(out, "run.jsonl.gz")
	l := startLive(t, out, "--record", rec, "--target", p.urls[0])
	// The trainer's training time: a few scrapes, so that the sleep shows.
	scrapesAfter := func(n int) {
		t.Helper()
		from := l.liveScrapes()
		if !testkit.Poll(30*time.Second, func() bool { return l.liveScrapes() >= from+n }) {
			t.Fatalf("the run did not scrape\n%s", l.stderr.String())
		}
	}
	scrapesAfter(2)
	rollout()
	call("/sleep?level=1", "")
	scrapesAfter(3)
	call("/wake_up?tags=weights", "")
	call("/start_weight_update", "")
	call("/update_weights", `{"update_info": {}}`)
	call("/finish_weight_update", `{"weight_version": "1"}`)
	call("/wake_up?tags=kv_cache", "")
	rollout()
	l.endStep(1)
	if code := l.stop(); code != 0 {
		t.Fatalf("run exited %d\n%s", code, l.stderr.String())
	}

	steps, _ := readSteps(t, filepath.Join(out, "steps.jsonl"))
	if len(steps) != 1 {
		t.Fatalf("%d steps written, want 1", len(steps))
	}
	gap := longestScrapeSpan(t, rec)
	wall := func(d time.Duration) time.Duration { return time.Duration(float64(d) / sc.Speed) }
	for _, tc := range []struct {
		state step.State
		want  time.Duration
	}{
		{step.Waking, wall(w.WakeTime)},
		{step.LoadingWeights, wall(w.LoadTime)},
	} {
		v, ok := steps[0].Metrics[vllm.Value{Name: step.StateKey(tc.state), Kind: vllm.VLLM}.Key("vllm")]
		got := time.Duration(v / dp * float64(time.Second))
		t.Logf("%s: %v per engine, configured %v, longest scrape span %v", tc.state, got, tc.want, gap)
		if !ok || got < tc.want-gap || got > tc.want+2*gap {
			t.Errorf("%s: %v per engine (present %v), want %v within -%v/+%v", tc.state, got, ok, tc.want, gap, 2*gap)
		}
	}
}

// longestScrapeSpan returns the longest span between two successive scrapes in a run's
// recording, until its first step's end.
func longestScrapeSpan(t *testing.T, rec string) time.Duration {
	t.Helper()
	r, err := record.Open(rec)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var last time.Time
	var longest time.Duration
	for {
		ev, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		switch ev.Kind {
		case record.KindScrape, record.KindStep:
			if !last.IsZero() {
				longest = max(longest, ev.TS.Sub(last))
			}
			last = ev.TS
		}
		if ev.Kind == record.KindStep {
			break
		}
	}
	return longest
}
