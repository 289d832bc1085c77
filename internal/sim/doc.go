// Package sim simulates a fleet of vLLM, SGLang or TensorRT-LLM inference servers for tests and
// demos.
//
// Each simulated server is an HTTP endpoint whose /metrics page is laid out exactly as the page
// the real server prints: the same families, HELP texts, label names and order, bucket bounds,
// `_created` series and float formatting. Behind each page sit one or more data-parallel engines,
// each a small model of vLLM's V1 scheduler. The counters and histograms on the page are the
// counts of what that model did, so a scraper can be checked against the simulator's own totals.
//
// Simulated time is separate from wall time: Sim advances the model as fast as it is asked to
// (that is what tests use), and Fleet paces a Sim against the wall clock and serves it over
// HTTP. With the workload "none" the Fleet's servers also answer the completion and control
// endpoints of vLLM's and SGLang's servers, and only those requests drive the engines.
//
// This package is the simulator's public face; the work is done in the packages below it, laid
// out in docs/simulator.md ("The simulator's rooms"): core (one engine), workload, fleetconfig,
// fleetmodel (the fleet on one clock), snap (what the pages read), the page writers (vllmpage,
// sglangpage, routerpage) and serve (HTTP).
package sim
