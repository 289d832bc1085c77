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

func TestSimHelp(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := runSim(context.Background(), []string{"-h"}, &stdout, &stderr); code != exitOK {
		t.Fatalf("exit %d, stderr %s", code, stderr.String())
	}
	for _, want := range []string{"Usage: vllmstat sim", "-servers", "-dp", "-vllm-version", "-fault", "restart@30s", ":server=N",
		"-colocated", "-train-time", "-eval-every", "-eval-prompts", "vllm:engine_sleep_state",
		"With --workload none", "POST /v1/completions", "/wake_up", "/update_weights_from_disk"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("help lacks %q", want)
		}
	}
}

func TestSimBadFlags(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"--servers", "x"}, `invalid value "x" for flag -servers`},
		{[]string{"--servers", "0"}, "servers must be at least 1"},
		{[]string{"--workload", "burst"}, `workload kind "burst" is not "grpo", "poisson" or "none"`},
		{[]string{"--workload", "none", "--colocated"}, `the async and the colocated loop need a built-in workload, not "none"`},
		{[]string{"--workload", "poisson", "--load-time", "1s"}, "workload load time 1s needs the colocated or the async loop"},
		{[]string{"--workload", "poisson", "--wake-time", "1s"}, `workload wake time 1s needs the colocated loop, or workload "none"`},
		{[]string{"--vllm-version", "0.9"}, "use 0.20 (current names), 0.10"},
		{[]string{"--vllm-version", "0.8", "--dp", "2"}, "use dp 1"},
		{[]string{"--fault", "boom@1s"}, `unknown kind "boom" (want restart, down, slow or garbage)`},
		{[]string{"--fault", "down@1s"}, "down needs a duration"},
		{[]string{"--fault", "restart@1s:server=3"}, "servers are numbered 0 to 1"},
		{[]string{"--speed", "-1"}, "speed must be a positive number"},
		{[]string{"--straggler", "0.5"}, "workload straggler factor must be a number of at least 1 (1 means no straggler), got 0.5"},
		{[]string{"--train-time", "5s"}, "workload train time 5s needs the colocated loop"},
		{[]string{"--eval-every", "2"}, "workload eval every 2 needs the colocated loop"},
		{[]string{"--colocated", "--workload", "poisson"}, `the colocated loop needs the "grpo" workload, got "poisson"`},
		{[]string{"--colocated", "--eval-every", "-1"}, "workload eval every must be 0 (no eval batches) or a number of steps, got -1"},
		{[]string{"--colocated", "--train-time", "-1s"}, "workload train time must not be negative, got -1s"},
		{[]string{"--colocated", "--eval-prompts", "-2"}, "workload eval prompts must be 0 (a quarter of the prompts) or positive, got -2"},
		{[]string{"--mfu-metrics", "--model-params", "0"}, "model params must be a positive number up to 1e15, got 0"},
		{[]string{"--model-params", "-5"}, "model params must be a positive number up to 1e15, got -5"},
		{[]string{"--mfu-metrics", "--model-params", "NaN"}, `invalid value "NaN" for flag -model-params: must be a finite number`},
		{[]string{"--log-level", "loud"}, "-log-level: want debug, info, warn or error"},
		{[]string{"extra"}, `unexpected argument "extra"`},
		{[]string{"--nope"}, "flag provided but not defined: -nope"},
	}
	for _, tt := range tests {
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
}

// TestSimServesUntilCancelled runs the subcommand in-process: it prints one URL per server,
// serves vLLM pages there, and exits 0 when its context ends (as on SIGINT).
func TestSimServesUntilCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pr, pw := io.Pipe()
	var stderr bytes.Buffer
	code := make(chan int, 1)
	go func() {
		code <- runSimContext(ctx, []string{"--port", "0", "--servers", "3", "--dp", "2", "--speed", "10",
			"--fault", "garbage@1h", "--log-level", "error"}, pw, &stderr)
		pw.Close()
	}()
	sc := bufio.NewScanner(pr)
	var urls []string
	for len(urls) < 3 && sc.Scan() {
		urls = append(urls, sc.Text())
	}
	if len(urls) != 3 {
		t.Fatalf("printed %q", urls)
	}
	for _, u := range urls {
		resp, err := http.Get(u)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !strings.Contains(string(body), `vllm:num_requests_running{engine="1",model_name="Qwen/Qwen3-1.7B"}`) {
			t.Errorf("%s does not look like a vLLM page with two engines", u)
		}
	}
	http.DefaultClient.CloseIdleConnections()
	cancel()
	go io.Copy(io.Discard, pr)
	select {
	case c := <-code:
		if c != exitOK {
			t.Fatalf("exit %d, stderr %s", c, stderr.String())
		}
	case <-time.After(5 * time.Second):
		t.Fatal("did not stop")
	}
}

// TestSimWorkloadNoneAnswersCompletions runs `vllmstat sim --workload none` in-process: its
// pages stay empty until a client sends a completion, whose usage the page then shows.
func TestSimWorkloadNoneAnswersCompletions(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pr, pw := io.Pipe()
	var stderr bytes.Buffer
	code := make(chan int, 1)
	go func() {
		code <- runSimContext(ctx, []string{"--workload", "none", "--port", "0", "--servers", "1", "--speed", "10",
			"--log-level", "error"}, pw, &stderr)
		pw.Close()
	}()
	sc := bufio.NewScanner(pr)
	if !sc.Scan() {
		t.Fatalf("printed nothing; stderr %s", stderr.String())
	}
	metrics := sc.Text()
	go io.Copy(io.Discard, pr)
	counter := func(name string) string {
		t.Helper()
		resp, err := http.Get(metrics)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		for _, line := range strings.Split(string(body), "\n") {
			if v, ok := strings.CutPrefix(line, name+`{engine="0",model_name="Qwen/Qwen3-1.7B"} `); ok {
				return v
			}
		}
		t.Fatalf("page has no %s", name)
		return ""
	}
	if got := counter("vllm:prompt_tokens_total"); got != "0.0" {
		t.Errorf("prompt tokens %s before any request, want 0.0: the workload is not off", got)
	}
	resp, err := http.Post(strings.TrimSuffix(metrics, "/metrics")+"/v1/completions", "application/json",
		strings.NewReader(`{"prompt": "one two three four five", "n": 2, "max_tokens": 4, "ignore_eos": true}`))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"usage":{"prompt_tokens":10,"total_tokens":18,"completion_tokens":8}`) {
		t.Fatalf("%s: %s", resp.Status, body)
	}
	if p, g := counter("vllm:prompt_tokens_total"), counter("vllm:generation_tokens_total"); p != "10.0" || g != "8.0" {
		t.Errorf("the page counted %s prompt and %s generation tokens, want the usage's 10 and 8", p, g)
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
