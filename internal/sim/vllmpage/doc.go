// Package vllmpage writes a simulated vLLM API server's /metrics page, in the layouts of a few
// vLLM releases, single-process or through prometheus_client's multiprocess collector
// (--api-server-count above 1). It reads the model only through package snap.
package vllmpage
