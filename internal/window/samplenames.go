package window

import "slices"

// SampleNames returns every exact sample name vllmstat reads (every spelling of every family:
// vLLM's, Ray's, old names), in a fixed order. A scraper can ask a server for only these
// (prometheus_client renders only the samples named by name[] query parameters).
func SampleNames() []string { return slices.Clone(table.names) }
