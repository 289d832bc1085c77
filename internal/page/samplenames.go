package page

import "github.com/vllmstat/vllmstat/internal/vllm"

// SampleNames returns every exact sample name vllmstat reads on vLLM's and TensorRT-LLM's pages
// (every spelling of every family: vLLM's, Ray's, old names, Dynamo's), in a fixed order. A
// scraper can ask a server for only these (prometheus_client renders only the samples named by
// name[] query parameters). SGLang's names are not among them: SGLang serves its page through a
// multiprocess registry, which answers such a request with an empty page, so its targets are
// read whole. trtllm-serve's page is a multiprocess registry too (the scraper's check of a
// restricted answer then reads it whole after one try), but an engine held in-process and served
// by expose() has a single-process registry, which renders the restricted page for a fraction
// of the whole page's cost.
func SampleNames() []string {
	var out []string
	for i, n := range table.names {
		if e := table.metas[i].eng; e == vllm.VLLM || e == vllm.TRTLLM {
			out = append(out, n)
		}
	}
	return out
}
