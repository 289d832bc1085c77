package cli

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestSimTRTLLMServesItsPage runs `vllmstat sim --engine trtllm --workload none` in-process: it
// prints the page's URL at trtllm-serve's path, /prometheus/metrics; the page has only what
// trtllm-serve makes at start until a client's completion finishes, whose usage the page's
// counters then show, with its finish reason; /metrics, trtllm-serve's JSON statistics, is not
// the page. POST /release_memory and /resume_memory answer as trtllm-serve does and leave the
// page as it was; vLLM's /sleep is not served.
func TestSimTRTLLMServesItsPage(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pr, pw := io.Pipe()
	var stderr bytes.Buffer
	code := make(chan int, 1)
	go func() {
		code <- runSimContext(ctx, []string{"--engine", "trtllm", "--workload", "none", "--port", "0", "--servers", "1",
			"--speed", "10", "--log-level", "error"}, pw, &stderr)
		pw.Close()
	}()
	sc := bufio.NewScanner(pr)
	if !sc.Scan() {
		t.Fatalf("printed nothing; stderr %s", stderr.String())
	}
	page := sc.Text()
	go io.Copy(io.Discard, pr)
	base, ok := strings.CutSuffix(page, "/prometheus/metrics")
	if !ok {
		t.Fatalf("printed %q, want the URL of /prometheus/metrics", page)
	}
	get := func(url string) (int, string) {
		t.Helper()
		resp, err := http.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	labels := `{engine_type="pytorch",model_name="Qwen/Qwen3-1.7B"} `
	status, body := get(page)
	if status != http.StatusOK || !strings.Contains(body, "trtllm_prompt_cached_tokens_total"+labels+"0.0\n") ||
		!strings.Contains(body, "# TYPE trtllm_model_config_info gauge\n") || strings.Contains(body, "trtllm_request_success_total") {
		t.Fatalf("before any request: %d %s", status, body)
	}
	if status, _ := get(base + "/metrics"); status != http.StatusNotFound {
		t.Errorf("GET /metrics: %d, want 404: a TensorRT-LLM server's page is at /prometheus/metrics", status)
	}
	resp, err := http.Post(base+"/v1/completions", "application/json",
		strings.NewReader(`{"prompt": "one two three four five", "n": 2, "max_tokens": 4, "ignore_eos": true}`))
	if err != nil {
		t.Fatal(err)
	}
	answer, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(answer), `"usage":{"prompt_tokens":10,"total_tokens":18,"completion_tokens":8}`) {
		t.Fatalf("%s: %s", resp.Status, answer)
	}
	_, body = get(page)
	for _, want := range []string{"trtllm_prompt_tokens_total" + labels + "10.0\n", "trtllm_generation_tokens_total" + labels + "8.0\n",
		`trtllm_request_success_total{engine_type="pytorch",finished_reason="length",model_name="Qwen/Qwen3-1.7B"} 2.0` + "\n",
		"trtllm_num_requests_completed_total" + labels + "2.0\n"} {
		if !strings.Contains(body, want) {
			t.Errorf("after the completion the page lacks %q:\n%s", want, body)
		}
	}
	// trtllm-serve's memory calls, which its page does not show; vLLM's are not served.
	post := func(path string) (int, string) {
		t.Helper()
		resp, err := http.Post(base+path, "application/json", strings.NewReader(`{}`))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, strings.TrimSpace(string(b))
	}
	_, before := get(page)
	for _, path := range []string{"/release_memory", "/resume_memory"} {
		if status, got := post(path); status != http.StatusOK || got != `{"status":"success"}` {
			t.Errorf("POST %s: %d %s", path, status, got)
		}
	}
	if _, after := get(page); after != before {
		t.Errorf("the memory calls changed the page:\n%s\nthen\n%s", before, after)
	}
	if status, _ := post("/sleep?level=1"); status != http.StatusNotFound {
		t.Errorf("POST /sleep: %d, want 404: vLLM's call is not trtllm-serve's", status)
	}
	http.DefaultClient.CloseIdleConnections()
	cancel()
	select {
	case c := <-code:
		if c != exitOK {
			t.Fatalf("exit %d, stderr %s", c, stderr.String())
		}
	case <-time.After(5 * time.Second):
		t.Fatal("did not stop")
	}
}

// TestSimTRTLLMBadFlags: what a trtllm-serve page cannot show is refused, naming the flag.
func TestSimTRTLLMBadFlags(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--engine", "trtllm", "--dp", "2"}, "use dp 1, got 2"},
		{[]string{"--engine", "trtllm", "--spec-decode", "2"}, "spec decode is not simulated on trtllm pages"},
		{[]string{"--engine", "trtllm", "--kv-connector"}, "kv connector is not simulated on trtllm pages"},
		{[]string{"--engine", "trtllm", "--mfu-metrics"}, "mfu-metrics and kv-cache-metrics are vLLM's"},
		{[]string{"--engine", "trtllm", "--api-server-count", "2"}, "api server count is vLLM's"},
		{[]string{"--engine", "trtllm", "--router"}, "a router is SGLang's"},
		{[]string{"--engine", "tensorrt"}, `engine "tensorrt" is not simulated: use vllm, sglang or trtllm`},
	} {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if code := runSim(context.Background(), tt.args, &stdout, &stderr); code != exitUsage {
				t.Fatalf("exit %d, want %d", code, exitUsage)
			}
			if !strings.Contains(stderr.String(), tt.want) {
				t.Errorf("stderr %q lacks %q", stderr.String(), tt.want)
			}
		})
	}
	var stdout, stderr bytes.Buffer
	if code := demoWith(context.Background(), []string{"--engine", "tensorrt"}, &stdout, &stderr); code != exitUsage ||
		!strings.Contains(stderr.String(), "--engine must be vllm, sglang or trtllm") {
		t.Errorf("demo --engine tensorrt: exit %d, stderr %q", code, stderr.String())
	}
}
