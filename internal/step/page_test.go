package step

import (
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/vllmstat/vllmstat/internal/page"
)

// eng describes one engine's cumulative values for a generated test page.
type eng struct {
	engine                 string // "-" for no engine label
	queries, hits, preempt float64
	prompt, gen            float64
	created                float64 // _created of every counter; 0 = no _created samples
	running, waiting, kv   float64
	success                map[string]float64
	ttft                   []float64 // cumulative counts for ttftBounds, +Inf last
	ttftSum                float64
	oldNames, bothNames    bool   // 0.9.1 spelling only; 0.10 spelling (old and new)
	prefix                 string // default "vllm:"
	noTotal                bool   // counters without _total, as some Ray versions export them
	noCount                bool   // histograms without _count
}

var ttftBounds = []string{"0.1", "0.5", "1.0", "+Inf"}

// renderPage renders engines as a prometheus_client-style page.
func renderPage(engines ...eng) string {
	var b strings.Builder
	b.WriteString("# HELP process_cpu_seconds_total cpu\n# TYPE process_cpu_seconds_total counter\nprocess_cpu_seconds_total 12.5\n")
	for _, e := range engines {
		p := e.prefix
		if p == "" {
			p = "vllm:"
		}
		lbl := func(extra string) string {
			var ls []string
			if e.engine != "-" {
				ls = append(ls, fmt.Sprintf("engine=%q", e.engine))
			}
			if extra != "" {
				ls = append(ls, extra)
			}
			ls = append(ls, `model_name="m"`)
			sort.Strings(ls)
			return "{" + strings.Join(ls, ",") + "}"
		}
		counter := func(name string, v float64, extra string) {
			total := "_total"
			if e.noTotal {
				total = ""
			}
			fmt.Fprintf(&b, "%s%s%s%s %v\n", p, name, total, lbl(extra), v)
			if e.created != 0 {
				fmt.Fprintf(&b, "%s%s_created%s %v\n", p, name, lbl(extra), e.created)
			}
		}
		gauge := func(name string, v float64) { fmt.Fprintf(&b, "%s%s%s %v\n", p, name, lbl(""), v) }
		gauge("num_requests_running", e.running)
		gauge("num_requests_waiting", e.waiting)
		if !e.oldNames {
			gauge("kv_cache_usage_perc", e.kv)
			counter("prefix_cache_queries", e.queries, "")
			counter("prefix_cache_hits", e.hits, "")
		}
		if e.oldNames || e.bothNames {
			gauge("gpu_cache_usage_perc", e.kv)
			counter("gpu_prefix_cache_queries", e.queries, "")
			counter("gpu_prefix_cache_hits", e.hits, "")
		}
		counter("num_preemptions", e.preempt, "")
		counter("prompt_tokens", e.prompt, "")
		counter("generation_tokens", e.gen, "")
		for _, r := range []string{"stop", "length", "abort"} {
			counter("request_success", e.success[r], fmt.Sprintf("finished_reason=%q", r))
		}
		if e.ttft != nil {
			for i, le := range ttftBounds {
				fmt.Fprintf(&b, "%stime_to_first_token_seconds_bucket%s %v\n", p, lbl(fmt.Sprintf("le=%q", le)), e.ttft[i])
			}
			if !e.noCount {
				fmt.Fprintf(&b, "%stime_to_first_token_seconds_count%s %v\n", p, lbl(""), e.ttft[len(e.ttft)-1])
			}
			fmt.Fprintf(&b, "%stime_to_first_token_seconds_sum%s %v\n", p, lbl(""), e.ttftSum)
			if e.created != 0 {
				fmt.Fprintf(&b, "%stime_to_first_token_seconds_created%s %v\n", p, lbl(""), e.created)
			}
		}
	}
	return b.String()
}

func mustPage(t testing.TB, engines ...eng) *page.Page {
	t.Helper()
	p, err := page.ParsePage([]byte(renderPage(engines...)))
	if err != nil {
		t.Fatalf("parse generated page: %v\n%s", err, renderPage(engines...))
	}
	return p
}
