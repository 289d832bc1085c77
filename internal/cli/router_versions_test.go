package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vllmstat/vllmstat/internal/sim"
)

// TestRouterVersionsAgainstSimulator runs "vllmstat run" against the router of a driven
// simulated SGLang fleet of 3 servers, its /engine_metrics alone as the target, the test
// playing the trainer. Each step publishes a version, sends requests to every server (made on
// the old weights: stale), loads the version into the servers, and sends more (fresh); a phase
// edge on either side of the loads scrapes every target, so the scrapes that matter fall where
// the test puts them, whatever the machine's load. Through the router each server's version
// is read at its own /model_info (the page's worker_addr): once every server loaded the step's
// version, no engine is behind, the lowest and highest versions are the step's, the version has
// a publish lag, and the stale tokens are exactly the completion tokens of the requests sent
// between the publish and the loads. In step 4 one server does not load (its tokens are all
// stale, it is behind, the versions differ), and loads in step 5.
func TestRouterVersionsAgainstSimulator(t *testing.T) {
	t.Parallel()
	const servers = 3
	sc := sim.DefaultConfig()
	sc.Engine, sc.Router = sim.EngineSGLang, true
	sc.Servers, sc.DP, sc.Port, sc.Speed, sc.Seed = servers, 1, 0, 100, 5
	sc.Workload.Kind, sc.Workload.LoadTime = sim.WorkloadNone, 2*time.Second
	if err := sc.Validate(); err != nil {
		t.Fatal(err)
	}
	fleet, err := sim.Start(context.Background(), sc)
	if err != nil {
		t.Fatal(err)
	}
	defer fleet.Close()
	var bases []string
	for _, u := range fleet.URLs() {
		bases = append(bases, strings.TrimSuffix(u, "/metrics"))
	}
	call := func(url, body string) string {
		t.Helper()
		code, b := apiCall(t, "POST", url, body, map[string]string{"Content-Type": "application/json"})
		if code != 200 {
			t.Fatalf("%s %s: %d %s", url, body, code, b)
		}
		return b
	}
	prompts := 0
	// generate sends a request of n samples (n > 1: a list of results) to server i and returns
	// their completion tokens.
	generate := func(i, n int) (tokens int) {
		t.Helper()
		prompts++
		body := call(bases[i]+"/generate", fmt.Sprintf(`{"text": "prompt %d of the test", "sampling_params": {"max_new_tokens": %d, "n": %d, "ignore_eos": true}}`,
			prompts, 20+7*i+prompts%5, n))
		var out []struct {
			MetaInfo struct {
				CompletionTokens int `json:"completion_tokens"`
			} `json:"meta_info"`
		}
		if err := json.Unmarshal([]byte(body), &out); err != nil || len(out) != n {
			t.Fatalf("generate answered %s (%v), want %d results", body, err, n)
		}
		for _, o := range out {
			tokens += o.MetaInfo.CompletionTokens
		}
		return tokens
	}
	load := func(i, v int) {
		t.Helper()
		if b := call(bases[i]+"/update_weights_from_disk", fmt.Sprintf(`{"model_path": "/ckpt/%d", "weight_version": "%d"}`, v, v)); !strings.Contains(b, `"success":true`) {
			t.Fatalf("load of version %d on server %d: %s", v, i, b)
		}
	}
	// Every server holds version 0 and has counted tokens before vllmstat first sees it, so
	// that the run's first page has the token counters (SGLang creates them at a server's first
	// finished request) and every later token counts.
	for i := range servers {
		call(bases[i]+"/update_weight_version", `{"new_version": 0}`)
		generate(i, 2)
	}

	out := t.TempDir()
	rec := filepath.Join(out, "run.jsonl.gz")
	l := startLive(t, out, "--record", rec, "--per-worker", "--target", fleet.RouterURL())
	ts := func(path, body string) time.Time { // the run's answer's "ts": when the edge took effect
		t.Helper()
		var a struct {
			TS time.Time `json:"ts"`
		}
		if b := call(l.api+path, body); json.Unmarshal([]byte(b), &a) != nil || a.TS.IsZero() {
			t.Fatalf("%s answered %s", path, b)
		}
		return a.TS
	}
	type plan struct {
		publish   int   // the version the step publishes, 0 for none
		loads     []int // the servers that load the latest version in the step
		stale     int   // the completion tokens made on a version older than the latest
		tokens    int   // all its completion tokens
		published time.Time
		syncing   time.Time // just before the loads' phase started
		loaded    time.Time // when the loads' phase ended: every load of the step is in
	}
	plans := []plan{{publish: 1, loads: []int{0, 1, 2}}, {publish: 2, loads: []int{0, 1, 2}}, {publish: 3, loads: []int{0, 1, 2}},
		{publish: 4, loads: []int{0, 1}}, {loads: []int{2}}}
	holds := make([]int, servers) // each server's version
	latest := 0
	// The run scrapes the router every 0.1 s besides, wherever those scrapes fall: no token is
	// made between the boundary scrapes on either side of the loads, so each request's tokens
	// are counted on the version its server held when it was made.
	for k := range plans {
		p := &plans[k]
		if p.publish > 0 {
			p.published, latest = ts("/v1/policy", fmt.Sprintf(`{"version": %d}`, p.publish)), p.publish
		}
		// Before the loads: the servers behind the latest version make stale tokens.
		for i := range servers {
			n := generate(i, 2+i)
			p.tokens += n
			if holds[i] < latest {
				p.stale += n
			}
		}
		p.syncing = time.Now()
		ts("/v1/phases/start", `{"phase": "sync"}`)
		for _, i := range p.loads {
			load(i, latest)
			holds[i] = latest
		}
		p.loaded = ts("/v1/phases/end", `{"phase": "sync"}`)
		for i := range servers {
			n := generate(i, 3)
			p.tokens += n
			if holds[i] < latest {
				p.stale += n
			}
		}
		l.endStep(k + 1)
	}
	if code := l.stop(); code != 0 {
		t.Fatalf("run exited %d\n%s", code, l.stderr.String())
	}

	recs, _ := readSteps(t, filepath.Join(out, "steps.jsonl"))
	if len(recs) != len(plans) {
		t.Fatalf("%d steps, want %d", len(recs), len(plans))
	}
	holds = make([]int, servers)
	latest = 0
	var pub time.Time // the latest version's publish
	for k, r := range recs {
		p, n, m := plans[k], k+1, r.Metrics
		t.Logf("step %d: %v", n, filterPolicy(m))
		if p.publish > 0 {
			latest, pub = p.publish, p.published
		}
		for _, i := range p.loads {
			holds[i] = latest
		}
		lo, hi, behind := latest, 0, 0
		for i, v := range holds {
			lo, hi = min(lo, v), max(hi, v)
			if v < latest {
				behind++
			}
			w := workerOf(t, r, fleet.RouterURL(), map[string]string{"worker_addr": bases[i]}).Metrics
			exactKey(t, n, w, "sglang/policy/version", float64(v))
			exactKey(t, n, w, "sglang/policy/lag", float64(latest-v))
		}
		exactKey(t, n, m, "sglang/generation_tokens", float64(p.tokens))
		exactKey(t, n, m, "sglang/policy/version", float64(latest))
		exactKey(t, n, m, "sglang/policy/engines_behind", float64(behind))
		exactKey(t, n, m, "sglang/policy/engine_version_min", float64(lo))
		exactKey(t, n, m, "sglang/policy/engine_version_max", float64(hi))
		exactKey(t, n, m, "sglang/policy/stale_generation_tokens", float64(p.stale))
		exactKey(t, n, m, "sglang/policy/stale_token_fraction", float64(p.stale)/float64(p.tokens))
		// The version lands on each server that loads it at a scrape that read its version after
		// the load: one that began after the loads' phase started (the boundary scrape there
		// waited for the one in flight), at the latest the boundary scrape that ended it.
		low, high := p.syncing.Sub(pub).Seconds(), p.loaded.Sub(pub).Seconds()
		for _, stat := range []string{"max", "mean"} {
			if lag, ok := m["sglang/policy/publish_lag_s/"+stat]; !ok || lag <= low || lag > high {
				t.Errorf("step %d: publish lag %s %v (present %v), want more than %v and at most %v", n, stat, lag, ok, low, high)
			}
		}
	}
	replayEquals(t, rec, filepath.Join(out, "steps.jsonl"))
}

func exactKey(t *testing.T, n int, m map[string]float64, key string, want float64) {
	t.Helper()
	if got, ok := m[key]; !ok || got != want {
		t.Errorf("step %d %s = %v (present %v), want %v", n, key, got, ok, want)
	}
}

func filterPolicy(m map[string]float64) map[string]float64 {
	out := map[string]float64{}
	for k, v := range m {
		if strings.Contains(k, "/policy/") || strings.HasSuffix(k, "generation_tokens") {
			out[k] = v
		}
	}
	return out
}
