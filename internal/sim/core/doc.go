// Package core models one inference engine core on a simulated clock, without any I/O: vLLM's
// V1 scheduler (a paged KV cache with a hashed prefix cache, a running batch, a FCFS waiting
// queue, chunked prefill, recompute preemption, speculative decoding), its sleep mode and weight
// loads, SGLang's scheduler log points, and the engine's ground truth (the ledger). What it
// counts it writes to a snap.EngineStats, which is all the page writers see of it.
package core
