package page

import "github.com/vllmstat/vllmstat/internal/vllm"

// Setup hints: what a target's answer tells of a server that does not export the figures
// vllmstat reads, for its user to fix on the server's side. SGLang exports nothing unless
// started with --enable-metrics (it then mounts /metrics, and answers 404 without it); with data
// parallelism, only the stats-logging rank of DP rank 0 exports unless it is started with
// --enable-metrics-for-all-schedulers (scheduler_metrics_mixin.py,
// current_scheduler_metrics_enabled; server_args.py).
const (
	HintNotFound = "answers 404 Not Found for its metrics: an SGLang server serves /metrics only when started with --enable-metrics"
	HintNoFamily = "answers a page without any family vllmstat reads (vllm:, sglang:): an SGLang server exports them only when started " +
		"with --enable-metrics, and only from its first request on"
	HintDPRankZero = "shows SGLang's DP rank 0 only: the other DP ranks export their figures only when the server is started with " +
		"--enable-metrics-for-all-schedulers"
)

// Hint returns the setup hint of a target's answer: its page, nil for a failed scrape, whose
// HTTP status was 404 Not Found when notFound is set; "" when the answer needs none.
func Hint(p *Page, notFound bool) string {
	switch {
	case notFound:
		return HintNotFound
	case p == nil:
		return ""
	case len(p.Engines) == 0:
		return HintNoFamily
	}
	ranks := 0
	for i := range p.Engines {
		ep := &p.Engines[i]
		if ep.Kind != vllm.SGLang {
			continue
		}
		dp, ok := LabelMap(ep.Labels)["dp_rank"]
		switch {
		case !ok:
		case dp != "0":
			return ""
		default:
			ranks++
		}
	}
	if ranks > 0 {
		return HintDPRankZero
	}
	return ""
}
