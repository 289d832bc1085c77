package step

import (
	"fmt"
	"testing"
	"time"

	"github.com/vllmstat/vllmstat/internal/page"
)

// unfinishedPage is a vLLM engine's page with running and waiting requests, prompt tokens
// counted, and finished requests' prompt tokens (count and sum).
func unfinishedPage(t *testing.T, running, waiting int, prompt float64, finished int, sum float64) *page.Page {
	t.Helper()
	l := `{engine="0",model_name="m"}`
	text := fmt.Sprintf(`# TYPE vllm:num_requests_running gauge
vllm:num_requests_running%[1]s %[2]d
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting%[1]s %[3]d
# TYPE vllm:prompt_tokens counter
vllm:prompt_tokens_total%[1]s %[4]v
vllm:prompt_tokens_created%[1]s 1.7e9
# TYPE vllm:request_prompt_tokens histogram
vllm:request_prompt_tokens_bucket{engine="0",le="1000.0",model_name="m"} %[5]d
vllm:request_prompt_tokens_bucket{engine="0",le="+Inf",model_name="m"} %[5]d
vllm:request_prompt_tokens_count%[1]s %[5]d
vllm:request_prompt_tokens_sum%[1]s %[6]v
vllm:request_prompt_tokens_created%[1]s 1.7e9
`, l, running, waiting, prompt, finished, sum)
	p, err := page.ParsePage([]byte(text))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestAbortedPromptTokens: the prompt tokens of the requests that did not finish are the step's
// prompt tokens less its finished requests' (request_prompt_tokens' sum), given only where the
// engine's page showed no request running or waiting before the step and at its last page: a
// request in flight at either end may count in one and not the other.
func TestAbortedPromptTokens(t *testing.T) {
	const key = "vllm/aborted_prompt_tokens"
	tr := NewTracker(Options{PerWorker: true})
	t0 := time.Unix(2_000_000_000, 0)
	tr.Begin(t0)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	tr.Observe(at(0), "v", unfinishedPage(t, 0, 0, 1000, 5, 1000), nil) // a baseline, idle

	// Step 1: three requests of 300 prompt tokens prefilled, two finished, one aborted.
	tr.Observe(at(1), "v", unfinishedPage(t, 3, 0, 1900, 5, 1000), nil)
	tr.Observe(at(2), "v", unfinishedPage(t, 0, 0, 1900, 7, 1600), nil)
	r := tr.EndStep(1, at(2))
	if got, ok := r.Metrics[key]; !ok || got != 300 {
		t.Errorf("step 1 (idle at both ends): %s = %v (%v), want 300", key, got, ok)
	}
	if len(r.PerWorker) != 1 || r.PerWorker[0].Metrics[key] != 300 {
		t.Errorf("step 1: per worker %+v, want %s 300", r.PerWorker, key)
	}

	// Step 2 ends with a request of 200 tokens prefilled and still running: not told.
	tr.Observe(at(3), "v", unfinishedPage(t, 1, 0, 2100, 7, 1600), nil)
	r = tr.EndStep(2, at(3))
	if got, ok := r.Metrics[key]; ok {
		t.Errorf("step 2 (a request running at its end): %s = %v, want none", key, got)
	}

	// Step 3 finishes it: it was prefilled in step 2, so step 3 starts with it in flight.
	tr.Observe(at(4), "v", unfinishedPage(t, 0, 0, 2100, 8, 1800), nil)
	r = tr.EndStep(3, at(4))
	if got, ok := r.Metrics[key]; ok {
		t.Errorf("step 3 (a request in flight at its start): %s = %v, want none", key, got)
	}

	// Step 4 ends with a preempted request waiting, prefilled already: not told.
	tr.Observe(at(5), "v", unfinishedPage(t, 0, 1, 2500, 8, 1800), nil)
	r = tr.EndStep(4, at(5))
	if got, ok := r.Metrics[key]; ok {
		t.Errorf("step 4 (a request waiting at its end): %s = %v, want none", key, got)
	}

	// Step 5: it is aborted; nothing else happens. Idle at its end, but not at its start.
	tr.Observe(at(6), "v", unfinishedPage(t, 0, 0, 2500, 8, 1800), nil)
	r = tr.EndStep(5, at(6))
	if got, ok := r.Metrics[key]; ok {
		t.Errorf("step 5: %s = %v, want none", key, got)
	}

	// Step 6: idle at both ends, nothing aborted: 0, told.
	tr.Observe(at(7), "v", unfinishedPage(t, 0, 0, 2600, 9, 1900), nil)
	r = tr.EndStep(6, at(7))
	if got, ok := r.Metrics[key]; !ok || got != 0 {
		t.Errorf("step 6: %s = %v (%v), want 0", key, got, ok)
	}
}
