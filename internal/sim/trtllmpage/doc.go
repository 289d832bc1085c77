// Package trtllmpage writes a simulated TensorRT-LLM server's Prometheus page, as trtllm-serve
// serves it at /prometheus/metrics: the trtllm_ families of its MetricsCollector, rendered by
// prometheus_client's multiprocess collector. It reads the model only through package snap.
package trtllmpage
