// Copies of test helpers whose originals are in the tests of the simulator's other packages:
// a test file cannot be imported.

package vllmpage

import (
	"time"

	"github.com/vllmstat/vllmstat/internal/sim/fleetconfig"
)

// colocatedConfig is the demo's fleet in the colocated loop: 2 servers x 2 engines, an eval
// batch every second step, four steps.
func colocatedConfig() fleetconfig.Config {
	cfg := fleetconfig.DefaultConfig()
	cfg.DP = 2
	cfg.Workload.Colocated = true
	cfg.Workload.EvalEvery = 2
	cfg.Workload.Batches = 4
	return cfg
}

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
