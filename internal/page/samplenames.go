package page

import "github.com/vllmstat/vllmstat/internal/vllm"

// SampleNames returns every exact sample name vllmstat reads on vLLM's pages (every spelling of
// every family: vLLM's, Ray's, old names), in a fixed order. A scraper can ask a server for only
// these (prometheus_client renders only the samples named by name[] query parameters). SGLang's
// names are not among them: SGLang serves its page through a multiprocess registry, which
// answers such a request with an empty page, so its targets are read whole.
func SampleNames() []string {
	var out []string
	for i, n := range table.names {
		if table.metas[i].eng == vllm.VLLM {
			out = append(out, n)
		}
	}
	return out
}
