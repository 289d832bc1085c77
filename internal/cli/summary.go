package cli

import (
	"fmt"
	"strings"

	"github.com/vllmstat/vllmstat/internal/step"
)

// summaryLine is the one-line stderr summary of a closed step. Absent values show as "-",
// without their unit.
func summaryLine(r *step.Record, prefix string) string {
	m := r.Metrics
	v := func(key, format string, scale float64) string {
		x, ok := m[prefix+"/"+key]
		if !ok {
			return "-"
		}
		return fmt.Sprintf(format, x*scale)
	}
	parts := []string{
		fmt.Sprintf("step %d", r.Step),
		fmt.Sprintf("%.1fs", r.DurationS),
		fmt.Sprintf("workers %d", r.Workers),
		fmt.Sprintf("scrapes %d ok %d failed", r.Scrapes.OK, r.Scrapes.Failed),
		"hit " + v("prefix_cache_hit_rate", "%.1f%%", 100),
		"preempt " + v("num_preemptions", "%.0f", 1),
		"kv " + v("kv_cache_usage_perc/mean", "%.2f", 1) + "/" + v("kv_cache_usage_perc/max", "%.2f", 1),
		"run " + v("num_requests_running/mean", "%.1f", 1) + " wait " + v("num_requests_waiting/mean", "%.1f", 1),
		"gen " + v("generation_tokens_per_s", "%.0f tok/s", 1),
		"ttft p50 " + v("time_to_first_token_seconds/p50", "%.3fs", 1),
	}
	return strings.Join(parts, " | ")
}
