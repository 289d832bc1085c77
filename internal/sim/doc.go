// Package sim simulates a fleet of vLLM inference servers for tests and demos.
//
// Each simulated server is an HTTP endpoint whose /metrics page is laid out exactly as the page a
// vLLM OpenAI-compatible API server prints through Python's prometheus_client: the same families,
// HELP texts, label names and order, bucket bounds, `_created` series and float formatting, for a
// few vLLM release styles (see families.go). Behind each page sit one or more data-parallel
// engines. Each engine is a small model of vLLM's V1 scheduler: a paged KV cache with a hashed
// prefix cache, a running batch, a FCFS waiting queue, chunked prefill and recompute preemption.
// The counters and histograms on the page are the counts of what that model did, so a scraper can
// be checked against the simulator's own totals.
//
// Simulated time is separate from wall time: Sim advances the model as fast as it is asked to (that
// is what tests use), and Fleet paces a Sim against the wall clock and serves it over HTTP. With
// the workload "none" the Fleet's servers also answer the completion and control endpoints of
// vLLM's and SGLang's servers, and only those requests drive the engines (see drive.go).
package sim
