package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vllmstat/vllmstat/internal/sim"
	"github.com/vllmstat/vllmstat/internal/step"
)

// received is what a loop received in its answers' usage, and the samples it asked for.
type received struct {
	prompt, completion, samples int
}

func (u *received) add(o received) {
	u.prompt += o.prompt
	u.completion += o.completion
	u.samples += o.samples
}

// trtllmFleet starts a driven simulated TensorRT-LLM fleet of servers servers.
func trtllmFleet(t *testing.T, servers int, seed int64) *sim.Fleet {
	t.Helper()
	sc := sim.DefaultConfig()
	sc.Engine = sim.EngineTRTLLM
	sc.Servers, sc.DP, sc.Port, sc.Speed, sc.Seed = servers, 1, 0, 20, seed
	sc.Workload.Kind = sim.WorkloadNone
	if err := sc.Validate(); err != nil {
		t.Fatal(err)
	}
	fleet, err := sim.Start(context.Background(), sc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fleet.Close() })
	return fleet
}

// serverBase is a simulated server's base URL, from its page's.
func serverBase(t *testing.T, page string) string {
	t.Helper()
	for _, path := range []string{"/prometheus/metrics", "/metrics"} {
		if b, ok := strings.CutSuffix(page, path); ok {
			return b
		}
	}
	t.Fatalf("%s is no page URL", page)
	return ""
}

// openAIBatch sends a GRPO-shaped batch to every server at once, as a rollout worker does:
// groups prompts per server, each asked for samples completions, through /v1/completions and
// /v1/chat/completions in turn, and returns what the answers' usage said.
func openAIBatch(t *testing.T, bases []string, tag string, groups, samples int) received {
	t.Helper()
	var (
		mu  sync.Mutex
		got received
		wg  sync.WaitGroup
	)
	for i, base := range bases {
		for g := range groups {
			wg.Add(1)
			go func() {
				defer wg.Done()
				// A shared system prompt, then the group's question: the groups share a prefix,
				// and a group's samples its whole prompt.
				question := fmt.Sprintf("%s question %d of server %d: what is %d times %d", tag, g, i, g+3, i+7)
				max := 24 + 9*g + 5*i
				var path, body string
				if g%2 == 0 {
					path = "/v1/completions"
					body = fmt.Sprintf(`{"prompt": "You are a careful solver of problems. Think step by step. %s", "n": %d, "max_tokens": %d}`,
						question, samples, max)
				} else {
					path = "/v1/chat/completions"
					body = fmt.Sprintf(`{"messages": [{"role": "system", "content": "You are a careful solver of problems. Think step by step."}, {"role": "user", "content": %q}], "n": %d, "max_tokens": %d}`,
						question, samples, max)
				}
				code, answer := apiCall(t, "POST", base+path, body, map[string]string{"Content-Type": "application/json"})
				var a struct {
					Choices []json.RawMessage `json:"choices"`
					Usage   struct {
						Prompt     int `json:"prompt_tokens"`
						Completion int `json:"completion_tokens"`
					} `json:"usage"`
				}
				if err := json.Unmarshal([]byte(answer), &a); code != 200 || err != nil || len(a.Choices) != samples {
					t.Errorf("POST %s %s: %d %s", path, body, code, answer)
					return
				}
				mu.Lock()
				got.add(received{a.Usage.Prompt, a.Usage.Completion, samples})
				mu.Unlock()
			}()
		}
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	return got
}

// memoryCall posts one of trtllm-serve's memory calls to every server.
func memoryCall(t *testing.T, bases []string, path string) {
	t.Helper()
	for _, b := range bases {
		if code, answer := apiCall(t, "POST", b+path, `{}`, map[string]string{"Content-Type": "application/json"}); code != 200 || !strings.Contains(answer, `"success"`) {
			t.Fatalf("POST %s%s: %d %s", b, path, code, answer)
		}
	}
}

// TestNeMoRLLoopOnTRTLLM runs "vllmstat run" against a driven simulated TensorRT-LLM fleet of 2
// servers, the test playing NeMo-RL's colocated GRPO loop on its TensorRT-LLM backend: each
// step a rollout (GRPO groups through the OpenAI endpoints), a training phase with the engines'
// memory released (/release_memory), the weight sync that brings it back (/resume_memory), and
// every second step an eval batch, each marked as a phase. Every step's and phase's token
// counts and finished requests are what the loop received in its answers' usage; the step's hit
// rate is the simulator's own (its cached over prompt tokens in the step); the ledger's states
// add up to the step's engine-seconds, at most two workers' worth of the step, none of it asleep or
// loading weights, which TensorRT-LLM's page cannot tell; the keys are all under trtllm/. The
// recording replays to steps.jsonl byte for byte.
func TestNeMoRLLoopOnTRTLLM(t *testing.T) {
	t.Parallel()
	const steps = 3
	fleet := trtllmFleet(t, 2, 21)
	var bases []string
	args := []string{"--per-worker", "--interval", "0.1"}
	for _, u := range fleet.URLs() {
		bases = append(bases, serverBase(t, u))
		args = append(args, "--target", u)
	}
	out := t.TempDir()
	rec := filepath.Join(t.TempDir(), "run.jsonl.gz")
	l := startLive(t, out, append(args, "--record", rec)...)
	phase := func(edge, name string) {
		t.Helper()
		if code, body := apiCall(t, "POST", l.api+"/v1/phases/"+edge, fmt.Sprintf(`{"phase": %q}`, name), map[string]string{"Content-Type": "application/json"}); code != 200 {
			t.Fatalf("%s phase %s: %d %s", edge, name, code, body)
		}
	}
	type stepPlan struct {
		rollout, eval, all received
		totals             map[string]float64 // the fleet's totals at the step's end
	}
	plans := make([]stepPlan, steps)
	before := fleet.Totals()
	for k := range plans {
		p := &plans[k]
		phase("start", "rollout")
		p.rollout = openAIBatch(t, bases, fmt.Sprintf("step %d rollout", k+1), 4, 4)
		phase("end", "rollout")

		// Training: the engines give their memory to the trainer, then take it back with the
		// new weights.
		memoryCall(t, bases, "/release_memory")
		phase("start", "train")
		time.Sleep(300 * time.Millisecond) // a few scrapes of the sleeping engines
		phase("end", "train")
		phase("start", "weight_sync")
		memoryCall(t, bases, "/resume_memory")
		phase("end", "weight_sync")

		if k%2 == 1 {
			phase("start", "eval")
			p.eval = openAIBatch(t, bases, fmt.Sprintf("step %d eval", k+1), 2, 1)
			phase("end", "eval")
		}
		p.all = p.rollout
		p.all.add(p.eval)
		p.totals = fleet.Totals()
		l.endStep(k + 1)
	}
	if code := l.stop(); code != 0 {
		t.Fatalf("run exited %d\n%s", code, l.stderr.String())
	}

	recs, _ := readSteps(t, filepath.Join(out, "steps.jsonl"))
	if len(recs) != steps {
		t.Fatalf("%d steps, want %d", len(recs), steps)
	}
	for k, r := range recs {
		p, n, m := plans[k], k+1, r.Metrics
		t.Logf("step %d: %d workers, %.2f s; %v", n, r.Workers, r.DurationS, filterLoop(m))
		for key := range m {
			if !strings.HasPrefix(key, "trtllm/") {
				t.Errorf("step %d has %s, not a TensorRT-LLM key", n, key)
			}
		}
		if r.Workers != 2 {
			t.Errorf("step %d: %d workers, want 2", n, r.Workers)
		}
		counts := func(m map[string]float64, u received, where string) {
			t.Helper()
			for key, want := range map[string]int{"prompt_tokens": u.prompt, "generation_tokens": u.completion, "finished_requests": u.samples} {
				if got, ok := m["trtllm/"+key]; !ok || got != float64(want) || want == 0 {
					t.Errorf("step %d%s: trtllm/%s = %v (present %v), the loop received %d", n, where, key, got, ok, want)
				}
			}
		}
		counts(m, p.all, "")
		for name, u := range map[string]received{"rollout": p.rollout, "eval": p.eval} {
			ph := r.Phases[name]
			switch {
			case u.samples == 0 && ph != nil:
				t.Errorf("step %d has an %s phase, which the loop did not mark", n, name)
			case u.samples > 0 && ph == nil:
				t.Errorf("step %d has no %s phase", n, name)
			case u.samples > 0:
				counts(ph.Metrics, u, " "+name)
			}
		}

		// The hit rate is the simulator's: its cached over its prompt tokens in the step, whose
		// prompt tokens are the loop's.
		prev := before
		if k > 0 {
			prev = plans[k-1].totals
		}
		cached, prompt := p.totals["prompt_cached_tokens"]-prev["prompt_cached_tokens"], p.totals["prompt_tokens"]-prev["prompt_tokens"]
		if prompt != float64(p.all.prompt) {
			t.Errorf("step %d: the simulator counted %v prompt tokens, the loop received %d", n, prompt, p.all.prompt)
		}
		if hit, ok := m["trtllm/prefix_cache_hit_rate"]; !ok || hit != cached/prompt || cached == 0 {
			t.Errorf("step %d: hit rate %v (present %v), the simulator's %v/%v", n, hit, ok, cached, prompt)
		}
		if got := m["trtllm/cached_tokens"]; got != cached {
			t.Errorf("step %d: %v cached tokens, the simulator's %v", n, got, cached)
		}

		// The ledger: its states add up to the engine-seconds, at most two workers' worth of the
		// step (from each worker's first page in it).
		var sum float64
		for s := range step.NumStates {
			sum += m["trtllm/"+step.StateKey(s)]
		}
		engine := m["trtllm/"+step.NameEngineTime]
		if math.Abs(sum-engine) > 1e-9*engine || engine == 0 {
			t.Errorf("step %d: the states add up to %v engine-s, the step has %v", n, sum, engine)
		}
		if engine > 2*r.DurationS {
			t.Errorf("step %d: %v engine-s, more than 2 workers × %v s", n, engine, r.DurationS)
		}
		if m["trtllm/"+step.StateKey(step.Generating)] <= 0 {
			t.Errorf("step %d: no time generating", n)
		}
		for _, s := range []step.State{step.Asleep, step.Waking, step.LoadingWeights, step.Paused} {
			if v := m["trtllm/"+step.StateKey(s)]; v != 0 {
				t.Errorf("step %d: %v engine-s %s, which no TensorRT-LLM page tells", n, v, step.StateKey(s))
			}
		}
	}
	replayEquals(t, rec, filepath.Join(out, "steps.jsonl"))
}

// filterLoop keeps a record's token, request and ledger keys, for the log.
func filterLoop(m map[string]float64) map[string]float64 {
	out := map[string]float64{}
	for k, v := range m {
		if strings.HasSuffix(k, "/prompt_tokens") || strings.HasSuffix(k, "/generation_tokens") || strings.HasSuffix(k, "/cached_tokens") ||
			strings.HasSuffix(k, "/finished_requests") || strings.HasSuffix(k, "hit_rate") || (strings.Contains(k, "/time/") && strings.HasSuffix(k, "_s")) {
			out[k] = v
		}
	}
	return out
}
