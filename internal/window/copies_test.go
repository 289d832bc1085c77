package window

import (
	"fmt"
	"strings"
	"testing"

	"github.com/vllmstat/vllmstat/internal/page"
	"github.com/vllmstat/vllmstat/internal/vllm"
)

// copiesPage renders an SGLang worker without DP: its tokenizer's prompt tokens, and a copy of
// its scheduler's retractions and queue time per TP rank in ranks (in that order), each copy's
// values its own.
func copiesPage(prompt int, ranks []string, retracted map[string]int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "sglang:prompt_tokens_total{model_name=\"m\"} %d\n", prompt)
	for _, tp := range ranks {
		l := fmt.Sprintf("model_name=\"m\",pp_rank=\"0\",tp_rank=%q", tp)
		fmt.Fprintf(&b, "sglang:num_retracted_requests_total{%s} %d\n", l, retracted[tp])
		fmt.Fprintf(&b, "sglang:queue_time_seconds_bucket{%s,le=\"1.0\"} %d\n", l, retracted[tp])
		fmt.Fprintf(&b, "sglang:queue_time_seconds_bucket{%s,le=\"+Inf\"} %d\n", l, retracted[tp])
		fmt.Fprintf(&b, "sglang:queue_time_seconds_sum{%s} %d\n", l, retracted[tp])
		fmt.Fprintf(&b, "sglang:queue_time_seconds_count{%s} %d\n", l, retracted[tp])
	}
	return b.String()
}

// A worker keeps to the copy of its figures it first read (the lowest ranks'), whichever the
// page's own is, for as long as a page has it; when a page lacks it, the page's own copy is
// read from there on, its series starting as a baseline (no count from the copies' difference,
// nor from the step between them), and the tokenizer's series count on as before.
func TestWorkerKeepsItsCopy(t *testing.T) {
	w := NewWorker()
	for i, s := range []struct {
		prompt    int
		ranks     []string
		retracted map[string]int
		want      float64 // retractions and queue-time observations; -1 for none
		prompts   float64
	}{
		{100, []string{"0", "1"}, map[string]int{"0": 1000, "1": 500}, -1, -1},
		{200, []string{"1", "0"}, map[string]int{"0": 1003, "1": 503}, 3, 100},  // copy 0 still, listed second
		{300, []string{"1"}, map[string]int{"1": 510}, -1, 100},                 // copy 0 gone: copy 1, a baseline
		{400, []string{"0", "1"}, map[string]int{"0": 1020, "1": 520}, 10, 100}, // copy 1 kept
		{500, []string{"0", "1"}, map[string]int{"0": 1020, "1": 521}, 1, 100},
	} {
		p, err := page.ParsePage([]byte(copiesPage(s.prompt, s.ranks, s.retracted)))
		if err != nil || len(p.Engines) != 1 {
			t.Fatalf("page %d: %v, %d workers", i, err, len(p.Engines))
		}
		inc := w.Observe(w.Pick(&p.Engines[0]), 0)
		if got, has := inc.Counters[vllm.Preemptions], inc.HasCounter[vllm.Preemptions]; s.want < 0 && has || s.want >= 0 && got != s.want {
			t.Errorf("page %d: retractions %v (%v), want %v", i, got, has, s.want)
		}
		if h := inc.Hists[vllm.QueueTime]; s.want < 0 && h != nil || s.want >= 0 && (h == nil || h.Count != s.want || h.Sum != s.want) {
			t.Errorf("page %d: queue time %+v, want %v observations", i, h, s.want)
		}
		if got := inc.Counters[vllm.PromptTokens]; s.prompts >= 0 && got != s.prompts {
			t.Errorf("page %d: prompt tokens %v, want %v", i, got, s.prompts)
		}
		if i > 0 && inc.Undated {
			t.Errorf("page %d: undated", i)
		}
	}
}
