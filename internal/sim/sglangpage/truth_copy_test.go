package sglangpage

import (
	"time"

	"github.com/vllmstat/vllmstat/internal/sim/fleetconfig"
)

// asyncConfig is two servers of two vLLM engines in the async loop: a publish every 10 s, loads
// of 2 s, one engine 3 s late; GRPO batches one after another.
func asyncConfig() fleetconfig.Config {
	cfg := fleetconfig.DefaultConfig()
	cfg.DP = 2
	cfg.Workload.Async = true
	cfg.Workload.StepTime = 10 * time.Second
	cfg.Workload.Lag = 3 * time.Second
	cfg.Workload.LoadTime = 2 * time.Second
	cfg.Workload.Pause = 0
	return cfg
}
