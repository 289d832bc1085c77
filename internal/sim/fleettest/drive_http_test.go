package fleettest

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/vllmstat/vllmstat/internal/sim"
	"github.com/vllmstat/vllmstat/internal/sim/fleetconfig"
	"github.com/vllmstat/vllmstat/internal/sim/simtest"
	"github.com/vllmstat/vllmstat/internal/sim/workload"
)

// drivenFleet starts a fleet that only its clients drive, 20 times faster than the wall clock,
// and returns it with its servers' base URLs.
func drivenFleet(t *testing.T, engine string) (*sim.Fleet, []string) {
	t.Helper()
	cfg := simtest.FastConfig()
	cfg.Engine = engine
	cfg.Workload.Kind = workload.WorkloadNone
	cfg.Workload.LoadTime = time.Second
	f := startFleet(t, cfg)
	var bases []string
	for _, u := range f.URLs() {
		bases = append(bases, strings.TrimSuffix(u, "/metrics"))
	}
	return f, bases
}

// counters returns the server's page's totals, summed over its engines.
func counters(t *testing.T, base string) map[string]float64 {
	t.Helper()
	m := map[string]float64{}
	simtest.PageTotals(simtest.ParsePage(t, []byte(simtest.MustGet(t, base+"/metrics"))), m)
	return m
}

type usageBody struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
}

// TestDrivenCompletionsUsageIsWhatThePageGained sends completions, a chat and a stream to a
// vLLM server and checks each answer's usage against what the page's counters gained while it
// ran, which a scrape right after the answer must already show.
func TestDrivenCompletionsUsageIsWhatThePageGained(t *testing.T) {
	_, bases := drivenFleet(t, fleetconfig.EngineVLLM)
	base := bases[1]
	for _, tc := range []struct {
		name, path, body string
		choices          int
	}{
		{"two prompts, n 3", "/v1/completions",
			`{"prompt": ["` + simtest.Words(40, "x") + `", "` + simtest.Words(20, "y") + `"], "n": 3, "max_tokens": 30}`, 6},
		{"token ids", "/v1/completions", `{"prompt": [1, 2, 3, 4, 5], "max_tokens": 5, "ignore_eos": true}`, 1},
		{"chat", "/v1/chat/completions", `{"model": "Qwen/Qwen3-1.7B", "messages": [{"role": "user", "content": "hello there"}], "n": 2, "max_tokens": 12}`, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := counters(t, base)
			code, body := simtest.Post(t, base+tc.path, tc.body)
			if code != http.StatusOK {
				t.Fatalf("%d: %s", code, body)
			}
			after := counters(t, base)
			var ans struct {
				Object  string `json:"object"`
				Choices []struct {
					Index        int    `json:"index"`
					Text         string `json:"text"`
					FinishReason string `json:"finish_reason"`
					Message      *struct {
						Content string `json:"content"`
					} `json:"message"`
				} `json:"choices"`
				Usage usageBody `json:"usage"`
			}
			if err := json.Unmarshal([]byte(body), &ans); err != nil {
				t.Fatal(err)
			}
			if len(ans.Choices) != tc.choices {
				t.Fatalf("%d choices, want %d: %s", len(ans.Choices), tc.choices, body)
			}
			words := 0
			for i, c := range ans.Choices {
				text := c.Text
				if c.Message != nil {
					text = c.Message.Content
				}
				if c.Index != i || (c.FinishReason != "stop" && c.FinishReason != "length") {
					t.Errorf("choice %d: index %d, finish reason %q", i, c.Index, c.FinishReason)
				}
				words += len(strings.Fields(text))
			}
			u := ans.Usage
			if words != u.CompletionTokens || u.TotalTokens != u.PromptTokens+u.CompletionTokens {
				t.Errorf("usage %+v, %d words of text", u, words)
			}
			if got := after["prompt_tokens"] - before["prompt_tokens"]; got != float64(u.PromptTokens) {
				t.Errorf("page gained %v prompt tokens, usage says %d", got, u.PromptTokens)
			}
			if got := after["generation_tokens"] - before["generation_tokens"]; got != float64(u.CompletionTokens) {
				t.Errorf("page gained %v generation tokens, usage says %d", got, u.CompletionTokens)
			}
		})
	}
	t.Run("stream", func(t *testing.T) {
		before := counters(t, base)
		resp, err := http.Post(base+"/v1/completions", "application/json", strings.NewReader(
			`{"prompt": "a b c d", "n": 2, "max_tokens": 7, "stream": true, "stream_options": {"include_usage": true}}`))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
			t.Errorf("content type %q", ct)
		}
		var events []string
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if line := sc.Text(); line != "" {
				data, ok := strings.CutPrefix(line, "data: ")
				if !ok {
					t.Fatalf("line %q is no data line", line)
				}
				events = append(events, data)
			}
		}
		if len(events) < 2 || events[len(events)-1] != "[DONE]" {
			t.Fatalf("events %q, want chunks then [DONE]", events)
		}
		var last struct {
			Choices []any     `json:"choices"`
			Usage   usageBody `json:"usage"`
		}
		if err := json.Unmarshal([]byte(events[len(events)-2]), &last); err != nil || len(last.Choices) != 0 {
			t.Fatalf("usage chunk %s: %v", events[len(events)-2], err)
		}
		finished, tokens := 0, 0
		for _, ev := range events[:len(events)-2] {
			var c struct {
				Object  string `json:"object"`
				Choices []struct {
					Text         string  `json:"text"`
					FinishReason *string `json:"finish_reason"`
				} `json:"choices"`
			}
			if err := json.Unmarshal([]byte(ev), &c); err != nil || c.Object != "text_completion" || len(c.Choices) != 1 {
				t.Fatalf("chunk %s: %v", ev, err)
			}
			tokens += len(strings.Fields(c.Choices[0].Text))
			if c.Choices[0].FinishReason != nil {
				finished++
			}
		}
		if finished != 2 || tokens != last.Usage.CompletionTokens {
			t.Errorf("%d choices finished, %d tokens streamed; usage %+v", finished, tokens, last.Usage)
		}
		after := counters(t, base)
		if got := after["generation_tokens"] - before["generation_tokens"]; got != float64(last.Usage.CompletionTokens) {
			t.Errorf("page gained %v generation tokens, usage says %d", got, last.Usage.CompletionTokens)
		}
		if got := after["prompt_tokens"] - before["prompt_tokens"]; got != float64(last.Usage.PromptTokens) || got != 8 {
			t.Errorf("page gained %v prompt tokens, usage says %d; want 2 samples of 4", got, last.Usage.PromptTokens)
		}
	})
	var models struct {
		Data []struct {
			ID          string `json:"id"`
			MaxModelLen int    `json:"max_model_len"`
		} `json:"data"`
	}
	if err := json.Unmarshal([]byte(simtest.MustGet(t, base+"/v1/models")), &models); err != nil || len(models.Data) != 1 ||
		models.Data[0].ID != "Qwen/Qwen3-1.7B" || models.Data[0].MaxModelLen != 4096 {
		t.Errorf("/v1/models: %+v (%v)", models, err)
	}
	for _, tc := range []struct {
		name, body string
		code       int
	}{
		{"other model", `{"model": "other", "prompt": "a"}`, http.StatusNotFound},
		{"too long", `{"prompt": "a", "max_tokens": 100000}`, http.StatusBadRequest},
		{"no prompt", `{"max_tokens": 3}`, http.StatusBadRequest},
		{"bad json", `{`, http.StatusBadRequest},
	} {
		if code, body := simtest.Post(t, base+"/v1/completions", tc.body); code != tc.code || !strings.Contains(body, `"error"`) {
			t.Errorf("%s: %d %s, want %d and an error", tc.name, code, body, tc.code)
		}
	}
}

// TestDrivenVLLMControl sleeps, wakes, pauses and loads weights into a vLLM server over HTTP and
// checks that the page and the state endpoints show each call as soon as it is answered.
func TestDrivenVLLMControl(t *testing.T) {
	_, bases := drivenFleet(t, fleetconfig.EngineVLLM)
	base := bases[0]
	call := func(method, path, body string, want int) string {
		t.Helper()
		req, _ := http.NewRequest(method, base+path, strings.NewReader(body))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != want {
			t.Fatalf("%s %s: %d %s, want %d", method, path, resp.StatusCode, b, want)
		}
		return strings.TrimSpace(string(b))
	}
	sleepState := func(state string) float64 {
		t.Helper()
		for _, m := range simtest.ParsePage(t, []byte(simtest.MustGet(t, base+"/metrics")))["vllm:engine_sleep_state"].GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "sleep_state" && l.GetValue() == state && m.GetGauge().GetValue() == 1 {
					return 1
				}
			}
		}
		return 0
	}
	// The refit of a colocated loop, as docs/simulator.md shows it.
	call("POST", "/sleep?level=1", "", 200)
	if sleepState("weights_offloaded") != 1 {
		t.Error("the page does not show the level 1 sleep")
	}
	call("POST", "/wake_up?tags=weights", "", 200)
	call("POST", "/start_weight_update", "", 200)
	call("POST", "/finish_weight_update", `{"weight_version": "3"}`, 200)
	if got := call("GET", "/is_sleeping", "", 200); got != `{"is_sleeping":true}` {
		t.Errorf("is_sleeping %s before the KV cache's wake-up", got)
	}
	call("POST", "/wake_up?tags=kv_cache", "", 200)
	if got := call("GET", "/weight_info", "", 200); got != `{"weight_version":"3"}` || sleepState("awake") != 1 {
		t.Errorf("after the refit: weight_info %s, awake %v", got, sleepState("awake"))
	}

	call("POST", "/sleep?level=2", "", 200)
	if got := call("GET", "/is_sleeping", "", 200); got != `{"is_sleeping":true}` {
		t.Errorf("is_sleeping %s", got)
	}
	if sleepState("discard_all") != 1 {
		t.Error("the page does not show the level 2 sleep")
	}
	call("POST", "/wake_up", "", 200)
	if got := call("GET", "/is_sleeping", "", 200); got != `{"is_sleeping":false}` || sleepState("awake") != 1 {
		t.Errorf("after wake_up: is_sleeping %s, awake %v", got, sleepState("awake"))
	}
	call("POST", "/pause?mode=keep", "", 200)
	if got := call("GET", "/is_paused", "", 200); got != `{"is_paused":true}` {
		t.Errorf("is_paused %s", got)
	}
	call("POST", "/start_weight_update", "", 200)
	page := simtest.MustGet(t, base+"/metrics")
	if !strings.Contains(page, `vllm:rl_weight_update_active{engine="0"} 1.0`) {
		t.Errorf("the page does not show the load:\n%s", page)
	}
	call("POST", "/finish_weight_update", `{"weight_version": "5"}`, 200)
	call("POST", "/finish_weight_update", `{"weight_version": "5"}`, http.StatusConflict)
	if got := call("GET", "/weight_info", "", 200); got != `{"weight_version":"5"}` {
		t.Errorf("weight_info %s", got)
	}
	call("POST", "/resume", "", 200)
	call("POST", "/update_weight_version", `{"new_version": 6}`, 200)
	call("POST", "/update_weight_version", `{"new_version": "v6"}`, http.StatusBadRequest)
	if got := call("GET", "/weight_info", "", 200); got != `{"weight_version":"6"}` {
		t.Errorf("weight_info %s", got)
	}
	if got := call("GET", "/is_paused", "", 200); got != `{"is_paused":false}` {
		t.Errorf("is_paused %s after resume", got)
	}
	call("POST", "/sleep?level=7", "", http.StatusBadRequest)
	call("POST", "/wake_up?tags=gpu", "", http.StatusBadRequest)
}

// TestDrivenSGLang drives an SGLang server: /generate, a load from disk, the version.
func TestDrivenSGLang(t *testing.T) {
	_, bases := drivenFleet(t, fleetconfig.EngineSGLang)
	base := bases[0]
	code, body := simtest.Post(t, base+"/generate", `{"text": "`+simtest.Words(30, "q")+`", "sampling_params": {"max_new_tokens": 9, "n": 2, "ignore_eos": true}}`)
	if code != 200 {
		t.Fatalf("generate: %d %s", code, body)
	}
	var out []struct {
		Text     string `json:"text"`
		MetaInfo struct {
			PromptTokens     int `json:"prompt_tokens"`
			CompletionTokens int `json:"completion_tokens"`
			CachedTokens     int `json:"cached_tokens"`
		} `json:"meta_info"`
	}
	if err := json.Unmarshal([]byte(body), &out); err != nil || len(out) != 2 {
		t.Fatalf("generate answered %s (%v), want two results", body, err)
	}
	for i, o := range out {
		if o.MetaInfo.PromptTokens != 30 || o.MetaInfo.CompletionTokens != 9 || len(strings.Fields(o.Text)) != 9 {
			t.Errorf("result %d: %+v", i, o)
		}
	}
	// SGLang counts a request's tokens at its finish, so the page has them all.
	sum := func(name string) (v float64) {
		for _, m := range simtest.ParsePage(t, []byte(simtest.MustGet(t, base+"/metrics")))[name].GetMetric() {
			v += m.GetCounter().GetValue()
		}
		return v
	}
	if p, g := sum("sglang:prompt_tokens_total"), sum("sglang:generation_tokens_total"); p != 60 || g != 18 {
		t.Errorf("the page counted %v prompt and %v generation tokens, want 60 and 18", p, g)
	}
	code, body = simtest.Post(t, base+"/update_weights_from_disk", `{"model_path": "/ckpt/5", "weight_version": "5"}`)
	if code != 200 || !strings.Contains(body, `"success":true`) {
		t.Fatalf("update_weights_from_disk: %d %s", code, body)
	}
	if page := simtest.MustGet(t, base+"/metrics"); !strings.Contains(page, "sglang:weight_load_duration_seconds") {
		t.Errorf("the page does not show the load:\n%s", page)
	}
	var info struct {
		WeightVersion string `json:"weight_version"`
	}
	if err := json.Unmarshal([]byte(simtest.MustGet(t, base+"/model_info")), &info); err != nil || info.WeightVersion != "5" {
		t.Errorf("model_info weight_version %q (%v), want 5", info.WeightVersion, err)
	}
	for _, p := range []string{"/release_memory_occupation", "/resume_memory_occupation", "/pause_generation", "/continue_generation"} {
		if code, body := simtest.Post(t, base+p, `{}`); code != 200 {
			t.Errorf("%s: %d %s", p, code, body)
		}
	}
	if code, body := simtest.Post(t, base+"/v1/completions", `{"prompt": "a b", "max_tokens": 3}`); code != 200 || !strings.Contains(body, `"prompt_tokens":2`) {
		t.Errorf("completions on SGLang: %d %s", code, body)
	}
	code, body = simtest.Post(t, base+"/generate", `{"input_ids": [5, 6, 7], "sampling_params": {"max_new_tokens": 2, "ignore_eos": true}, "stream": true}`)
	if events := strings.Split(strings.TrimSpace(body), "\n\n"); code != 200 || len(events) != 2 ||
		!strings.Contains(events[0], `"prompt_tokens":3`) || events[1] != "data: [DONE]" {
		t.Errorf("streamed generate: %d %q", code, body)
	}
}

// TestDrivenWakeAndLoadTakeTime drives a vLLM server's wake-up and weight load over HTTP with
// --wake-time and --load-time set: each answer comes only once the simulated clock has passed
// the call's time (a half of the wake-up, the load from its start), the page shows the engines
// asleep while the weights come back, waking until the KV cache is back, and the load's
// duration in rl_weight_update_duration_seconds.
func TestDrivenWakeAndLoadTakeTime(t *testing.T) {
	cfg := simtest.FastConfig()
	cfg.Workload.Kind = workload.WorkloadNone
	cfg.Workload.WakeTime, cfg.Workload.LoadTime = 2*time.Second, 3*time.Second
	f := startFleet(t, cfg)
	base := strings.TrimSuffix(f.URLs()[0], "/metrics")
	gauge := func(name string) (v float64) {
		t.Helper()
		for _, m := range simtest.ParsePage(t, []byte(simtest.MustGet(t, base+"/metrics")))[name].GetMetric() {
			v += m.GetGauge().GetValue() + m.GetHistogram().GetSampleSum()
		}
		return v
	}
	// timed makes the call and returns the simulated time it took, at least.
	timed := func(path, body string) time.Duration {
		t.Helper()
		before := f.GroundTruth().At
		if code, b := simtest.Post(t, base+path, body); code != http.StatusOK {
			t.Fatalf("%s: %d %s", path, code, b)
		}
		return f.GroundTruth().At - before
	}
	if code, b := simtest.Post(t, base+"/sleep?level=1", ""); code != http.StatusOK {
		t.Fatalf("sleep: %d %s", code, b)
	}
	if code, b := simtest.Post(t, base+"/update_weights", "{}"); code != http.StatusConflict {
		t.Errorf("update_weights without a start: %d %s, want 409", code, b)
	}
	if d := timed("/wake_up?tags=weights", ""); d < cfg.Workload.WakeTime {
		t.Errorf("the weights' wake-up answered after %s simulated, want at least %s", d, cfg.Workload.WakeTime)
	}
	if awake := gauge("vllm:engine_fully_awake"); awake != 0 {
		t.Errorf("engine_fully_awake %v with the KV cache still asleep, want 0", awake)
	}
	if code, b := simtest.Post(t, base+"/start_weight_update", ""); code != http.StatusOK {
		t.Fatalf("start_weight_update: %d %s", code, b)
	}
	if d := timed("/update_weights", "{}") + timed("/finish_weight_update", `{"weight_version": "2"}`); d < cfg.Workload.LoadTime {
		t.Errorf("the load answered after %s simulated, want at least %s", d, cfg.Workload.LoadTime)
	}
	if active, sum := gauge("vllm:rl_weight_update_active"), gauge("vllm:rl_weight_update_duration_seconds"); active != 0 || sum < float64(cfg.DP)*cfg.Workload.LoadTime.Seconds() {
		t.Errorf("after the load: rl_weight_update_active %v, duration sum %v over %d engines, want 0 and at least %s each", active, sum, cfg.DP, cfg.Workload.LoadTime)
	}
	if d := timed("/wake_up?tags=kv_cache", ""); d < cfg.Workload.WakeTime {
		t.Errorf("the KV cache's wake-up answered after %s simulated, want at least %s", d, cfg.Workload.WakeTime)
	}
	if awake := gauge("vllm:engine_fully_awake"); awake != float64(cfg.DP) {
		t.Errorf("engine_fully_awake %v after the wake-up, want %d", awake, cfg.DP)
	}
}
