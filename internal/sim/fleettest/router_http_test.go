package fleettest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/vllmstat/vllmstat/internal/sim/fleetconfig"
	"github.com/vllmstat/vllmstat/internal/sim/simtest"
	"github.com/vllmstat/vllmstat/internal/sim/workload"
)

// routedFleet starts a driven SGLang fleet of two one-engine servers behind the router with
// policy, and returns the router's and the servers' base URLs.
func routedFleet(t *testing.T, policy string) (string, []string) {
	t.Helper()
	cfg := simtest.FastConfig()
	cfg.Engine = fleetconfig.EngineSGLang
	cfg.DP = 1
	cfg.Router, cfg.RouterPolicy = true, policy
	cfg.Workload.Kind = workload.WorkloadNone
	cfg.Workload.LoadTime = time.Second
	f := startFleet(t, cfg)
	var bases []string
	for _, u := range f.URLs() {
		bases = append(bases, strings.TrimSuffix(u, "/metrics"))
	}
	return strings.TrimSuffix(f.RouterURL(), "/engine_metrics"), bases
}

// pageSum sums the samples of family name on the page at url whose labels include match.
func pageSum(t *testing.T, url, name string, match map[string]string) float64 {
	t.Helper()
	var v float64
	for _, m := range simtest.ParsePage(t, []byte(simtest.MustGet(t, url)))[name].GetMetric() {
		if !hasLabels(m, match) {
			continue
		}
		switch {
		case m.Counter != nil:
			v += m.Counter.GetValue()
		case m.Histogram != nil:
			v += float64(m.Histogram.GetSampleCount())
		}
	}
	return v
}

func hasLabels(m *dto.Metric, match map[string]string) bool {
	n := 0
	for _, l := range m.Label {
		if want, ok := match[l.GetName()]; ok && want == l.GetValue() {
			n++
		}
	}
	return n == len(match)
}

type generated struct {
	MetaInfo struct {
		PromptTokens     int `json:"prompt_tokens"`
		CompletionTokens int `json:"completion_tokens"`
	} `json:"meta_info"`
}

// generate sends an SGLang /generate request of text through url and returns its token counts.
// A request the router sends to a paused server would wait for ever: the client gives up after
// a minute, so that a test whose router routes wrongly fails instead of hanging.
func generate(t *testing.T, url, text string, maxTokens int) (prompt, completion int) {
	t.Helper()
	client := &http.Client{Timeout: time.Minute}
	resp, err := client.Post(url+"/generate", "application/json",
		strings.NewReader(fmt.Sprintf(`{"text": %q, "sampling_params": {"max_new_tokens": %d}}`, text, maxTokens)))
	if err != nil {
		t.Fatalf("generate through the router: %v", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	code, body := resp.StatusCode, string(b)
	if code != http.StatusOK {
		t.Fatalf("generate through the router: %d %s", code, body)
	}
	var g generated
	if err := json.Unmarshal([]byte(body), &g); err != nil {
		t.Fatalf("generate answered %s: %v", body, err)
	}
	return g.MetaInfo.PromptTokens, g.MetaInfo.CompletionTokens
}

// Round robin spreads the requests sent through the router evenly over the servers, whatever
// their prompts; what the servers counted is what the client received through the router; the
// router's own page counts every request, per route and per worker.
func TestRouterRoundRobinSpreadsEvenly(t *testing.T) {
	router, bases := routedFleet(t, fleetconfig.RouterRoundRobin)
	var prompt, completion int
	for i := range 6 {
		p, c := generate(t, router, simtest.Words(20+i, "same"), 5+i)
		prompt, completion = prompt+p, completion+c
	}
	code, body := simtest.Post(t, router+"/v1/chat/completions", `{"model": "Qwen/Qwen3-1.7B", "messages": [{"role": "user", "content": "hello there"}], "max_tokens": 7}`)
	if code != http.StatusOK {
		t.Fatalf("chat through the router: %d %s", code, body)
	}
	var chat struct{ Usage usageBody }
	if err := json.Unmarshal([]byte(body), &chat); err != nil {
		t.Fatal(err)
	}
	prompt, completion = prompt+chat.Usage.PromptTokens, completion+chat.Usage.CompletionTokens

	var gotPrompt, gotCompletion float64
	for i, b := range bases {
		n := pageSum(t, b+"/metrics", "sglang:num_requests_total", nil)
		want := 3.0
		if i == 0 {
			want = 4 // the seventh request, the chat, is server 0's turn again
		}
		if n != want {
			t.Errorf("server %d counted %v requests, want %v", i, n, want)
		}
		gotPrompt += pageSum(t, b+"/metrics", "sglang:prompt_tokens_total", nil)
		gotCompletion += pageSum(t, b+"/metrics", "sglang:generation_tokens_total", nil)
	}
	if gotPrompt != float64(prompt) || gotCompletion != float64(completion) || prompt == 0 || completion == 0 {
		t.Errorf("the servers counted %v prompt and %v generation tokens, the client received %d and %d",
			gotPrompt, gotCompletion, prompt, completion)
	}

	page := router + "/metrics"
	for _, c := range []struct {
		name  string
		match map[string]string
		want  float64
	}{
		{"smg_router_requests_total", map[string]string{"endpoint": "generate", "model": "unknown", "streaming": "false", "router_type": "http"}, 6},
		{"smg_router_requests_total", map[string]string{"endpoint": "chat", "model": "Qwen/Qwen3-1.7B"}, 1},
		{"smg_http_requests_total", map[string]string{"method": "POST", "path": "/generate"}, 6},
		{"smg_http_requests_total", map[string]string{"method": "POST", "path": "/v1/chat/completions"}, 1},
		{"smg_worker_selection_total", map[string]string{"policy": "round_robin"}, 7},
		{"smg_worker_cb_outcomes_total", map[string]string{"worker": bases[0], "outcome": "success"}, 4},
		{"smg_worker_cb_outcomes_total", map[string]string{"worker": bases[1], "outcome": "success"}, 3},
		{"smg_router_request_duration_seconds", map[string]string{"endpoint": "generate"}, 6},
		{"smg_router_request_errors_total", nil, 0},
		{"smg_worker_retries_total", nil, 0},
	} {
		if got := pageSum(t, page, c.name, c.match); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.match, got, c.want)
		}
	}
	// The router's merged page is there as before.
	if code, _ := simtest.Fetch(t, router+"/engine_metrics"); code != http.StatusOK {
		t.Errorf("/engine_metrics answered %d", code)
	}
}

// Cache-aware routing keeps the requests of one prefix on the server that had it first, and
// sends a new prefix to the least loaded server: with a request held on server 0 (its
// generation paused), a new prefix goes to server 1 and stays there after server 0 is free
// again, while the held prefix stays on server 0.
func TestRouterCacheAwareKeepsPrefix(t *testing.T) {
	router, bases := routedFleet(t, fleetconfig.RouterCacheAware)
	counts := func() []float64 {
		var n []float64
		for _, b := range bases {
			n = append(n, pageSum(t, b+"/metrics", "sglang:num_requests_total", nil))
		}
		return n
	}
	selections := func(match map[string]string) float64 {
		return pageSum(t, router+"/metrics", "smg_worker_selection_total", match)
	}
	held, other := simtest.Words(60, "held"), simtest.Words(60, "other")
	if code, body := simtest.Post(t, bases[0]+"/pause_generation", `{}`); code != http.StatusOK {
		t.Fatalf("pause_generation: %d %s", code, body)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		// Both servers are idle: the first of them, server 0, is the least loaded.
		code, body := simtest.Post(t, router+"/generate", fmt.Sprintf(`{"text": %q, "sampling_params": {"max_new_tokens": 4}}`, held+" first"))
		if code != http.StatusOK {
			t.Errorf("the held request: %d %s", code, body)
		}
	}()
	// Polled, as no event marks the router's choice: once it is counted, the router counts
	// server 0 busy until the held request is answered.
	for selections(nil) < 1 {
		time.Sleep(time.Millisecond)
	}
	for i := range 4 {
		generate(t, router, other+fmt.Sprintf(" question %d", i), 4)
	}
	if n := counts(); n[0] != 0 || n[1] != 4 {
		t.Errorf("with server 0 busy the new prefix's four requests reached the servers %v times, want all on server 1", n)
	}
	if code, body := simtest.Post(t, bases[0]+"/continue_generation", `{}`); code != http.StatusOK {
		t.Fatalf("continue_generation: %d %s", code, body)
	}
	<-done
	for i := range 3 {
		generate(t, router, held+fmt.Sprintf(" again %d", i), 4)
		generate(t, router, other+fmt.Sprintf(" again %d", i), 4)
	}
	// A chat whose text shares a prefix goes the same way.
	code, body := simtest.Post(t, router+"/v1/chat/completions", `{"messages": [{"role": "user", "content": "`+other+` and more"}], "max_tokens": 3}`)
	if code != http.StatusOK {
		t.Fatalf("chat: %d %s", code, body)
	}
	if n := counts(); n[0] != 4 || n[1] != 8 {
		t.Errorf("the servers counted %v requests, want 4 of the held prefix on server 0 and 8 of the other on server 1", n)
	}
	if got := selections(map[string]string{"policy": "cache_aware"}); got != 12 {
		t.Errorf("smg_worker_selection_total{policy=cache_aware} = %v, want 12", got)
	}
}
