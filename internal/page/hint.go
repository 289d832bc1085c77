package page

import (
	"bytes"
	"strings"
	"sync"

	"github.com/vllmstat/vllmstat/internal/vllm"
)

// Setup hints: what a target's answer tells of a server that does not export the figures
// vllmstat reads, for its user to fix. A 404 is most often a wrong port or path; SGLang also
// answers it for /metrics unless started with --enable-metrics. vLLM registers its families only
// when it logs stats (not with --disable-log-stats); SGLang exports nothing without
// --enable-metrics, and with data parallelism only the stats-logging rank of DP rank 0 exports
// unless it is started with --enable-metrics-for-all-schedulers (scheduler_metrics_mixin.py,
// current_scheduler_metrics_enabled; server_args.py).
const (
	// HintNotFound follows "no metrics page at URL: ".
	HintNotFound = "wrong port or path? An SGLang server serves /metrics only when started with --enable-metrics"
	HintNoFamily = "answers a page without any family vllmstat reads (vllm:, sglang:, trtllm_): a vLLM server exports them unless started " +
		"with --disable-log-stats; an SGLang server only when started with --enable-metrics, and from its first request on"
	HintDPRankZero = "shows SGLang's DP rank 0 only: the other DP ranks export their figures only when the server is started with " +
		"--enable-metrics-for-all-schedulers"
)

// Hint returns the setup hint of a target's answer: its page, nil for a failed scrape, whose
// HTTP status was 404 Not Found when notFound is set; declared is set when the page, without a
// sample vllmstat reads, names one of its families in a HELP or TYPE line (see Declares). ""
// when the answer needs none.
func Hint(p *Page, notFound, declared bool) string {
	switch {
	case notFound:
		return HintNotFound
	case p == nil:
		return ""
	case len(p.Engines) == 0 && declared:
		// The families are there, without series yet: an in-process registry whose labelled
		// metrics have no children before the engine's first stats, which nothing in a server's
		// setup changes.
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

// Declares reports whether a page has a HELP or TYPE line of a family vllmstat reads, in any
// engine's spelling. prometheus_client renders a metric with labels whose children were not
// made yet as these lines alone. It reads the comment lines only, and is meant for the rare page
// that has no sample vllmstat reads.
func Declares(body []byte) bool {
	names := familyNames()
	for len(body) > 0 {
		line := body
		if i := bytes.IndexByte(body, '\n'); i >= 0 {
			line, body = body[:i], body[i+1:]
		} else {
			body = nil
		}
		c, ok := bytes.CutPrefix(bytes.TrimLeft(line, " \t"), []byte("#"))
		if !ok {
			continue
		}
		f := bytes.Fields(c)
		if len(f) >= 2 && (string(f[0]) == "HELP" || string(f[0]) == "TYPE") && names[string(f[1])] {
			return true
		}
	}
	return false
}

// familyNames are the names a HELP or TYPE line may give a family vllmstat reads: its sample
// names, and each without its suffix (a histogram's family; a counter in OpenMetrics, which the
// text format names with _total).
var familyNames = sync.OnceValue(func() map[string]bool {
	m := map[string]bool{}
	for _, n := range table.names {
		m[n] = true
		for _, s := range []string{"_total", "_created", "_bucket", "_sum", "_count"} {
			if base, ok := strings.CutSuffix(n, s); ok {
				m[base] = true
			}
		}
	}
	return m
})
